"""3-D pools, LpPool, GlobalLpPool and LRN against onnxruntime (runtime inputs)."""

from __future__ import annotations

import pytest
from onnx import helper

from tests.helpers import assert_matches_ort, make_model, rand


@pytest.mark.parametrize("ceil,include_pad", [(0, 0), (1, 1), (1, 0)])
def test_pools_3d(ceil, include_pad):
    x = rand(1, 2, 6, 7, 5)
    common = dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0], ceil_mode=ceil,
                  dilations=[1, 2, 1])
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **common),
             helper.make_node("AveragePool", ["x"], ["avg"], count_include_pad=include_pad, **common)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg"], opset=19), {"x": x})


@pytest.mark.parametrize("shape,kernel,attrs", [
    ((1, 3, 9), [3], dict(strides=[2], pads=[1, 1])),
    ((1, 2, 6, 7), [2, 3], dict(p=3, auto_pad="SAME_UPPER")),
    ((1, 2, 5, 4, 6), [2, 2, 3], dict(p=1, strides=[1, 2, 2])),
])
def test_lppool(shape, kernel, attrs):
    x = rand(*shape)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=kernel, **attrs)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=18), {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lppool(p):
    x = rand(2, 3, 4, 5)
    node = helper.make_node("GlobalLpPool", ["x"], ["y"], p=p)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=18), {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size,shape", [(3, (2, 5, 3, 4)), (5, (1, 6, 5, 1)), (1, (1, 2, 2, 2))])
def test_lrn(size, shape):
    x = rand(*shape)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.02, beta=0.6, bias=1.5)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, rtol=1e-4, atol=1e-5)
