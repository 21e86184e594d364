"""BoundedUnique (hobbit/ops/unique.py): sort, then run-length, O(n log n) comparisons.

The input is viewed as [outer, length, inner]; Unique compares the `length` slices
x[:, s, :] (single elements when flattened: outer = inner = 1). A bottom-up merge sort
orders a permutation of the slice numbers in scratch; it is stable, so equal slices
stay in index order and each group's first sorted entry is its first occurrence. The
comparison is a total order (NaN after every number and equal to every NaN, -0.0 equal
to 0.0) and stops at the first element that differs. One pass over the sorted
permutation then finds where each group starts (its predecessor is less than it)
and writes indices, counts and the inverse indices. For sorted=0 that pass numbers the
groups in sorted order and records each one's first index; a second pass in index order
renumbers a group when it meets its first occurrence. Y copies each group's first slice.

The sort runs ceil(log2 length) passes over the permutation, alternating between its two
scratch arrays; it starts in the one that makes it end in the first. Every position the
kernel writes comes from a slice number it made itself (never from the data), so it reads
and writes only inside its buffers. It runs on one thread: the merge passes depend on each
other, and inputs are small next to the kernels around them."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I1, I64, KernelBuilder
from hobbit.emit.half import widen
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.ops.scatter import size_of

_INT64 = np.dtype(np.int64)


class _Slices:
    """The compared slices of x and the order between them."""

    def __init__(self, kb: KernelBuilder, x: ir.Value, dtype: np.dtype, outer: int, length: int, inner: int):
        self.kb, self.x, self.dtype = kb, x, np.dtype(dtype)
        self.outer, self.length, self.inner = outer, length, inner

    def less(self, a: ir.Value, c: ir.Value) -> ir.Value:
        """i1: slice a sorts strictly before slice c."""
        kb, b = self.kb, self.kb.b
        size = self.outer * self.inner
        base_a, base_c = kb.mul(a, self.inner), kb.mul(c, self.inner)
        if size == 1:
            return self._element_less(kb.load(self.x, self.dtype, base_a), kb.load(self.x, self.dtype, base_c))
        if size == 0:
            return ir.Constant(I1, 0)
        pre = b.block
        head, body, step, done = kb.blocks("cmp", "head", "body", "next", "end")
        kb.enter(head)
        k = b.phi(I64, name="k")
        k.add_incoming(kb.i64(0), pre)
        b.cbranch(b.icmp_signed("<", k, kb.i64(size)), body, done)
        b.position_at_end(body)
        at = k if self.outer == 1 else kb.add(k, kb.mul(kb.udiv(k, self.inner), (self.length - 1) * self.inner))
        u = kb.load(self.x, self.dtype, kb.add(base_a, at))
        v = kb.load(self.x, self.dtype, kb.add(base_c, at))
        before = self._element_less(u, v)
        differs = b.or_(before, self._element_less(v, u))
        decided = b.block
        b.cbranch(differs, done, step)
        b.position_at_end(step)
        k.add_incoming(b.add(k, kb.i64(1)), step)
        b.branch(head)
        b.position_at_end(done)
        result = b.phi(I1, name="less")
        result.add_incoming(ir.Constant(I1, 0), head)
        result.add_incoming(before, decided)
        return result

    def _element_less(self, u: ir.Value, v: ir.Value) -> ir.Value:
        b = self.kb.b
        if self.dtype.kind in "iub":
            return b.icmp_signed("<", u, v) if self.dtype.kind == "i" else b.icmp_unsigned("<", u, v)
        u, v = widen(b, u, self.dtype), widen(b, v, self.dtype)  # 16-bit floats compare in float32
        number_before_nan = b.and_(b.fcmp_ordered("ord", u, u), b.fcmp_unordered("uno", v, v))
        return b.or_(b.fcmp_ordered("<", u, v), number_before_nan)


def emit_unique(kb: KernelBuilder, x: ir.Value, outputs: list[ir.Value], scratch: ir.Value | None, dtype: np.dtype,
                outer: int, length: int, inner: int, sorted_: bool) -> None:
    """Write Y, indices, inverse indices, counts (outputs[:4]) and the extent (outputs[4])."""
    y, first, inverse, counts, extent = outputs
    if length == 0:
        kb.store(kb.i64(0), extent, _INT64)
        return
    slices = _Slices(kb, x, dtype, outer, length, inner)
    perm = scratch
    spare = kb.gep(scratch, _INT64, length)
    _merge_sort(kb, slices, perm, spare, length)
    groups = kb.local(kb.i64(0))
    _run_lengths(kb, slices, perm, spare, first, inverse, counts, length, groups, sorted_)
    if not sorted_:
        _renumber_by_first(kb, perm, spare, first, inverse, counts, length, groups)
    n = kb.b.load(groups)
    _copy_slices(kb, x, y, first, dtype, outer, length, inner, n)
    with kb.loop(n, length, name="pad") as g:
        kb.store(kb.i64(0), first, _INT64, g)
        kb.store(kb.i64(0), counts, _INT64, g)
    kb.store(n, extent, _INT64)


def _merge_sort(kb: KernelBuilder, slices: _Slices, perm: ir.Value, spare: ir.Value, length: int) -> None:
    """perm[:length] = the slice numbers in stable sorted order."""
    b = kb.b
    passes = (length - 1).bit_length()
    start, other = (spare, perm) if passes % 2 else (perm, spare)
    with kb.loop(0, length, name="init") as p:
        kb.store(p, start, _INT64, p)
    with kb.loop(0, passes, name="pass") as r:
        even = b.icmp_signed("==", b.and_(r, kb.i64(1)), kb.i64(0))
        src, dst = b.select(even, start, other), b.select(even, other, start)
        width = b.shl(kb.i64(1), r)
        pair = b.shl(width, kb.i64(1))
        pairs = b.udiv(b.add(kb.i64(length - 1), pair), pair)
        with kb.loop(0, pairs, name="pair") as q:
            lo = b.mul(q, pair)
            _merge(kb, slices, src, dst, lo, kb.imin(b.add(lo, width), length), kb.imin(b.add(lo, pair), length),
                   length)


def _merge(kb: KernelBuilder, slices: _Slices, src: ir.Value, dst: ir.Value, lo: ir.Value, mid: ir.Value,
           hi: ir.Value, length: int) -> None:
    """dst[lo:hi] = the sorted runs src[lo:mid] and src[mid:hi] merged, the left one first on ties."""
    b = kb.b
    left, right = kb.alloca(I64), kb.alloca(I64)
    take_right = kb.alloca(I1)
    b.store(lo, left)
    b.store(mid, right)
    with kb.loop(lo, hi, name="t") as t:
        i, j = b.load(left), b.load(right)
        has_left, has_right = b.icmp_signed("<", i, mid), b.icmp_signed("<", j, hi)
        # Both heads are loaded from clamped positions; only a real one is ever taken.
        head_left = kb.load(src, _INT64, kb.imin(i, length - 1))
        head_right = kb.load(src, _INT64, kb.imin(j, length - 1))
        b.store(b.not_(has_left), take_right)
        with kb.if_then(b.and_(has_left, has_right)):
            b.store(slices.less(head_right, head_left), take_right)
        right_first = b.load(take_right)
        kb.store(b.select(right_first, head_right, head_left), dst, _INT64, t)
        b.store(b.select(right_first, i, b.add(i, kb.i64(1))), left)
        b.store(b.select(right_first, b.add(j, kb.i64(1)), j), right)


def _run_lengths(kb: KernelBuilder, slices: _Slices, perm: ir.Value, spare: ir.Value, first: ir.Value,
                 inverse: ir.Value, counts: ir.Value, length: int, groups: ir.Value, sorted_: bool) -> None:
    """Number the groups in sorted order: inverse[s] = group of slice s. sorted_: also write
    first and counts; else record each group's first index in spare."""
    b = kb.b
    with kb.loop(0, length, name="p") as p:
        here = kb.load(perm, _INT64, p)
        before = kb.load(perm, _INT64, b.select(b.icmp_signed(">", p, kb.i64(0)), b.sub(p, kb.i64(1)), kb.i64(0)))
        with kb.if_then(b.or_(b.icmp_signed("==", p, kb.i64(0)), slices.less(before, here))):
            n = b.load(groups)
            if sorted_:
                kb.store(here, first, _INT64, n)
                kb.store(kb.i64(0), counts, _INT64, n)
            else:
                kb.store(here, spare, _INT64, n)
            b.store(b.add(n, kb.i64(1)), groups)
        g = b.sub(b.load(groups), kb.i64(1))
        kb.store(g, inverse, _INT64, here)
        if sorted_:
            kb.store(b.add(kb.load(counts, _INT64, g), kb.i64(1)), counts, _INT64, g)


def _renumber_by_first(kb: KernelBuilder, perm: ir.Value, spare: ir.Value, first: ir.Value, inverse: ir.Value,
                       counts: ir.Value, length: int, groups: ir.Value) -> None:
    """Groups in order of first occurrence: perm[g] = the new number of sorted group g, set
    when slice s = spare[g] comes up (before any other slice of the group)."""
    b = kb.b
    b.store(kb.i64(0), groups)
    with kb.loop(0, length, name="s") as s:
        g = kb.load(inverse, _INT64, s)
        with kb.if_then(b.icmp_signed("==", kb.load(spare, _INT64, g), s)):
            n = b.load(groups)
            kb.store(n, perm, _INT64, g)
            kb.store(s, first, _INT64, n)
            kb.store(kb.i64(0), counts, _INT64, n)
            b.store(b.add(n, kb.i64(1)), groups)
        renumbered = kb.load(perm, _INT64, g)
        kb.store(renumbered, inverse, _INT64, s)
        kb.store(b.add(kb.load(counts, _INT64, renumbered), kb.i64(1)), counts, _INT64, renumbered)


def _copy_slices(kb: KernelBuilder, x: ir.Value, y: ir.Value, first: ir.Value, dtype: np.dtype, outer: int,
                 length: int, inner: int, n: ir.Value) -> None:
    """y[:, g, :] = x[:, first[g], :] for g < n, zeros for the rest of the bound."""
    zero = kb.const(dtype, 0)
    with kb.loop(0, outer, name="o") as o:
        with kb.loop(0, n, name="g") as g:
            source = kb.load(first, _INT64, g)
            with kb.loop(0, inner, name="c") as c:
                value = kb.load(x, dtype, kb.add(kb.mul(kb.add(kb.mul(o, length), source), inner), c))
                kb.store(value, y, dtype, kb.add(kb.mul(kb.add(kb.mul(o, length), g), inner), c))
        with kb.loop(n, length, name="g.pad") as g:
            with kb.loop(0, inner, name="c.pad") as c:
                kb.store(zero, y, dtype, kb.add(kb.mul(kb.add(kb.mul(o, length), g), inner), c))


def _lower_bounded_unique(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    axis = k.node.attrs["axis"]
    shape = tuple(x.shape)
    if axis is None:
        outer, length, inner = 1, size_of(shape), 1
    else:
        outer, length, inner = size_of(shape[:axis]), shape[axis], size_of(shape[axis + 1:])
    emit_unique(k.kb, k.inputs[0], k.outputs, k.scratch, x.dtype, outer, length, inner,
                bool(k.node.attrs["sorted"]))


CPU.register("BoundedUnique", lower=_lower_bounded_unique)
