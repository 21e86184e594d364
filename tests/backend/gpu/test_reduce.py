"""ReduceX, ArgMax and ArgMin kernels on the GPU against onnxruntime (grid emulation,
ptxas, ld.lld): every reducer; the last, a middle, the first and all axes; keepdims 0/1;
segment lengths that leave ragged thread shares and ragged blocks (1000, 49, 3); ties."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.plan.gpu.reduce import segment_plan, segments
from hobbit.target import GPUS
from tests.backend.gpu.gpu_cases import EMULATED, assert_gpu_matches_ort
from tests.helpers import make_model, rand


def reduce_model(op: str, x: np.ndarray, axes: list[int] | None, keepdims: int):
    """Opset 18: axes as a constant input (absent: all of them)."""
    inputs = ["x"] + (["axes"] if axes is not None else [])
    node = helper.make_node(op, inputs, ["y"], keepdims=keepdims)
    consts = {"axes": np.array(axes, np.int64)} if axes is not None else {}
    return make_model([node], {"x": x}, ["y"], consts, opset=18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
def test_each_reducer_over_rows_and_columns(op) -> None:
    """Axis 2 (innermost: rows layout) and axis 1 (columns layout) of the same tensor, on the
    emulated targets (every target assembles in test_axes_and_keepdims)."""
    x = rand(2, 5, 49, seed=1)
    if op in ("ReduceLogSum", "ReduceProd"):
        x = np.abs(x) + 0.5
    for axes in ([2], [1]):
        assert_gpu_matches_ort(reduce_model(op, x, axes, keepdims=1), {"x": x}, rtol=2e-5, atol=1e-5,
                               targets=EMULATED)


@pytest.mark.parametrize("shape,axes,keepdims", [
    ((3, 1000), [1], 0),  # long rows: 256 threads, 4 elements each
    ((1, 64, 7, 7), [2, 3], 1),  # global average pool: 49 per segment, several segments a block
    ((7, 3), [1], 1),  # 3 per segment: one thread each
    ((6, 10, 9), [0], 0),  # the first axis: columns of 90
    ((4, 6, 5, 3), [1, 3], 0),  # two separated axes, innermost reduced
    ((4, 6, 5, 3), [0, 2], 1),  # two separated axes, innermost kept
    ((10, 11), None, 0),  # all axes: one segment
    ((2, 300, 1, 70), [1], 1),  # a kept size-1 dim, columns wider than a warp
])
def test_axes_and_keepdims(shape, axes, keepdims) -> None:
    x = rand(*shape, seed=2)
    assert_gpu_matches_ort(reduce_model("ReduceMean", x, axes, keepdims), {"x": x}, rtol=1e-5, atol=1e-6)


def test_integer_sum_and_max() -> None:
    x = (rand(3, 40, seed=3) * 100).astype(np.int64)
    for op in ("ReduceSum", "ReduceMax"):
        assert_gpu_matches_ort(reduce_model(op, x, [1], 0), {"x": x}, rtol=0, atol=0,
                               targets=EMULATED)


def test_global_average_pool_plan_fills_the_gpu() -> None:
    """[1, 2048, 7, 7] over H, W: 16 threads per channel (4 elements each), whole warps per
    block and at least a block per SM."""
    target = GPUS["sm_90"]
    plan = segment_plan(segments((1, 2048, 7, 7), (2, 3)), target)
    assert plan.extra["ty"] == 16 and plan.per_thread == 4
    assert plan.threads % target.warp == 0 and plan.grid[0] >= target.sms


def test_few_wide_columns_narrow_their_tiles() -> None:
    """[1, 4096, 4096] over axis 1: 4096 columns in tiles of a warp (128 blocks, not 16 of 256)."""
    target = GPUS["sm_90"]
    plan = segment_plan(segments((1, 4096, 4096), (1,)), target)
    assert plan.extra["tx"] == target.warp and plan.grid[0] == 4096 // target.warp
    assert plan.threads == target.max_block and plan.per_thread == 4096 // plan.extra["ty"]


def test_float16_is_summed_in_float32() -> None:
    x = rand(3, 300, seed=4).astype(np.float16)
    assert_gpu_matches_ort(reduce_model("ReduceSum", x, [1], 0), {"x": x}, rtol=2e-3, atol=2e-3,
                           targets=EMULATED)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reduce_ties_over_rows_and_columns(op, last) -> None:
    """Values rounded to a few levels, so every segment has ties that threads far apart hold."""
    x = np.round(rand(3, 130, 5, seed=5) * 2).astype(np.float32)
    for axis, keepdims in ((1, 1), (2, 0)):
        node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
        assert_gpu_matches_ort(make_model([node], {"x": x}, ["y"]), {"x": x}, rtol=0, atol=0,
                               targets=EMULATED)
