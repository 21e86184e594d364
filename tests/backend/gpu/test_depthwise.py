"""Depthwise Conv on the GPU against onnxruntime (grid emulation): 3x3 at stride 1 and 2,
5x5, dilation, asymmetric pads, ragged tiles, batch 2, bias, fused Clip and residual Add,
in both variants of the plan (a shared-memory tile, or taps from global memory).

The GPU "Conv" kernel dispatches depthwise nodes to hobbit.backend.gpu.depthwise; these tests
install that dispatch themselves, so that they do not depend on the Conv kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.frontend.onnx.importer import import_onnx
from hobbit.plan.gpu.depthwise import depthwise_plan
from hobbit.target import gpu_target
from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort
from tests.helpers import make_model, rand


def _model(shape, k, stride=1, pads=None, dilation=1, bias=True, epilogue=None, seed=0):
    c = shape[1]
    x = rand(*shape, seed=seed)
    inits = {"w": rand(c, 1, k, k, seed=seed + 1)}
    if bias:
        inits["b"] = rand(c, seed=seed + 2)
    pad = pads if pads is not None else [dilation * (k - 1) // 2] * 4
    conv = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], group=c, kernel_shape=[k, k],
                            strides=[stride, stride], pads=pad, dilations=[dilation, dilation])
    nodes = [conv]
    if epilogue == "clip":
        inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    elif epilogue == "add":
        nodes.append(helper.make_node("Add", ["c", "x"], ["y"]))
    else:
        nodes[0].output[0] = "y"
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


CASES = [  # (shape, kernel, stride, pads, dilation, epilogue): the first four are tiled (on
    # tiles ragged at the right and the bottom), the rest direct (small planes, a 1x1 kernel)
    ((1, 8, 40, 40), 3, 1, None, 1, "clip"),
    ((2, 5, 23, 29), 3, 2, None, 1, "clip"),
    ((1, 4, 30, 60), 5, 1, None, 1, None),
    ((1, 4, 29, 30), 3, 1, None, 2, "add"),
    ((1, 4, 21, 20), 3, 1, None, 2, "add"),
    ((1, 3, 19, 26), 5, 2, [1, 2, 2, 0], 1, "clip"),
    ((2, 6, 7, 7), 3, 1, None, 1, "clip"),
    ((1, 6, 9, 11), 3, 2, [0, 1, 1, 0], 1, None),
    ((1, 5, 16, 6), 1, 1, [0, 0, 0, 0], 1, "clip"),
]


@pytest.mark.parametrize("shape,k,stride,pads,dilation,epilogue", CASES)
def test_depthwise(shape, k, stride, pads, dilation, epilogue) -> None:
    model, feeds = _model(shape, k, stride, pads, dilation, epilogue=epilogue)
    assert_gpu_matches_ort(model, feeds, rtol=1e-5, atol=1e-5)


def test_without_bias() -> None:
    model, feeds = _model((1, 4, 12, 13), 3, bias=False)
    assert_gpu_matches_ort(model, feeds, rtol=1e-5, atol=1e-5, targets=("cuda:sm_90", "rocm:gfx942"))


def _variant(shape, k, stride, spec="cuda:sm_90"):
    model, _ = _model(shape, k, stride)
    node = next(n for n in import_onnx(model).nodes if n.op == "Conv")
    return depthwise_plan(node, gpu_target(spec))


def test_variants_follow_the_shapes() -> None:
    """Big planes stage tiles in shared memory; 7x7 planes and 1x1 kernels read global memory."""
    assert _variant((1, 4, 40, 40), 3, 1).extra["variant"] == "tiled"
    assert _variant((1, 4, 80, 80), 3, 2, "rocm:gfx942").extra["variant"] == "tiled"
    assert _variant((2, 6, 7, 7), 3, 1).extra["variant"] == "direct"
    assert _variant((1, 5, 16, 6), 1, 1).extra["variant"] == "direct"
    for spec in ("cuda:sm_80", "rocm:gfx90a"):
        plan = _variant((1, 32, 112, 112), 3, 1, spec)
        assert plan.threads % gpu_target(spec).warp == 0 and plan.grid[0] >= gpu_target(spec).sms
