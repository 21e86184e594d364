"""The float16 zoo variants: the converter, the BatchNorm folding before it, and whole-model parity.

Parity tolerances: against onnxruntime on the same float16 model, rtol 1e-3 and atol 1e-4 (the
bench's check; both engines compute in float32 and round the logits once, so they differ by at
most one float16 rounding); against the float32 model, 2e-3 of the logits' largest magnitude
(the weights rounded to float16 move SqueezeNet's logits by 7e-4 of it, ResNet-18's by 1.1e-3,
measured)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit import zoo
from hobbit.zoo.float16 import fold_batchnorm, to_float16
from tests.helpers import make_model, rand, run_ort


def _float_types(model: onnx.ModelProto) -> set[int]:
    graph = model.graph
    types = {t.data_type for t in graph.initializer}
    types |= {v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.output)}
    types |= {a.t.data_type for n in graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR}
    return types & {TensorProto.FLOAT, TensorProto.FLOAT16}


def test_every_float_tensor_becomes_float16_but_resize_scales():
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="nearest"),
             helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.FLOAT, [], [0.5])),
             helper.make_node("Mul", ["r", "k"], ["m"]),
             helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    x = rand(1, 2, 3, 3)
    model = make_model(nodes, {"x": x}, ["y"], {"scales": np.array([1, 1, 2, 2], np.float32)})
    half = to_float16(model)
    assert [t.data_type for t in half.graph.initializer] == [TensorProto.FLOAT]  # the scales
    assert half.graph.node[3].attribute[0].i == TensorProto.FLOAT16
    assert half.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    got = run_ort(half, {"x": x.astype(np.float16)})[0]
    np.testing.assert_array_equal(got, (np.repeat(np.repeat(x, 2, 2), 2, 3) * 0.5).astype(np.float16))


@pytest.mark.parametrize("name", ["squeezenet1_1-fp16", "resnet18-fp16", "mobilenet_v2-fp16"])
def test_zoo_variants_are_float16_throughout(name):
    model = zoo.build(name)
    onnx.checker.check_model(model, full_check=True)
    assert _float_types(model) == {TensorProto.FLOAT16}
    assert "BatchNormalization" not in [n.op_type for n in model.graph.node]


def test_batchnorm_folding_keeps_the_function():
    model = zoo.build("resnet18")
    folded = fold_batchnorm(model)
    assert [n.op_type for n in folded.graph.node].count("BatchNormalization") == 0
    assert len(folded.graph.node) == len(model.graph.node) - 20
    x = rand(1, 3, 224, 224, seed=4)
    np.testing.assert_allclose(run_ort(folded, {"input": x})[0], run_ort(model, {"input": x})[0],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet18"])
def test_parity_float16(name):
    x = rand(1, 3, 224, 224, seed=7).astype(np.float16)
    half = zoo.build(f"{name}-fp16")
    compiled = hobbit.compile(half)
    got = compiled.run({"input": x})[0]
    assert got.dtype == np.float16 and got.shape == (1, 1000)
    np.testing.assert_allclose(got, run_ort(half, {"input": x})[0], rtol=1e-3, atol=1e-4)
    wide = run_ort(zoo.build(name), {"input": x.astype(np.float32)})[0]
    np.testing.assert_allclose(got.astype(np.float32), wide, rtol=0, atol=2e-3 * float(np.abs(wide).max()))
    graph = compiled.report.graph
    assert {v.dtype for n in graph.nodes for v in n.outputs if v not in graph.outputs} == {np.dtype(np.float32)}
