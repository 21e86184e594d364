"""GPU plans for reductions (ReduceX, ArgMax, ArgMin) and the row normalisations
(Softmax, LogSoftmax, LayerNormalization): a block folds `tx` segments, `ty` threads each.

A segment is the set of input elements one output (one normalised row or column)
combines. The input's dims are merged into runs of kept and reduced dims (size-1 dims
vanish): the kept runs index the segments, the reduced runs the elements of one.

- Innermost run reduced ("rows"): a segment's elements are contiguous at the inside, so
  its `ty` threads are consecutive in the block and take elements y, y + ty, ...: a
  warp's loads are consecutive. Short segments (49 of a global average pool) share a
  block, `tx` of them, so that a block still has whole warps.
- Innermost run kept ("columns"): neighbouring segments are neighbouring in memory, so
  consecutive threads take consecutive segments (columns) and `ty` threads stacked
  above them split the reduced extent.

Either way each thread folds its elements in registers, then the block folds the
threads of a segment in shared memory, halving with a barrier each step (log2(ty)
barriers). Block sizes are powers of two, whole warps, sized from the segment length
(about PER_THREAD elements each) and grown with more segments per block while the grid
still covers the SMs; column tiles narrow down to a warp while the grid does not.

One segment is one block: a reduction with fewer segments than SMs (a sum of a whole
tensor) leaves SMs idle, as a grid-wide split would need device scratch and a second
kernel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.plan.gpu.launch import GpuPlan, gpu_planner
from hobbit.target import GpuTarget

PER_THREAD = 4  # elements each thread folds before the shared-memory tree, for segments long enough
BLOCK = 256  # threads a block grows to when there are enough segments: 8 warps (4 wavefronts)
REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
              "ReduceL2", "ReduceLogSum")


@dataclass(frozen=True)
class Run:
    """Consecutive input dims merged: extent and stride (in elements) of the merged dim."""

    extent: int
    stride: int


@dataclass(frozen=True)
class Segments:
    kept: tuple[Run, ...]  # outer to inner: the segments' index space (row-major = output order)
    reduced: tuple[Run, ...]  # outer to inner: one segment's elements
    rows: bool  # the innermost run is reduced (else kept: the "columns" layout)

    @property
    def outputs(self) -> int:
        return int(np.prod([r.extent for r in self.kept], dtype=np.int64))

    @property
    def count(self) -> int:
        """Elements per segment."""
        return int(np.prod([r.extent for r in self.reduced], dtype=np.int64))

    @property
    def inner(self) -> int:
        """Segments a grid row of blocks spans: all of them (rows), the innermost kept run (columns)."""
        return self.outputs if self.rows else self.kept[-1].extent


def segments(shape: tuple[int, ...], axes: tuple[int, ...]) -> Segments:
    """The kept and reduced runs of a row-major `shape` reduced over `axes`."""
    runs: list[tuple[int, int, bool]] = []
    stride = int(np.prod(shape, dtype=np.int64))
    for d, n in enumerate(shape):
        stride //= max(n, 1)
        if n == 1:
            continue
        reduced = d in axes
        if runs and runs[-1][2] == reduced:
            runs[-1] = (runs[-1][0] * n, stride, reduced)
        else:
            runs.append((n, stride, reduced))
    kept = tuple(Run(n, s) for n, s, red in runs if not red)
    reduced = tuple(Run(n, s) for n, s, red in runs if red)
    return Segments(kept, reduced, rows=not runs or runs[-1][2])


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def segment_plan(seg: Segments, target: GpuTarget) -> GpuPlan:
    """The launch of a segmented fold. extra: tx, ty, rows, tiles (blocks per grid row of
    `inner` segments); per_thread: the elements each thread takes, at most."""
    count = max(seg.count, 1)
    if seg.rows:
        ty = min(_pow2_at_least(-(-count // PER_THREAD)), target.max_block)
        threads = ty
        while threads < target.warp or (threads < BLOCK and
                                        -(-seg.outputs // (2 * threads // ty)) >= target.sms):
            threads *= 2
        tx = threads // ty
    else:
        outer = seg.outputs // seg.inner
        tx = min(_pow2_at_least(seg.inner), BLOCK)
        while tx > target.warp and -(-seg.inner // tx) * outer < target.sms:
            tx //= 2  # narrower tiles of columns, more blocks: still a warp's consecutive loads
        tiles = -(-seg.inner // tx) * outer
        budget = BLOCK if tiles >= target.sms else target.max_block
        ty = max(min(_pow2_at_least(-(-count // PER_THREAD)), budget // tx), 1, target.warp // tx)
    tiles = -(-seg.inner // tx)
    blocks = max(1, tiles * (seg.outputs // max(seg.inner, 1)))
    return GpuPlan((blocks, 1, 1), tx * ty, -(-count // ty), {"tx": tx, "ty": ty, "rows": seg.rows, "tiles": tiles})


def reduce_segments(node: Node) -> Segments:
    return segments(tuple(node.inputs[0].shape), tuple(node.attrs["axes"]))


def axis_segments(node: Node) -> Segments:
    """Segments along the one `axis` of Softmax, LogSoftmax, ArgMax and ArgMin."""
    return segments(tuple(node.inputs[0].shape), (node.attrs["axis"],))


def layernorm_segments(node: Node) -> Segments:
    rank = len(node.inputs[0].shape)
    return segments(tuple(node.inputs[0].shape), tuple(range(node.attrs["axis"], rank)))


@gpu_planner(*REDUCE_OPS)
def reduce_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return segment_plan(reduce_segments(node), target)


@gpu_planner("Softmax", "LogSoftmax", "ArgMax", "ArgMin")
def axis_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return segment_plan(axis_segments(node), target)


@gpu_planner("LayerNormalization")
def layernorm_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return segment_plan(layernorm_segments(node), target)
