"""Convolution kernels (GEMM, pointwise, depthwise paths) against onnxruntime,
over awkward shapes: odd channels, stride 2/3, dilation, asymmetric pads, groups."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import assert_matches_ort, make_model, rand, run_ort

CASES = [
    # (N, C, H, W), (OC, KH, KW), strides, pads (t, l, b, r), dilations, group, bias
    ((1, 3, 13, 11), (5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ((1, 17, 9, 9), (33, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),   # pointwise
    ((2, 8, 7, 7), (16, 3, 3), (2, 2), (1, 0, 2, 1), (1, 1), 1, False),  # asymmetric pads, batch 2
    ((1, 6, 15, 15), (12, 5, 5), (3, 3), (2, 2, 2, 2), (1, 1), 1, True),
    ((1, 4, 12, 12), (4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, True),   # dilation
    ((1, 12, 10, 10), (18, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, True),  # grouped
    ((1, 16, 14, 14), (16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16, True),  # depthwise
    ((1, 24, 15, 15), (24, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 24, False),  # depthwise s2
    ((1, 8, 9, 9), (16, 5, 5), (2, 2), (2, 2, 2, 2), (1, 1), 8, True),  # depthwise x2 multiplier
    ((1, 8, 17, 20), (8, 3, 3), (3, 3), (1, 1, 1, 1), (1, 1), 8, True),  # depthwise s3: gathered taps
    ((1, 6, 9, 40), (12, 5, 5), (1, 1), (2, 0, 1, 3), (2, 2), 6, True),  # depthwise from the input: masked edges
    ((1, 8, 2, 2), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8, False),  # depthwise: no interior rows
    ((1, 4, 9, 50), (4, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 4, True),  # depthwise: vertical stride 2
    ((1, 4, 20, 33), (4, 3, 3), (2, 2), (2, 2, 2, 2), (2, 2), 4, True),  # depthwise s2 from the input, dilated
    ((1, 4, 9, 51), (4, 4, 4), (2, 2), (1, 2, 0, 1), (1, 1), 4, False),  # depthwise s2: even kernel, odd width
    ((1, 3, 23, 23), (8, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, True),  # stem-like
    ((1, 64, 1, 1), (10, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),  # 1x1 spatial
    ((1, 5, 8, 8), (7, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1, True),  # strided pointwise
    ((1, 70, 6, 6), (100, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),  # M and N tails
    ((1, 8, 57, 57), (12, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),  # several row blocks + ragged last
    ((2, 3, 61, 61), (16, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, False),  # stem: blocks over two images
]


@pytest.mark.parametrize("xshape,wshape,strides,pads,dilations,group,bias", CASES)
def test_conv_matches_onnxruntime(xshape, wshape, strides, pads, dilations, group, bias):
    _check_conv(xshape, wshape, strides, pads, dilations, group, bias, threads=1)


@pytest.mark.parametrize("case", [0, 2, 5, 7, 10, 13, 18, 19, 20])
def test_conv_with_two_threads_matches_onnxruntime(case):
    _check_conv(*CASES[case], threads=2)


def _check_conv(xshape, wshape, strides, pads, dilations, group, bias, threads):
    oc, kh, kw = wshape
    w = rand(oc, xshape[1] // group, kh, kw, seed=1) * 0.3
    inits = {"W": w}
    inputs = ["x", "W"]
    if bias:
        inits["B"] = rand(oc, seed=2)
        inputs.append("B")
    node = helper.make_node("Conv", inputs, ["y"], strides=strides, pads=pads, dilations=dilations, group=group)
    x = rand(*xshape)
    model = make_model([node], {"x": x}, ["y"], inits)
    expected = run_ort(model, {"x": x})[0]
    got = hobbit.compile(model, threads=threads).run({"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_conv_fused_epilogue_matches_onnxruntime():
    """Conv -> BN -> Add(residual) -> Relu compiles to one kernel and stays exact."""
    x = rand(1, 8, 10, 10)
    c = 8
    inits = {"W": rand(c, c, 3, 3, seed=1) * 0.2, "scale": np.abs(rand(c, seed=2)) + 0.5,
             "bias": rand(c, seed=3), "mean": rand(c, seed=4) * 0.1, "var": np.abs(rand(c, seed=5)) + 0.5}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Add", ["b", "x"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-4)
    graph = hobbit.compile(model).report.graph
    kernels = [n for n in graph.nodes if n.op != "Reshape"]
    assert len(kernels) == 1
    assert kernels[0].fused_names == ["conv", "add", "relu"]
