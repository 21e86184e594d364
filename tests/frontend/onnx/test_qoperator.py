"""onnxruntime's QOperator format (quantize_static with QuantFormat.QOperator): QLinearConv,
and its com.microsoft operators QLinearAdd, QLinearConcat, QLinearGlobalAveragePool and
QGemm, against onnxruntime on the same model. The convolutions and the fully-connected
layer run as int8 kernels."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

import hobbit
from tests.helpers import run_ort


def _float_cnn() -> onnx.ModelProto:
    """conv -> relu -> two branches (conv, conv) -> concat and add -> global pool -> flatten -> gemm."""
    rng = np.random.default_rng(0)

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [w("w0", (8, 3, 3, 3)), w("b0", (8,)), w("w1", (8, 8, 1, 1)), w("w2", (8, 8, 3, 3)),
             w("fc", (5, 16)), w("fcb", (5,))]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"]),
             helper.make_node("Conv", ["r0", "w2"], ["c2"], pads=[1] * 4),
             helper.make_node("Add", ["c1", "r0"], ["s"]),
             helper.make_node("Concat", ["s", "c2"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Feeds(CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture(scope="module")
def qoperator_model(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("qop")
    onnx.save(_float_cnn(), folder / "float.onnx")
    quantize_static(str(folder / "float.onnx"), str(folder / "q.onnx"), _Feeds(), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    return str(folder / "q.onnx")


def test_the_model_uses_the_microsoft_operators(qoperator_model):
    ops = {(n.domain, n.op_type) for n in onnx.load(qoperator_model).graph.node}
    assert {("com.microsoft", "QLinearAdd"), ("com.microsoft", "QLinearConcat"),
            ("com.microsoft", "QLinearGlobalAveragePool"), ("com.microsoft", "QGemm"), ("", "QLinearConv")} <= ops


def test_qoperator_model_matches_onnxruntime_on_int8_kernels(qoperator_model):
    x = np.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype(np.float32)
    compiled = hobbit.compile(qoperator_model, cache=False)
    ops = [n.op for n in compiled.report.graph.nodes]
    assert ops.count("QConv") == 3 and "QMatMul" in ops  # QLinearAdd fused into a QConv as its residual
    assert not {"Conv", "ConvWinograd", "MatMul", "QAdd"} & set(ops)
    want = run_ort(onnx.load(qoperator_model), {"x": x})[0]
    got = compiled.run({"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
