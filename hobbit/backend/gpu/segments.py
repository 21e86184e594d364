"""Segmented folds in a thread block, the common part of the reduction, softmax and
layer-normalisation kernels (their plans: hobbit.plan.gpu.reduce).

A block holds `tx` segments of `ty` threads. Each thread folds its share of its
segment's elements in a register; the segment's threads then fold their partials in
shared memory, halving each step (a barrier apiece), which leaves the segment's result
in the slot of its thread y = 0, the segment's *head*."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.backend.gpu.elementwise import unflatten
from hobbit.backend.gpu.args import GpuArgs
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.half import widen
from hobbit.emit.reduce import combine
from hobbit.emit.scalar import Emit
from hobbit.ops.reduce import identity
from hobbit.plan.gpu.reduce import Segments

UNROLL = 16  # a thread's elements up to this many are unrolled (and may be kept in registers)


@dataclass
class Lane:
    """One thread's place: segment x of the block, y of the segment's threads, the segment's
    output index and whether it exists (the last block's segments may run past the end)."""

    tid: ir.Value
    x: ir.Value
    y: ir.Value
    output: ir.Value
    valid: ir.Value
    head: ir.Value  # the shared-memory slot that ends up holding the segment's fold


class SegmentThreads:
    def __init__(self, k: GpuArgs, seg: Segments):
        self.k, self.kb, self.simt, self.seg = k, k.kb, k.simt, seg
        extra = k.plan.extra
        self.tx, self.ty, self.rows = extra["tx"], extra["ty"], extra["rows"]
        self.per_thread = k.plan.per_thread
        tiles = extra["tiles"]
        block = self.simt.block(0)
        # Uniform: the grid row (outer kept index) and the block's tile of segments in it.
        self._group = self.kb.b.udiv(block, self.kb.i64(tiles)) if tiles > 1 else block
        self._tile = self.kb.b.urem(block, self.kb.i64(tiles)) if tiles > 1 else self.kb.i64(0)
        self.y_stride = 1 if self.rows else self.tx

    def lane(self, tid: ir.Value) -> Lane:
        kb = self.kb
        if self.rows:
            x, y = kb.udiv(tid, self.ty), kb.b.urem(tid, kb.i64(self.ty)) if self.ty > 1 else kb.i64(0)
        else:
            x, y = kb.b.urem(tid, kb.i64(self.tx)) if self.tx > 1 else kb.i64(0), kb.udiv(tid, self.tx)
        column = kb.add(kb.mul(self._tile, self.tx), x)
        output = kb.add(kb.mul(self._group, self.seg.inner), column)
        valid = kb.b.icmp_unsigned("<", kb.idx(column), kb.i64(self.seg.inner))
        head = kb.mul(x, self.ty) if self.rows else x
        return Lane(tid, kb.idx(x), kb.idx(y), kb.idx(output), valid, kb.idx(head))

    def kept_offset(self, output: ir.Value) -> int | ir.Value:
        """The input offset of a segment's first element."""
        kept = self.seg.kept
        index = unflatten(self.kb, output, tuple(r.extent for r in kept)) if kept else []
        return self.kb.affine([(i, r.stride) for i, r in zip(index, kept)])

    def reduced_offset(self, r: ir.Value) -> int | ir.Value:
        """The offset of a segment's element r from its first."""
        reduced = self.seg.reduced
        index = unflatten(self.kb, r, tuple(run.extent for run in reduced)) if reduced else []
        return self.kb.affine([(i, run.stride) for i, run in zip(index, reduced)])

    @property
    def unrolled(self) -> bool:
        return self.per_thread <= UNROLL

    def each(self, lane: Lane, body: Callable[[int | None, ir.Value], None]) -> None:
        """body(p, r) for the segment elements r = y + p * ty of this thread; p is the
        unrolled position (for register caches), None when the elements are a loop."""
        kb, count = self.kb, self.seg.count
        if not self.unrolled:
            with kb.loop(lane.y, count, self.ty, name="r") as r:
                body(None, r)
            return
        for p in range(self.per_thread):
            r = kb.add(lane.y, p * self.ty)
            if (p + 1) * self.ty <= count:
                body(p, r)
                continue
            with kb.if_then(kb.b.icmp_unsigned("<", r, kb.i64(count))):
                body(p, r)

    def fold(self, e: Emit, partial: ir.Value, how: str,
             last: Callable[[Lane, ir.Value], None] | None = None) -> None:
        """Fold each segment's partials (partial[tid], after a barrier) into its head slot.
        With `last`, the final step hands the result to last(lane, value) instead (the
        head thread of each existing segment) and no barrier follows."""
        kb, simt = self.kb, self.simt
        step = self.ty // 2
        while step >= 1:
            final = step == 1 and last is not None
            with simt.phase(sync=not final) as tid:
                lane = self.lane(tid)
                with kb.if_then(kb.b.icmp_unsigned("<", lane.y, kb.i64(step))):
                    v = combine(e, how, kb.load(partial, e.dtype, tid),
                                kb.load(partial, e.dtype, kb.add(tid, step * self.y_stride)))
                    if final:
                        with kb.if_then(lane.valid):
                            last(lane, v)
                    else:
                        kb.store(v, partial, e.dtype, tid)
            step //= 2

    def partial_fold(self, e: Emit, lane: Lane, how: str, value: Callable[[int | None, ir.Value], ir.Value]
                     ) -> ir.Value:
        """This thread's fold of value(p, r) over its elements (the identity where the
        segment does not exist), in a register."""
        kb = self.kb
        acc = self.simt.private(e.dtype, 1)
        acc.store(kb.const(e.dtype, identity(e.dtype, how)), 0)
        with kb.if_then(lane.valid):
            def body(p: int | None, r: ir.Value) -> None:
                acc.store(combine(e, how, acc.load(0), value(p, r)), 0)
            self.each(lane, body)
        return acc.load(0)


def load_element(kb: KernelBuilder, ptr: ir.Value, stored: np.dtype, offset: int | ir.Value) -> ir.Value:
    """A tensor element in its compute dtype."""
    return widen(kb.b, kb.load(ptr, stored, offset), stored)
