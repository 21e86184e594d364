"""Kernels whose memory accesses follow indices read at run time: GatherElements,
GatherND, ScatterElements, ScatterND, TensorScatter and ReverseSequence.

Every run-time index goes through `checked_index`: a negative one counts from
the end, as ONNX specifies; one outside [-dim, dim) is invalid (onnxruntime
refuses it too) and is reported through the kernel's status record
(hobbit.emit.status), so run() raises a RunError naming the node; the kernel
goes on with the nearest valid index, so it never touches memory outside its
buffers. Sequence lengths and linear write positions are checked the same way."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import I64, KernelBuilder
from hobbit.backend.cpu.copy import PARALLEL_MIN, emit_strided_copy
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.reduce import combine
from hobbit.emit.scalar import Emit
from hobbit.emit.status import check_range


def load_index(kb: KernelBuilder, ptr: ir.Value, dtype: np.dtype, at: int | ir.Value) -> ir.Value:
    """An integer index tensor's element as a signed i64."""
    value = kb.load(ptr, dtype, at)
    if value.type.width == 64:
        return value
    return kb.b.sext(value, I64) if np.dtype(dtype).kind == "i" else kb.b.zext(value, I64)


def clamp(kb: KernelBuilder, v: ir.Value, lo: int | ir.Value, hi: int | ir.Value) -> ir.Value:
    """The i64 `v` limited to [lo, hi]."""
    b = kb.b
    v = b.select(b.icmp_signed("<", v, kb.idx(lo)), kb.idx(lo), v)
    return b.select(b.icmp_signed(">", v, kb.idx(hi)), kb.idx(hi), v)


def checked_index(kb: KernelBuilder, raw: ir.Value, dim: int | ir.Value, axis: int) -> ir.Value:
    """`raw` as a position in [0, dim): negatives count from the end; one outside [-dim, dim)
    is reported as an invalid index along `axis` of the data, and clamped. `dim` may be a
    run-time length (an i64 at least 1: hobbit.graph.extents)."""
    b = kb.b
    low = -dim if isinstance(dim, int) else b.neg(dim)
    check_range(kb, raw, low, kb.add(dim, -1), "index", axis)
    idx = b.select(b.icmp_signed("<", raw, kb.i64(0)), b.add(raw, kb.idx(dim)), raw)
    return clamp(kb, idx, 0, kb.add(dim, -1))


def share(threads: Threads | None, units: int, work: int) -> tuple[int | ir.Value, int | ir.Value]:
    """This thread's part [lo, hi) of an outer loop of `units` iterations; the whole loop
    when there are no threads or `work` (elements) is too small to pay for a parallel region."""
    if threads is None or work < PARALLEL_MIN:
        return 0, units
    return threads.split(units)


def loop_nest(kb: KernelBuilder, shape: tuple[int, ...], body: Callable[[list[ir.Value]], None],
              name: str = "d", threads: Threads | None = None) -> None:
    """body(index) over every index of `shape`, outermost dim first (nothing when it is empty);
    with `threads`, large nests share their outermost dim."""
    if any(n == 0 for n in shape):
        return

    def level(d: int, index: list[ir.Value]) -> None:
        if d == len(shape):
            body(index)
            return
        lo, hi = share(threads, shape[0], int(np.prod(shape, dtype=np.int64))) if d == 0 else (0, shape[d])
        with kb.loop(lo, hi, name=f"{name}{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def update(kb: KernelBuilder, dst: ir.Value, dtype: np.dtype, at: int | ir.Value, value: ir.Value,
           reduction: str) -> None:
    """dst[at] = value, or dst[at] = dst[at] (reduction) value for add, mul, max and min
    (16-bit floats combine in float32 and round once)."""
    if reduction != "none":
        b = kb.b
        old = widen(b, kb.load(dst, dtype, at), dtype)
        value = narrow(b, combine(Emit(kb, compute_dtype(dtype), 1), reduction, old, widen(b, value, dtype)), dtype)
    kb.store(value, dst, dtype, at)


def _element_positions(kb: KernelBuilder, index: list[ir.Value], indices: ir.Value, index_dtype: np.dtype,
                       index_strides: list[int], data_shape: tuple[int, ...], data_strides: list[int],
                       axis: int) -> tuple[ir.Value, ir.Value]:
    """For the element-wise index ops: the flat position `index` has in the indices tensor, and
    the data position it selects (its own coordinates, with the checked index along `axis`)."""
    at = kb.affine(list(zip(index, index_strides)))
    pos = checked_index(kb, load_index(kb, indices, index_dtype, at), data_shape[axis], axis)
    terms = [(i, s) for d, (i, s) in enumerate(zip(index, data_strides)) if d != axis]
    return at, kb.add(kb.affine(terms), kb.mul(pos, data_strides[axis]))


def emit_gather_elements(kb: KernelBuilder, data: ir.Value, indices: ir.Value, dst: ir.Value,
                         dtype: np.dtype, index_dtype: np.dtype, data_shape: tuple[int, ...],
                         index_shape: tuple[int, ...], axis: int, threads: Threads | None = None) -> None:
    """dst[i] = data[i with i[axis] replaced by indices[i]]; dst has the indices' shape."""
    data_strides, index_strides = contiguous_strides(data_shape), contiguous_strides(index_shape)

    def element(index: list[ir.Value]) -> None:
        at, src = _element_positions(kb, index, indices, index_dtype, index_strides, data_shape, data_strides, axis)
        kb.store(kb.load(data, dtype, src), dst, dtype, at)

    loop_nest(kb, index_shape, element, threads=threads)


def emit_scatter_elements(kb: KernelBuilder, data: ir.Value, indices: ir.Value, updates: ir.Value,
                          dst: ir.Value, dtype: np.dtype, index_dtype: np.dtype,
                          data_shape: tuple[int, ...], index_shape: tuple[int, ...], axis: int,
                          reduction: str) -> None:
    """dst = data, then dst[i with i[axis] = indices[i]] (reduction)= updates[i], in index order."""
    size = int(np.prod(data_shape, dtype=np.int64))
    emit_strided_copy(kb, data, dst, dtype, (size,), [1], 0)
    data_strides, index_strides = contiguous_strides(data_shape), contiguous_strides(index_shape)

    def element(index: list[ir.Value]) -> None:
        at, target = _element_positions(kb, index, indices, index_dtype, index_strides, data_shape, data_strides,
                                        axis)
        update(kb, dst, dtype, target, kb.load(updates, dtype, at), reduction)

    loop_nest(kb, index_shape, element)


def _nd_offset(kb: KernelBuilder, indices: ir.Value, index_dtype: np.dtype, row: ir.Value,
               dims: tuple[int, ...], strides: list[int], first_axis: int) -> int | ir.Value:
    """Element offset of the index tuple indices[row, :] into dims with `strides`
    (dims[0] is axis `first_axis` of the data)."""
    offset: int | ir.Value = 0
    for j, (dim, stride) in enumerate(zip(dims, strides)):
        raw = load_index(kb, indices, index_dtype, kb.add(kb.mul(row, len(dims)), j))
        pos = checked_index(kb, raw, dim, first_axis + j)
        offset = kb.add(offset, kb.mul(pos, stride))
    return offset


def emit_gather_nd(kb: KernelBuilder, data: ir.Value, indices: ir.Value, dst: ir.Value, dtype: np.dtype,
                   index_dtype: np.dtype, batch: int, count: int, dims: tuple[int, ...], inner: int,
                   first_axis: int, threads: Threads | None = None) -> None:
    """data viewed as [batch, *dims, inner], indices as [batch, count, len(dims)]:
    dst[b, n, :] = data[b, indices[b, n, :], :], one loop over the rows (b, n);
    dims[0] is axis `first_axis` of the data (after its batch dims)."""
    strides = [s * inner for s in contiguous_strides(dims)]
    block = int(np.prod(dims, dtype=np.int64)) * inner
    rows = batch * count
    if rows * inner == 0:
        return
    lo, hi = share(threads, rows, rows * inner)
    with kb.loop(lo, hi, name="row") as row:
        b = kb.b.udiv(row, kb.i64(count)) if batch > 1 else 0
        src = kb.add(kb.mul(b, block), _nd_offset(kb, indices, index_dtype, row, dims, strides, first_axis))
        out = kb.mul(row, inner)
        with kb.loop(0, inner, name="k") as k:
            kb.store(kb.load(data, dtype, kb.add(src, k)), dst, dtype, kb.add(out, k))


def emit_scatter_nd(kb: KernelBuilder, data: ir.Value, indices: ir.Value, updates: ir.Value, dst: ir.Value,
                    dtype: np.dtype, index_dtype: np.dtype, count: int, dims: tuple[int, ...], inner: int,
                    reduction: str) -> None:
    """dst = data viewed as [*dims, inner]; then for each n in order,
    dst[indices[n, :], :] (reduction)= updates[n, :]."""
    size = int(np.prod(dims, dtype=np.int64)) * inner
    emit_strided_copy(kb, data, dst, dtype, (size,), [1], 0)
    strides = [s * inner for s in contiguous_strides(dims)]
    if count * inner == 0 or size == 0:
        return
    with kb.loop(0, count, name="n") as n:
        target = _nd_offset(kb, indices, index_dtype, n, dims, strides, 0)
        src = kb.mul(n, inner)
        with kb.loop(0, inner, name="k") as k:
            update(kb, dst, dtype, kb.add(target, k), kb.load(updates, dtype, kb.add(src, k)), reduction)


def emit_tensor_scatter(kb: KernelBuilder, cache: ir.Value, update: ir.Value, starts: ir.Value | None,
                        dst: ir.Value, dtype: np.dtype, batch: int, outer: int, length: int, steps: int, inner: int,
                        circular: bool, axis: int) -> None:
    """dst = cache viewed as [outer, length, inner] (outer = batch * the dims up to the axis);
    then dst[o, p, :] = update[o, s, :] with p = starts[o's batch] + s, taken modulo `length`
    when `circular`; otherwise a start outside [0, length - steps] (writes past the cache) is
    reported as an invalid write position along `axis`, and positions are clamped into [0, length)."""
    emit_strided_copy(kb, cache, dst, dtype, (outer * length * inner,), [1], 0)
    if outer * steps * inner == 0 or length == 0:
        return
    b = kb.b
    per_batch = outer // batch
    with kb.loop(0, outer, name="o") as o:
        start = kb.i64(0)
        if starts is not None:
            start = load_index(kb, starts, np.dtype(np.int64), b.udiv(o, kb.i64(per_batch)))
            if not circular:
                check_range(kb, start, 0, length - steps, "write position", axis)
        with kb.loop(0, steps, name="s") as s:
            pos = b.add(start, s)
            if circular:
                pos = b.srem(pos, kb.i64(length))
                pos = b.select(b.icmp_signed("<", pos, kb.i64(0)), b.add(pos, kb.i64(length)), pos)
            else:
                pos = clamp(kb, pos, 0, length - 1)
            target = kb.mul(kb.add(kb.mul(o, length), pos), inner)
            source = kb.mul(kb.add(kb.mul(o, steps), s), inner)
            with kb.loop(0, inner, name="k") as k:
                kb.store(kb.load(update, dtype, kb.add(source, k)), dst, dtype, kb.add(target, k))


def emit_reverse_sequence(kb: KernelBuilder, x: ir.Value, lengths: ir.Value, dst: ir.Value, dtype: np.dtype,
                          length_dtype: np.dtype, shape: tuple[int, ...], batch_axis: int, time_axis: int,
                          threads: Threads | None = None) -> None:
    """dst[.., t, .., b, ..] = x[.., len[b] - 1 - t, .., b, ..] for t < len[b], else x itself;
    a len[b] outside [0, time dim] is reported as an invalid sequence length, and clamped."""
    strides = contiguous_strides(shape)
    steps = shape[time_axis]
    b = kb.b

    def element(index: list[ir.Value]) -> None:
        raw = load_index(kb, lengths, length_dtype, index[batch_axis])
        check_range(kb, raw, 0, steps, "sequence length", time_axis)
        length = clamp(kb, raw, 0, steps)
        t = index[time_axis]
        flipped = b.sub(b.sub(length, kb.i64(1)), t)
        source_t = b.select(b.icmp_signed("<", t, length), flipped, t)
        terms = [(i, s) for d, (i, s) in enumerate(zip(index, strides)) if d != time_axis]
        src = kb.add(kb.affine(terms), kb.mul(source_t, strides[time_axis]))
        kb.store(kb.load(x, dtype, src), dst, dtype, kb.affine(list(zip(index, strides))))

    loop_nest(kb, shape, element, threads=threads)
