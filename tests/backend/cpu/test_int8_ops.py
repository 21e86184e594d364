"""The QDQ patterns between convolutions in quantized CNNs, against onnxruntime (which fuses
them into its QLinearAdd / QLinearConcat / QLinearAveragePool / QLinearGlobalAveragePool
kernels or drops the DQ/Q pair around MaxPool, Relu and shape ops): DQ -> Add <- DQ -> Q
(different scales, with and without Relu), DQ -> MaxPool / AveragePool /
GlobalAveragePool / Concat / Relu / Flatten / Reshape -> Q, and the model boundaries
(float -> Q at the input, Q -> DQ -> float at the output).

Output scales and zero points are calibrated by min/max on the float result, as
quantize_static does. Tolerance: the issue's "within one quantization step" (int8_models)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from tests.helpers import make_model
from tests.backend.cpu.int8_models import (OPSET, Quant, assert_float_within_one_step, assert_informative,
                                     assert_within_one_step, dequantized_weights, int8_weights, quantized,
                                     run_both)

U8 = np.uint8
S8 = np.int8
DTYPES = [U8, S8]


def _calibrated(real: np.ndarray, dtype) -> Quant:
    """Min/max calibration of `real` (its range widened to hold 0), as quantize_static does."""
    info = np.iinfo(dtype)
    low, high = min(float(real.min()), 0.0), max(float(real.max()), 0.0)
    scale = (high - low) / (int(info.max) - int(info.min))
    return Quant(dtype, scale, int(np.clip(np.rint(info.min - low / scale), info.min, info.max)))


def _real(x: np.ndarray, q: Quant) -> np.ndarray:
    return (x.astype(np.float64) - q.zero) * np.float32(q.scale)


def _model(inputs: dict[str, tuple[np.ndarray, Quant]], op_nodes: list[onnx.NodeProto], last: str, y_q: Quant,
           inits: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """Each quantized input `n` -> DequantizeLinear -> `n_f`; `op_nodes` end in `last` -> QuantizeLinear -> y."""
    nodes = [helper.make_node("DequantizeLinear", [n, f"{n}_scale", f"{n}_zero"], [f"{n}_f"]) for n in inputs]
    params = {k: v for n, (_, q) in inputs.items() for k, v in q.params(n).items()}
    nodes += op_nodes + [helper.make_node("QuantizeLinear", [last, "y_scale", "y_zero"], ["y"])]
    return make_model(nodes, {n: x for n, (x, _) in inputs.items()}, ["y"],
                      {**params, **y_q.params("y"), **(inits or {})}, OPSET)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], y_q: Quant, what: str) -> np.ndarray:
    (got,), (want,) = run_both(model, feeds)
    assert_informative(want, y_q, what)
    assert_within_one_step(got, want, what)
    return want


def _input(shape: tuple[int, ...], dtype, scale: float, zero: int, seed: int) -> tuple[np.ndarray, Quant]:
    q = Quant(dtype, scale, zero)
    return quantized(shape, q, seed), q


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_add_of_differently_scaled_inputs(dtype, relu):
    """A residual join: the two branches carry their own scales and zero points."""
    a = _input((1, 17, 7, 7), dtype, 0.031, 40 if dtype == U8 else -20, seed=1)
    b = _input((1, 17, 7, 7), dtype, 0.012, 180 if dtype == U8 else 50, seed=2)
    real = _real(*a) + _real(*b)
    nodes = [helper.make_node("Add", ["a_f", "b_f"], ["sum"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["sum"], ["relu"]))
        real = np.maximum(real, 0)
    y_q = _calibrated(real, dtype)
    model = _model({"a": a, "b": b}, nodes, nodes[-1].output[0], y_q)
    _check(model, {"a": a[0], "b": b[0]}, y_q, f"Add relu={relu}")


def test_add_broadcasting_a_channel_vector():
    a = _input((2, 16, 5, 5), U8, 0.02, 128, seed=3)
    b = _input((1, 16, 1, 1), U8, 0.05, 7, seed=4)
    y_q = _calibrated(_real(*a) + _real(*b), U8)
    model = _model({"a": a, "b": b}, [helper.make_node("Add", ["a_f", "b_f"], ["sum"])], "sum", y_q)
    _check(model, {"a": a[0], "b": b[0]}, y_q, "Add broadcast")


POOLS = [  # (attributes, input spatial size)
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 14),  # ResNet's stem pool
    ({"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 13),  # SqueezeNet's pools
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, 8),
]


@pytest.mark.parametrize("attrs,size", POOLS, ids=["k3s2p1", "k3s2ceil", "k2s2"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_max_pool(dtype, attrs, size):
    """quantize_static gives MaxPool's output the input's scale and zero point."""
    x = _input((1, 17, size, size), dtype, 0.02, 37 if dtype == U8 else -5, seed=5)
    model = _model({"x": x}, [helper.make_node("MaxPool", ["x_f"], ["pool"], **attrs)], "pool", x[1])
    _check(model, {"x": x[0]}, x[1], f"MaxPool {attrs}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_max_pool_requantized(dtype):
    """A different output scale: the pool's maximum must be requantized, not passed through."""
    x = _input((1, 8, 9, 9), dtype, 0.02, 100 if dtype == U8 else 0, seed=6)
    y_q = Quant(dtype, 0.013, 20 if dtype == U8 else -30)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model = _model({"x": x}, [helper.make_node("MaxPool", ["x_f"], ["pool"], **attrs)], "pool", y_q)
    _check(model, {"x": x[0]}, y_q, "MaxPool requantized")


AVERAGE_POOLS = [
    ({"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "count_include_pad": 0}, 9),
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}, 9),
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, 8),
]


@pytest.mark.parametrize("attrs,size", AVERAGE_POOLS, ids=["k3p1exclude", "k3s2p1include", "k2s2"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_average_pool(dtype, attrs, size):
    x = _input((2, 17, size, size), dtype, 0.02, 37 if dtype == U8 else -5, seed=7)
    y_q = Quant(dtype, 0.011, 30 if dtype == U8 else -60)  # finer than x: averages need the steps
    model = _model({"x": x}, [helper.make_node("AveragePool", ["x_f"], ["pool"], **attrs)], "pool", y_q)
    _check(model, {"x": x[0]}, y_q, f"AveragePool {attrs}")


@pytest.mark.parametrize("size,channels", [(7, 512), (13, 1000), (1, 17)])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_global_average_pool(dtype, size, channels):
    """ResNet's 7x7x512 and SqueezeNet's 13x13x1000 heads. Averages of uniform data concentrate
    near the mean, so x's zero point sits mid-range (the averages spread around 0) and y is
    calibrated on the averages themselves, a few times finer than x."""
    x = _input((1, channels, size, size), dtype, 0.02, 128 if dtype == U8 else 0, seed=8)
    y_q = _calibrated(_real(*x).mean(axis=(2, 3)), dtype)
    model = _model({"x": x}, [helper.make_node("GlobalAveragePool", ["x_f"], ["pool"])], "pool", y_q)
    _check(model, {"x": x[0]}, y_q, f"GlobalAveragePool {size}x{size}x{channels}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_concat_of_differently_scaled_inputs(dtype):
    """SqueezeNet's fire-module join (1x1 and 3x3 expand branches), three inputs, odd widths."""
    zeros = [0, 90, 200] if dtype == U8 else [-128, 0, 71]
    parts = {f"in{i}": _input((1, c, 6, 6), dtype, s, z, seed=9 + i)
             for i, (c, s, z) in enumerate(zip([5, 16, 3], [0.02, 0.05, 0.007], zeros))}
    y_q = _calibrated(np.concatenate([_real(*p) for p in parts.values()], axis=1), dtype)
    node = helper.make_node("Concat", [f"{n}_f" for n in parts], ["cat"], axis=1)
    _check(_model(parts, [node], "cat", y_q), {n: p[0] for n, p in parts.items()}, y_q, "Concat")


@pytest.mark.parametrize("same_params", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_relu(dtype, same_params):
    x = _input((1, 17, 5, 5), dtype, 0.02, 128 if dtype == U8 else 10, seed=12)
    y_q = x[1] if same_params else _calibrated(np.maximum(_real(*x), 0), dtype)
    model = _model({"x": x}, [helper.make_node("Relu", ["x_f"], ["relu"])], "relu", y_q)
    _check(model, {"x": x[0]}, y_q, f"Relu same={same_params}")


@pytest.mark.parametrize("op", ["Flatten", "Reshape"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_shape_ops_keep_the_quantization(dtype, op):
    """ResNet's GlobalAveragePool -> Flatten -> Gemm, MobileNet's Reshape to [N, C]."""
    x = _input((2, 17, 1, 1), dtype, 0.02, 37 if dtype == U8 else -5, seed=13)
    inits = {"shape": np.array([2, 17], np.int64)} if op == "Reshape" else {}
    node = (helper.make_node("Flatten", ["x_f"], ["flat"], axis=1) if op == "Flatten"
            else helper.make_node("Reshape", ["x_f", "shape"], ["flat"]))
    want = _check(_model({"x": x}, [node], "flat", x[1], inits), {"x": x[0]}, x[1], op)
    np.testing.assert_array_equal(want, x[0].reshape(2, 17))


def _ties(q: Quant, count: int, seed: int) -> np.ndarray:
    """Float values on rounding ties (k + 1/2 steps), on steps, and beyond both ends of the range."""
    steps = np.random.default_rng(seed).integers(q.low - q.zero - 20, q.high - q.zero + 20, count, endpoint=True)
    halves = np.where(np.arange(count) % 2 == 0, 0.5, 0.0)
    return ((steps + halves) * np.float32(q.scale)).astype(np.float32)


@pytest.mark.parametrize("dtype,zero", [(U8, 0), (U8, 131), (S8, 0), (S8, -77)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_quantize_dequantize_at_the_model_boundaries(dtype, zero):
    """float x -> QuantizeLinear -> DequantizeLinear -> float output (a quantized model's first and
    last nodes), on ties and out-of-range values."""
    q = Quant(dtype, 0.0625, zero)  # a power of two: k + 1/2 steps are exact ties in float32
    x = _ties(q, 600, seed=14).reshape(2, 300)
    nodes = [helper.make_node("QuantizeLinear", ["x", "q_scale", "q_zero"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "q_scale", "q_zero"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], q.params("q"), OPSET)
    (got,), (want,) = run_both(model, {"x": x})
    assert_float_within_one_step(got, want, q.scale, "Q -> DQ")


def test_float_in_float_out_conv_block():
    """A whole small quantized model as quantize_static writes one: float input -> Q -> DQ ->
    Conv -> Q -> DQ -> MaxPool -> Q -> DQ -> float output; compared in output steps."""
    gen = np.random.default_rng(15)
    x = gen.standard_normal((1, 5, 9, 9)).astype(np.float32)
    x_q, y_q = Quant(U8, float(np.ptp(x)) / 255, int(np.rint(-x.min() / (np.ptp(x) / 255)))), Quant(U8, 0.05, 110)
    w = int8_weights((7, 5, 3, 3), seed=16)
    w_nodes, inits, names = dequantized_weights(w, np.full(7, 0.004, np.float32), None, x_q, axis=0)
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["x_f"]), *w_nodes,
             helper.make_node("Conv", ["x_f"] + names, ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["conv", "y_scale", "y_zero"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "y_scale", "y_zero"], ["c_f"]),
             helper.make_node("MaxPool", ["c_f"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["pool", "y_scale", "y_zero"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "y_scale", "y_zero"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {**inits, **x_q.params("x"), **y_q.params("y")}, OPSET)
    (got,), (want,) = run_both(model, {"x": x})
    assert np.std(want) > 5 * y_q.scale
    assert_float_within_one_step(got, want, y_q.scale, "float conv block")


# -- On the integers: Concat and the global mean as byte kernels, bit-exact ----------------------
# onnxruntime's QLinearConcat requantizes by a table built with DequantizeLinear -> QuantizeLinear's
# float32 operations and its QLinearGlobalAveragePool sums in int32 and multiplies by
# x_scale / (y_scale * HW); hobbit's QRequantize and QGlobalAveragePool compute the same, so the
# bar is equality, not one step.

def _compiled_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op for n in hobbit.compile(model, cache=False).report.graph.nodes]


def _check_exact(model: onnx.ModelProto, feeds: dict[str, np.ndarray], y_q: Quant, what: str) -> np.ndarray:
    (got,), (want,) = run_both(model, feeds)
    assert_informative(want, y_q, what)
    np.testing.assert_array_equal(got, want, err_msg=what)
    return want


@pytest.mark.parametrize("batch", [1, 2], ids=["in_place", "copied"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_concat_requantizes_on_the_integers(dtype, batch):
    """Four inputs: one with the output's parameters (a plain copy), three requantized, the coarsest
    saturating at both ends of y's range. At batch 1 the inputs are written into their slices of
    the output (the Concat is in place); at batch 2 the Concat copies."""
    y_q = Quant(dtype, 0.02, 100 if dtype == U8 else -10)
    params = [(y_q.scale, y_q.zero), (0.05, 30 if dtype == U8 else -90), (0.007, 200 if dtype == U8 else 60),
              (0.021, y_q.zero)]
    parts = {f"in{i}": _input((batch, c, 5, 7), dtype, s, z, seed=20 + i)
             for i, (c, (s, z)) in enumerate(zip([3, 16, 5, 8], params))}
    model = _model(parts, [helper.make_node("Concat", [f"{n}_f" for n in parts], ["cat"], axis=1)], "cat", y_q)
    ops = _compiled_ops(model)
    assert ops.count("QRequantize") == 3 and "DequantizeLinear" not in ops and "QuantizeLinear" not in ops, ops
    want = _check_exact(model, {n: p[0] for n, p in parts.items()}, y_q, f"Concat batch {batch}")
    assert want.min() == y_q.low and want.max() == y_q.high


@pytest.mark.parametrize("x_params, multiplied", [((0.0280096, 0), True), ((0.023786403, 45), False)],
                         ids=["multiplied", "divided"])
def test_requantize_multiplies_only_where_no_byte_moves(x_params, multiplied):
    """QRequantize divides by y_scale as onnxruntime's table does, unless the int8 pass checked
    that one multiplier x_scale / y_scale rounds every byte the same (SqueezeNet's eight do;
    these second parameters, found by a search, move a byte). Both ways match bit for bit."""
    y_q = Quant(U8, 0.017546578, 0)
    parts = {"in0": _input((1, 3, 9, 11), U8, y_q.scale, y_q.zero, seed=50),
             "in1": _input((1, 7, 9, 11), U8, *x_params, seed=51)}
    model = _model(parts, [helper.make_node("Concat", ["in0_f", "in1_f"], ["cat"], axis=1)], "cat", y_q)
    requantize, = [n for n in hobbit.compile(model, cache=False).report.graph.nodes if n.op == "QRequantize"]
    assert (requantize.attrs["multiplier"] != 0) == multiplied
    _check_exact(model, {n: p[0] for n, p in parts.items()}, y_q, f"requantize multiplied={multiplied}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_concat_of_equal_parameters_is_a_byte_copy(dtype):
    x_q = Quant(dtype, 0.03, 7 if dtype == U8 else -7)
    parts = {f"in{i}": (quantized((1, c, 4, 4), x_q, seed=30 + i), x_q) for i, c in enumerate([2, 9])}
    model = _model(parts, [helper.make_node("Concat", ["in0_f", "in1_f"], ["cat"], axis=1)], "cat", x_q)
    assert _compiled_ops(model) == ["Concat"]
    want = _check_exact(model, {n: p[0] for n, p in parts.items()}, x_q, "Concat of equal parameters")
    np.testing.assert_array_equal(want, np.concatenate([p[0] for p in parts.values()], axis=1))


GLOBAL_POOLS = [(7, 512), (13, 1000), (1, 17), (5, 3)]  # ResNet's and SqueezeNet's heads, a 1x1 plane, a masked tail


@pytest.mark.parametrize("size,channels", GLOBAL_POOLS, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_global_average_pool_on_the_integers(dtype, size, channels):
    x = _input((2, channels, size, size), dtype, 0.02, 128 if dtype == U8 else 0, seed=40)
    y_q = _calibrated(_real(*x).mean(axis=(2, 3)), dtype)
    model = _model({"x": x}, [helper.make_node("GlobalAveragePool", ["x_f"], ["pool"])], "pool", y_q)
    assert _compiled_ops(model) == ["QGlobalAveragePool"]
    _check_exact(model, {"x": x[0]}, y_q, f"GlobalAveragePool {size}x{size}x{channels}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_average_pool_over_the_whole_plane_is_the_global_mean(dtype):
    """onnxruntime's QLinearAveragePool takes its global-pool path for an unpadded window of the
    whole plane; so does hobbit. x's zero point sits mid-range (the averages spread around 0), and
    y's 256 steps span two thirds of the averages' range, centred on them: both ends saturate."""
    x = _input((1, 33, 6, 6), dtype, 0.05, 128 if dtype == U8 else 0, seed=41)
    means = _real(*x).mean(axis=(2, 3))
    scale = float(np.ptp(means)) / 255 / 1.5
    middle = (np.iinfo(dtype).min + np.iinfo(dtype).max) / 2
    y_q = Quant(dtype, scale, int(np.rint(middle - float(means.mean()) / scale)))
    model = _model({"x": x}, [helper.make_node("AveragePool", ["x_f"], ["pool"], kernel_shape=[6, 6])], "pool", y_q)
    assert _compiled_ops(model) == ["QGlobalAveragePool"]
    want = _check_exact(model, {"x": x[0]}, y_q, "AveragePool 6x6 of 6x6")
    assert want.min() == y_q.low and want.max() == y_q.high


@pytest.mark.parametrize("attrs,size", AVERAGE_POOLS + [
    ({"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1}, 8)],
    ids=["k3p1exclude", "k3s2p1include", "k2s2", "k3s2ceil_include"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_average_pool_on_the_integers(dtype, attrs, size):
    """onnxruntime's QLinearAveragePool adds the dequantized taps in float32 and, with
    count_include_pad, divides by the kernel size even where a ceil_mode window overhangs the
    padding (ONNX counts only the pads there; hobbit follows onnxruntime)."""
    x = _input((2, 17, size, size), dtype, 0.02, 37 if dtype == U8 else -5, seed=42)
    y_q = Quant(dtype, 0.00731, 30 if dtype == U8 else -60)
    model = _model({"x": x}, [helper.make_node("AveragePool", ["x_f"], ["pool"], **attrs)], "pool", y_q)
    assert _compiled_ops(model) == ["QAveragePool"]
    _check_exact(model, {"x": x[0]}, y_q, f"AveragePool {attrs}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_dequantize_quantize_pair_requantizes_on_the_integers(dtype):
    """VGG-16's head once the frontend drops its 1x1 AveragePool: DQ -> Q of another scale and
    zero point, finer than x's so both ends saturate."""
    x = _input((1, 19, 7, 7), dtype, 0.03, 100 if dtype == U8 else -20, seed=43)
    y_q = Quant(dtype, 0.011, 90 if dtype == U8 else 5)
    model = _model({"x": x}, [], "x_f", y_q)
    assert _compiled_ops(model) == ["QRequantize"]
    want = _check_exact(model, {"x": x[0]}, y_q, "DQ -> Q")
    assert want.min() == y_q.low and want.max() == y_q.high
