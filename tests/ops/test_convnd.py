"""ConvTranspose and 1-D / 3-D / non-float32 Conv against onnxruntime, runtime X and W."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import hobbit

from tests.helpers import assert_matches_ort, make_model, rand

# (input shape, weight shape, attributes)
TRANSPOSED = [
    ((1, 2, 5), (2, 3, 3), dict(strides=[2], pads=[1, 0])),
    ((2, 4, 4, 5), (4, 1, 3, 2), dict(strides=[2, 3], dilations=[1, 2], group=2, output_padding=[1, 0])),
    ((1, 3, 3, 4), (3, 2, 3, 3), dict(strides=[2, 2], output_shape=[8, 7])),
    ((1, 2, 4, 4), (2, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 1, 3, 4, 3), (1, 2, 2, 3, 2), dict(strides=[1, 2, 2], pads=[0, 1, 0, 1, 0, 1])),
]


@pytest.mark.parametrize("xs,ws,attrs", TRANSPOSED)
def test_conv_transpose(xs, ws, attrs):
    x, w, b = rand(*xs, seed=1), rand(*ws, seed=2), rand(ws[1] * attrs.get("group", 1), seed=3)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    feeds = {"x": x, "w": w, "b": b}
    assert_matches_ort(make_model([node], feeds, ["y"], opset=17), feeds)


CONVS = [
    ((2, 3, 11), (4, 3, 3), dict(strides=[2], pads=[1, 2], dilations=[2])),
    ((1, 4, 9), (4, 1, 5), dict(group=4, auto_pad="SAME_UPPER")),
    ((1, 2, 5, 6, 4), (3, 2, 3, 2, 2), dict(pads=[1, 0, 1, 1, 1, 0], strides=[2, 1, 2])),
    ((1, 4, 4, 4, 4), (2, 2, 2, 2, 2), dict(group=2, dilations=[2, 1, 1])),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_conv_1d_and_3d(xs, ws, attrs):
    x, w, b = rand(*xs, seed=4), rand(*ws, seed=5), rand(ws[0], seed=6)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    feeds = {"x": x, "w": w, "b": b}
    assert_matches_ort(make_model([node], feeds, ["y"], opset=17), feeds)


def _conv_pair(dtype):
    x, w = rand(1, 2, 5, 5, seed=7, dtype=dtype), rand(3, 2, 3, 3, seed=8, dtype=dtype)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["x", "wt"], ["z"], strides=[2, 2])]
    feeds = {"x": x, "w": w, "wt": w.transpose(1, 0, 2, 3).copy()}
    return make_model(nodes, feeds, ["y", "z"], opset=17), feeds


def test_float16():
    model, feeds = _conv_pair(np.float16)
    assert_matches_ort(model, feeds, rtol=2e-3, atol=2e-3)


def test_float64():
    """onnxruntime has no float64 Conv: compare with the ONNX reference evaluator."""
    model, feeds = _conv_pair(np.float64)
    for got, want in zip(hobbit.compile(model).run(feeds), ReferenceEvaluator(model).run(None, feeds)):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
