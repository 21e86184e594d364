"""The direct convolution for few input channels (backend/cpu/direct_conv.py) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.plan.conv import conv_shape, is_direct
from tests.helpers import make_model, rand, run_ort

CASES = [
    # (N, C, H, W), (OC, KH, KW), strides, pads (t, l, b, r), dilations
    ((1, 3, 50, 50), (32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),      # MobileNet stem, 32 = 5 blocks of 6 + 2
    ((2, 3, 45, 41), (64, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),      # ResNet stem, two images, odd sizes
    ((1, 1, 9, 30), (5, 3, 3), (1, 1), (0, 1, 2, 0), (1, 1)),        # one channel, asymmetric pads
    ((1, 2, 31, 37), (9, 5, 5), (2, 2), (2, 1, 2, 3), (1, 1)),
    ((1, 4, 20, 41), (17, 3, 3), (3, 2), (1, 1, 1, 1), (1, 2)),      # vertical stride 3, dilated stride 2
    ((1, 3, 29, 29), (64, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1)),      # SqueezeNet stem: no padding
    ((1, 3, 120, 400), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # several bands per thread
]
IDS = [f"c{c[0][1]}k{c[1][1]}s{c[2][0]}{c[2][1]}" for c in CASES]


def _model(xshape, wshape, strides, pads, dilations):
    oc, kh, kw = wshape
    inits = {"W": rand(oc, xshape[1], kh, kw, seed=1) * 0.3, "B": rand(oc, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], strides=strides, pads=pads, dilations=dilations),
             helper.make_node("Relu", ["c"], ["y"])]
    x = rand(*xshape)
    return make_model(nodes, {"x": x}, ["y"], inits), x


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_direct_conv_matches_onnxruntime(case, threads):
    model, x = _model(*case)
    conv = lower_to_llvm(model, threads=threads).graph.nodes[0]
    assert is_direct(conv_shape(conv)), "this case should take the direct path"
    expected = run_ort(model, {"x": x})[0]
    got = hobbit.compile(model, threads=threads, cache=False).run({"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_wider_inputs_use_im2col():
    conv = lower_to_llvm(_model((1, 5, 20, 20), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))[0]).graph.nodes[0]
    assert not is_direct(conv_shape(conv))
