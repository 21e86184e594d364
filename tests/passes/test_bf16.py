"""The bf16 pass (passes/bf16.py): which nodes it gives bf16 weights, and whole zoo models
compiled with precision="bf16" against onnxruntime's float32.

The models' tolerance is derived from bf16's rounding, as a statistical estimate (a worst
case through 20 layers would be meaningless): each layer's products carry two independent
roundings to 8 bits, each uniform within +-U (U = 2^-9), so a sum of terms of mixed sign is
off by U*sqrt(2/3) of its size (RMS); L bf16 layers add independent errors, sqrt(L) of them,
and we allow 3x that for the networks' gain (random weights, residual sums). With L the
count of bf16 nodes in the compiled graph: relative L2 <= 3 * sqrt(2/3) * U * sqrt(L)
(ResNet-18: L = 13, bound 1.4%; SqueezeNet: L = 22, bound 1.9%). Measured: 0.3-0.5%."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from hobbit import zoo
from hobbit.compiler import lower_to_llvm
import hobbit
from hobbit.zoo.images import evaluation_images
from tests.helpers import make_model, needs_host_feature, rand, run_ort

U = 2.0 ** -9


def _mixed_model() -> onnx.ModelProto:
    """RGB stem -> 1x1 -> depthwise 3x3 -> 1x1 -> pool -> FC: one node of each kind (too small
    for the expand-depthwise fusion)."""
    x = rand(1, 3, 32, 32)
    inits = {"stem": rand(32, 3, 3, 3, seed=1) * 0.3, "expand": rand(64, 32, 1, 1, seed=2) * 0.2,
             "dw": rand(64, 1, 3, 3, seed=3) * 0.3, "project": rand(32, 64, 1, 1, seed=4) * 0.2,
             "fc": rand(32, 10, seed=5) * 0.2}
    nodes = [helper.make_node("Conv", ["x", "stem"], ["s"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["s", "expand"], ["e"], name="expand"),
             helper.make_node("Relu", ["e"], ["er"], name="expand_relu"),
             helper.make_node("Conv", ["er", "dw"], ["d"], name="depthwise", group=64, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "project"], ["p"], name="project"),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc")]
    return make_model(nodes, {"x": x}, ["y"], inits)


def test_gemm_shaped_nodes_run_in_bf16_the_rest_in_float32():
    graph = lower_to_llvm(_mixed_model(), target="znver4", threads=1, precision="bf16", keep_ir=False).graph
    precision = {node.name: node.attrs.get("precision", "fp32") for node in graph.nodes}
    assert precision == {"stem": "bf16",  # a direct conv in float32, im2col in bf16
                         "expand": "bf16", "depthwise": "fp32", "project": "bf16",
                         "pool": "fp32", "flatten": "fp32", "fc": "bf16"}


def _winograd_model() -> onnx.ModelProto:
    """Three 3x3 convs float32 would all run as Winograd: F(4x4) with few channels, F(4x4) with
    many, and F(2x2) (13x13 outputs)."""
    x = rand(1, 16, 20, 20)
    inits = {"few": rand(96, 16, 3, 3, seed=1) * 0.1, "many": rand(96, 96, 3, 3, seed=2) * 0.05,
             "small": rand(16, 96, 3, 3, seed=3) * 0.05}
    nodes = [helper.make_node("Conv", ["x", "few"], ["a"], name="few", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "many"], ["b"], name="many", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["b"], ["p"], name="pool", kernel_shape=[8, 8]),
             helper.make_node("Conv", ["p", "small"], ["y"], name="small", pads=[1, 1, 1, 1])]
    return make_model(nodes, {"x": x}, ["y"], inits)


def test_winograd_convs_in_bf16_are_f2_where_the_gemms_outweigh_the_transforms():
    """F(4x4) stays float32 (bf16 rounding through its transforms: 3% error); a conv whose
    channels make the GEMMs large next to the transforms takes F(2x2) in bf16 instead."""
    model = _winograd_model()
    fp32 = {n.name: n.attrs.get("tile")
            for n in lower_to_llvm(model, target="znver4", threads=1, keep_ir=False).graph.nodes}
    graph = lower_to_llvm(model, target="znver4", threads=1, precision="bf16", keep_ir=False).graph
    bf16 = {n.name: (n.op, n.attrs.get("tile"), n.attrs.get("precision", "fp32")) for n in graph.nodes}
    assert (fp32["few"], fp32["many"], fp32["small"]) == (4, 4, 2)
    assert bf16["few"] == ("ConvWinograd", 4, "fp32")  # 16 -> 96: C*OC/(C+OC) = 13.7
    assert bf16["many"] == ("ConvWinograd", 2, "bf16")  # 96 -> 96: 48
    assert bf16["small"] == ("ConvWinograd", 2, "bf16")


def test_float32_pipeline_has_no_bf16_nodes():
    graph = lower_to_llvm(_mixed_model(), threads=1, keep_ir=False).graph
    assert all(node.attrs.get("precision") is None for node in graph.nodes)


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return evaluation_images(2)


@needs_host_feature("avx512bf16")
@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet18"])
def test_zoo_model_in_bf16_matches_onnxruntime_float32(name, images):
    model = zoo.build(name)
    feed_name = model.graph.input[0].name
    compiled = hobbit.compile(model, threads=2, precision="bf16", cache=False)
    layers = sum(node.attrs.get("precision") == "bf16" for node in compiled.report.graph.nodes)
    bound = 3 * np.sqrt(2 / 3) * U * np.sqrt(layers)
    for image in images:
        feed = {feed_name: image[None]}
        want = run_ort(model, feed)[0].astype(np.float64)
        got = compiled.run(feed)[0]
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert layers >= 10 and rel <= bound, f"{name}: relative L2 {rel:.4f} over {layers} bf16 layers, bound {bound:.4f}"
