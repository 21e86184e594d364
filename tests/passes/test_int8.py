"""The int8 pass: which QDQ patterns become integer kernels (QConv, QMatMul, a residual add
fused into a QConv, ConvInteger as QConvInteger), on which targets, and that the result equals onnxruntime's on the
same QDQ model, bit for bit, with the AVX-512 VNNI kernels and with the AVX2 fallback
(vpmaddwd) alike. The per-op coverage is in tests/backend/cpu/test_int8_*.py."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.plan.int8 import dot_product
from hobbit.target import parse_target
from tests.helpers import run_ort

X_SCALE, X_ZERO, Y_SCALE, Y_ZERO = 0.02, 128, 0.05, 10


def _const(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _quantized_operands(w: np.ndarray, w_scale: np.ndarray, rng) -> tuple[list, list]:
    """The constants and the Q/DQ nodes before a quantized op: x quantized and dequantized,
    per-output-channel int8 weights and an int32 bias at x_scale * w_scale, dequantized."""
    out = w.shape[0]
    inits = [_const("w", w), _const("ws", w_scale), _const("wz", np.zeros(out, np.int8)),
             _const("b", rng.integers(-5000, 5000, out).astype(np.int32)),
             _const("bs", (np.float32(X_SCALE) * w_scale).astype(np.float32)), _const("bz", np.zeros(out, np.int32)),
             _const("xs", np.float32(X_SCALE)), _const("xz", np.uint8(X_ZERO)),
             _const("ys", np.float32(Y_SCALE)), _const("yz", np.uint8(Y_ZERO))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"], axis=0)]
    return inits, nodes


def _qdq_block(cin: int, cout: int, group: int, residual: bool, seed: int = 0) -> onnx.ModelProto:
    """Q(x) -> DQ -> Conv(DQ(w), DQ(b)) -> Relu -> Q [-> DQ -> Add(DQ(Q(x))) -> Q] -> DQ."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (cout, cin // group, 3, 3)).astype(np.int8)
    w_scale = (rng.random(cout) * 0.01 + 0.001).astype(np.float32)
    inits, nodes = _quantized_operands(w, w_scale, rng)
    nodes += [helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1] * 4, group=group),
              helper.make_node("Relu", ["c"], ["r"]),
              helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"])]
    last = "yq"
    if residual:
        nodes += [helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["yf"]),
                  helper.make_node("Add", ["yf", "xf"], ["s"]),
                  helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["sq"])]
        last = "sq"
    nodes.append(helper.make_node("DequantizeLinear", [last, "ys", "yz"], ["y"]))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 15, 15])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _qdq_gemm(k: int, n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w_scale = (rng.random(n) * 0.01 + 0.001).astype(np.float32)
    inits, nodes = _quantized_operands(rng.integers(-127, 128, (n, k)).astype(np.int8), w_scale, rng)
    nodes += [helper.make_node("Gemm", ["xf", "wf", "bf"], ["g"], transB=1),
              helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "fc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compiled_ops(model: onnx.ModelProto, target: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = (np.random.default_rng(2).standard_normal(shape) * 2).astype(np.float32)
    compiled = hobbit.compile(model, target=target, threads=2, cache=False)
    return [n.op for n in compiled.report.graph.nodes], compiled.run({"x": x})[0], run_ort(model, {"x": x})[0]


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
@pytest.mark.parametrize("group", [1, 16])
def test_conv_block_runs_as_one_qconv_equal_to_onnxruntime(target, group):
    ops, got, want = _compiled_ops(_qdq_block(16, 16, group, residual=False), target)
    assert ops == ["QuantizeLinear", "QConv", "DequantizeLinear"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
def test_residual_add_fuses_into_the_qconv(target):
    ops, got, want = _compiled_ops(_qdq_block(8, 8, 1, residual=True), target)
    assert ops == ["QuantizeLinear", "QConv", "DequantizeLinear"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
def test_gemm_runs_as_qmatmul_equal_to_onnxruntime(target):
    ops, got, want = _compiled_ops(_qdq_gemm(k=61, n=37), target)
    assert ops == ["QuantizeLinear", "QMatMul", "DequantizeLinear"]
    np.testing.assert_array_equal(got, want)


def test_dot_product_follows_the_target():
    assert dot_product(parse_target("znver4")).name == "vpdpbusd"
    assert dot_product(parse_target("znver4")).lanes == 16
    assert dot_product(parse_target("x86-64-v3")).name == "vpmaddwd"
    assert dot_product(parse_target("aarch64-linux-gnu:neoverse-n1")) is None


def test_without_an_integer_dot_product_the_float_path_stays():
    """AArch64 has no int8 kernels yet: the QDQ chain is compiled as written (export only here)."""
    compiled = hobbit.compile(_qdq_block(8, 8, 1, residual=False), target="aarch64-linux-gnu:neoverse-n1")
    ops = {n.op for n in compiled.report.graph.nodes}
    assert "QConv" not in ops and ops & {"Conv", "ConvWinograd"}


def test_integer_products_stay_exact_floats_without_an_integer_dot_product():
    """ConvInteger on AArch64: the frontend's exact float64 form is compiled as written (export only here)."""
    w = np.random.default_rng(3).integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1] * 4)
    graph = helper.make_graph([node], "ci", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 8, 8]),
                                             helper.make_tensor_value_info("xz", TensorProto.UINT8, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)], [_const("w", w)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert "QConvInteger" in {n.op for n in hobbit.compile(model, cache=False).report.graph.nodes}
    ops = {n.op for n in hobbit.compile(model, target="aarch64-linux-gnu:neoverse-n1", cache=False).report.graph.nodes}
    assert "QConvInteger" not in ops and "ConvND" in ops


def _qdq_fire(cin: int, squeeze_params: tuple[float, int], concat_params: tuple[float, int]) -> onnx.ModelProto:
    """SqueezeNet's fire-module join: a 1x1 and a 3x3 QDQ conv (+ Relu) on one input, each
    quantized with its own parameters (the 1x1 with `squeeze_params`, the 3x3 with Y_SCALE,
    Y_ZERO), then Concat -> Q at `concat_params` -> DQ."""
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (12, cin, 3, 3)).astype(np.int8)
    w_scale = (rng.random(12) * 0.01 + 0.001).astype(np.float32)
    inits, nodes = _quantized_operands(w, w_scale, rng)
    w1 = rng.integers(-127, 128, (5, cin, 1, 1)).astype(np.int8)
    inits += [_const("w1", w1), _const("ws1", w_scale[:5]), _const("wz1", np.zeros(5, np.int8)),
              _const("s1", np.float32(squeeze_params[0])), _const("z1", np.uint8(squeeze_params[1])),
              _const("cs", np.float32(concat_params[0])), _const("cz", np.uint8(concat_params[1]))]
    nodes += [helper.make_node("DequantizeLinear", ["w1", "ws1", "wz1"], ["wf1"], axis=0),
              helper.make_node("Conv", ["xf", "wf1"], ["c1"]),
              helper.make_node("Relu", ["c1"], ["r1"]),
              helper.make_node("QuantizeLinear", ["r1", "s1", "z1"], ["q1"]),
              helper.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["f1"]),
              helper.make_node("Conv", ["xf", "wf", "bf"], ["c3"], pads=[1] * 4),
              helper.make_node("Relu", ["c3"], ["r3"]),
              helper.make_node("QuantizeLinear", ["r3", "ys", "yz"], ["q3"]),
              helper.make_node("DequantizeLinear", ["q3", "ys", "yz"], ["f3"]),
              helper.make_node("Concat", ["f1", "f3"], ["cat"], axis=1),
              helper.make_node("QuantizeLinear", ["cat", "cs", "cz"], ["cq"]),
              helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["y"])]
    graph = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 13, 11])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
@pytest.mark.parametrize("squeeze_params", [(0.035, 3), (0.04, 5)], ids=["own", "concat's"])
def test_concat_requantize_fuses_into_the_qconv(target, squeeze_params):
    """A conv quantized with other parameters than the Concat's moves its bytes to them in its
    epilogue (the QConv's `then`) instead of in a QRequantize kernel of its own, and the bytes
    are onnxruntime's; a conv with the Concat's parameters needs nothing."""
    model = _qdq_fire(16, squeeze_params, (0.04, 5))
    compiled = hobbit.compile(model, target=target, threads=2, cache=False)
    convs = [n for n in compiled.report.graph.nodes if n.op == "QConv"]
    assert "QRequantize" not in [n.op for n in compiled.report.graph.nodes]
    requantized = {n.attrs["weight_shape"][0]: n.attrs.get("then") for n in convs}
    x_scale, y_scale = np.float32([Y_SCALE, 0.04]).tolist()  # as the model stores them
    assert {k: v for k, v in requantized[12].items() if k != "multiplier"} == {
        "x_scale": x_scale, "x_zero": Y_ZERO, "y_scale": y_scale, "y_zero": 5, "lo": 0, "hi": 255, "to": "uint8"}
    assert (requantized[5] is None) == (squeeze_params == (0.04, 5))
    x = (np.random.default_rng(2).standard_normal((1, 16, 13, 11)) * 2).astype(np.float32)
    got, want = compiled.run({"x": x})[0], run_ort(model, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 20  # not saturated
