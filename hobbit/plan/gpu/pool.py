"""GPU plans of the pools and the data-movement kernels (Concat, Transpose).

Each is a flat launch over its outputs (hobbit.plan.gpu.launch.flat_plan: 256 threads, a
multiple of every warp and wavefront, and `per_thread` outputs each only when there are
enough outputs to fill every SM without it). A pool's plan also says whether its window
is unrolled (hobbit.backend.gpu.window); a Concat's, which blocks copy which input."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Node
from hobbit.plan.gpu.launch import GpuPlan, flat_plan, gpu_planner
from hobbit.target import GpuTarget

# A window of at most this many taps is unrolled: each tap's load is independent of the
# others and all are in flight at once, at a few registers each. Bigger windows (a 13x13
# average) loop over their valid taps.
UNROLLED_TAPS = 64


def _count(node: Node) -> int:
    return int(np.prod(node.outputs[0].shape, dtype=np.int64))


@gpu_planner("MaxPool", "AveragePool")
def pool_plan(node: Node, target: GpuTarget) -> GpuPlan:
    kh, kw = node.attrs["kernel_shape"]
    plan = flat_plan(_count(node), target)
    return GpuPlan(plan.grid, plan.threads, plan.per_thread, {"unrolled": kh * kw <= UNROLLED_TAPS})


@gpu_planner("Transpose")
def transpose_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return flat_plan(_count(node), target)


@gpu_planner("Concat")
def concat_plan(node: Node, target: GpuTarget) -> GpuPlan:
    """Each input is copied by blocks of its own (`starts`: each input's first block, then
    the grid's end), so that which input a block copies is uniform in the block: no
    thread chooses among pointers. The per-thread count is decided once, for the whole
    output."""
    plan = flat_plan(_count(node), target)
    span = plan.threads * plan.per_thread
    starts = [0]
    for v in node.inputs:
        starts.append(starts[-1] + -(-int(v.type.size) // span))
    return GpuPlan((max(1, starts[-1]), 1, 1), plan.threads, plan.per_thread, {"starts": tuple(starts)})
