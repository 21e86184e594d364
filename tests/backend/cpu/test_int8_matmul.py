"""int8 matrix products against onnxruntime: QLinearMatMul, MatMulInteger, and the QDQ forms
quantize_static writes for MatMul (weights [K, N], per-channel along axis 1) and Gemm
(transB=1, weights [N, K] per-channel along axis 0, int32 bias), at M = 1 (a batch-1
classifier), M = 7 and a batched 3-D input, with ragged N = 1000 / K = 513, U8S8 and S8S8,
asymmetric zero points, saturation, a float output after a final DequantizeLinear, and
extreme operands whose exact int32 products are known by arithmetic.

Tolerance: the issue's "within one quantization step" (int8_models); int32 outputs exact."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from tests.helpers import make_model, run_ort
from tests.backend.cpu.int8_models import (OPSET, Quant, assert_float_within_one_step, assert_informative,
                                     assert_within_one_step, bias_values, dequantized_weights, int8_weights,
                                     output_scale, qdq, quantized, run_both, weight_scales)

U8 = np.uint8
S8 = np.int8
FORMS = ["qlinear_matmul", "qdq_matmul", "qdq_gemm"]


def _model(form: str, a: np.ndarray, a_q: Quant, w: np.ndarray, w_scale: np.ndarray, y_q: Quant,
           bias: np.ndarray | None, float_output: bool = False) -> onnx.ModelProto:
    """w is [K, N]; the Gemm form stores it transposed ([N, K], transB=1) as quantize_static does."""
    if form == "qlinear_matmul":
        inits = {**a_q.params("a"), "w": w, "w_scale": w_scale, "w_zero": np.zeros(w_scale.shape, np.int8),
                 **y_q.params("y")}
        node = helper.make_node("QLinearMatMul", ["x", "a_scale", "a_zero", "w", "w_scale", "w_zero",
                                                  "y_scale", "y_zero"], ["y"])
        return make_model([node], {"x": a}, ["y"], inits, OPSET)
    if form == "qdq_matmul":
        nodes, inits, names = dequantized_weights(w, w_scale, None, a_q, axis=1)
        nodes.append(helper.make_node("MatMul", ["x_f"] + names, ["mm"]))
    else:
        nodes, inits, names = dequantized_weights(np.ascontiguousarray(w.T), w_scale, bias, a_q, axis=0)
        nodes.append(helper.make_node("Gemm", ["x_f"] + names, ["mm"], transB=1))
    model = qdq(nodes, a, a_q, y_q, "mm", inits)
    if float_output:
        model.graph.node.append(helper.make_node("DequantizeLinear", ["y", "y_scale", "y_zero"], ["out"]))
        model.graph.output[0].name = "out"
    return model


def _case(form: str, rows: tuple[int, ...], k: int, n: int, a_dtype=U8, a_zero: int = 37, y_zero: int = 128,
          per_channel: bool = True, spread: float = 1.0, float_output: bool = False,
          seed: int = 0) -> tuple[onnx.ModelProto, np.ndarray, Quant]:
    a_q = Quant(a_dtype, 0.02, a_zero)
    a = quantized(rows + (k,), a_q, seed)
    w = int8_weights((k, n), seed + 1)
    w_scale = weight_scales(n, per_channel)
    y_q = Quant(a_dtype, output_scale(a, a_q, w, w_scale, k, spread), y_zero)
    bias = bias_values(n, a_q, w_scale, y_q, seed + 2) if form == "qdq_gemm" else None
    return _model(form, a, a_q, w, w_scale, y_q, bias, float_output), a, y_q


SHAPES = [((1,), 513, 1000), ((7,), 513, 1000), ((7,), 64, 48), ((1,), 512, 10), ((7,), 17, 3)]


@pytest.mark.parametrize("rows,k,n", SHAPES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
@pytest.mark.parametrize("form", FORMS)
def test_shapes(form, rows, k, n):
    model, a, y_q = _case(form, rows, k, n)
    (got,), (want,) = run_both(model, {"x": a})
    assert want.shape == rows + (n,)
    assert_informative(want, y_q, f"{form} {rows} {k} {n}")
    assert_within_one_step(got, want, f"{form} {rows} {k} {n}")


@pytest.mark.parametrize("form", ["qlinear_matmul", "qdq_matmul"])
def test_batched_rows(form):
    """A 3-D activation [2, 7, K] against 2-D weights (a sequence model's projection)."""
    model, a, y_q = _case(form, (2, 7), 64, 33)
    (got,), (want,) = run_both(model, {"x": a})
    assert_within_one_step(got, want, f"{form} batched")


QUANTIZATIONS = [  # (a dtype, a zero point, y zero point, per-channel weight scales)
    (U8, 0, 128, True), (U8, 128, 0, True), (U8, 255, 200, False), (U8, 37, 200, True),
    (S8, 0, 0, True), (S8, -128, 100, False), (S8, -91, -100, True),
]


@pytest.mark.parametrize("a_dtype,a_zero,y_zero,per_channel", QUANTIZATIONS,
                         ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("form", FORMS)
def test_quantization(form, a_dtype, a_zero, y_zero, per_channel):
    model, a, y_q = _case(form, (7,), 65, 40, a_dtype, a_zero, y_zero, per_channel)
    (got,), (want,) = run_both(model, {"x": a})
    assert_informative(want, y_q, f"{form} {a_dtype.__name__} {a_zero} {y_zero}")
    assert_within_one_step(got, want, f"{form} {a_dtype.__name__} {a_zero} {y_zero}")


@pytest.mark.parametrize("a_dtype,y_zero", [(U8, 128), (S8, 0)], ids=["u8", "s8"])
@pytest.mark.parametrize("form", FORMS)
def test_saturation_at_both_ends(form, a_dtype, y_zero):
    model, a, y_q = _case(form, (7,), 128, 64, a_dtype, y_zero=y_zero, spread=20)
    (got,), (want,) = run_both(model, {"x": a})
    assert np.mean(want == y_q.low) > 0.2 and np.mean(want == y_q.high) > 0.2
    assert_within_one_step(got, want, f"{form} saturated")


@pytest.mark.parametrize("form", ["qdq_matmul", "qdq_gemm"])
def test_float_output_after_dequantize(form):
    """A classifier's last layer: ... -> QuantizeLinear -> DequantizeLinear -> float logits."""
    model, a, y_q = _case(form, (1,), 513, 1000, float_output=True)
    (got,), (want,) = run_both(model, {"x": a})
    assert want.dtype == np.float32 and np.std(want) > 10 * y_q.scale
    assert_float_within_one_step(got, want, y_q.scale, f"{form} float output")


@pytest.mark.parametrize("a_dtype,a_zero,b_zero", [(U8, 37, 0), (U8, 200, 3), (S8, -91, 0), (S8, 0, -5)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("rows,k,n", [((1,), 513, 1000), ((7,), 65, 40), ((2, 7), 17, 3)],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_matmul_integer(rows, k, n, a_dtype, a_zero, b_zero):
    """int32 accumulators: equal to numpy's int64 product and to onnxruntime."""
    a_q = Quant(a_dtype, 1.0, a_zero)
    a = quantized(rows + (k,), a_q, seed=3)
    b = int8_weights((k, n), seed=4)
    inits = {"b": b, "a_zero": np.array(a_zero, a_dtype), "b_zero": np.array(b_zero, np.int8)}
    model = make_model([helper.make_node("MatMulInteger", ["x", "b", "a_zero", "b_zero"], ["y"])],
                       {"x": a}, ["y"], inits, OPSET)
    exact = (a.astype(np.int64) - a_zero) @ (b.astype(np.int64) - b_zero)
    want, = run_ort(model, {"x": a})
    np.testing.assert_array_equal(want, exact)
    got, = hobbit.compile(model).run({"x": a})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, exact)


EXTREME_COLUMNS = np.array([127, -128, -127, 127, -128], np.int8)
EXTREMES = [(U8, 255, 0), (U8, 0, 255), (S8, -128, 0), (S8, 127, -128)]  # (a dtype, a value, a zero point)


@pytest.mark.parametrize("a_dtype,a_value,a_zero", EXTREMES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_extreme_operands_accumulate_exactly(a_dtype, a_value, a_zero):
    """K = 4608 products of +-255 and +-128: |acc| = 150,405,120 exceeds int16 and a saturating
    vpmaddubsw pair (255 * 127 * 2 > 32767) at every step."""
    k = 4608
    a = np.full((2, k), a_value, a_dtype)
    b = np.broadcast_to(EXTREME_COLUMNS, (k, EXTREME_COLUMNS.size)).copy()
    inits = {"b": b, "a_zero": np.array(a_zero, a_dtype)}
    model = make_model([helper.make_node("MatMulInteger", ["x", "b", "a_zero"], ["y"])], {"x": a}, ["y"], inits, OPSET)
    exact = np.broadcast_to(k * (a_value - a_zero) * EXTREME_COLUMNS.astype(np.int64), (2, EXTREME_COLUMNS.size))
    want, = run_ort(model, {"x": a})
    np.testing.assert_array_equal(want, exact)
    got, = hobbit.compile(model).run({"x": a})
    np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize("a_dtype,a_value,a_zero", EXTREMES, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("form", FORMS)
def test_extreme_operands_requantize_exactly(form, a_dtype, a_value, a_zero):
    """The same products requantized with per-column scales 0.001 * 127 / |w| to 100 steps from y's
    zero point (an exact integer, far from ties), so hobbit must equal the arithmetic."""
    k = 4608
    a_q = Quant(a_dtype, 0.02, a_zero)
    a = np.full((2, k), a_value, a_dtype)
    w = np.broadcast_to(EXTREME_COLUMNS, (k, EXTREME_COLUMNS.size)).copy()
    w_scale = (0.001 * 127 / np.abs(EXTREME_COLUMNS.astype(np.float64))).astype(np.float32)
    y_q = Quant(a_dtype, k * abs(a_value - a_zero) * 127 * a_q.scale * 0.001 / 100, 128 if a_dtype == U8 else 0)
    zero_bias = np.zeros(EXTREME_COLUMNS.size, np.int32) if form == "qdq_gemm" else None
    model = _model(form, a, a_q, w, w_scale, y_q, zero_bias)
    exact = np.broadcast_to((y_q.zero + 100 * np.sign(a_value - a_zero) * np.sign(EXTREME_COLUMNS)).astype(a_dtype),
                            (2, EXTREME_COLUMNS.size))
    (got,), (want,) = run_both(model, {"x": a})
    np.testing.assert_array_equal(want, exact)
    np.testing.assert_array_equal(got, exact)
