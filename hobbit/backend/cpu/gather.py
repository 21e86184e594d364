"""Copies whose source index along some dim is not affine in the output index.

`emit_table_copy` covers Gather with constant indices and Pad in reflect, edge
and wrap modes: each output dim maps its index to a source offset, either a
`range` (an affine map, emitted as a stride) or a list (emitted as a constant
table read once per loop iteration of that dim). `emit_runtime_gather` is
Gather with indices known only at run time. `emit_gather_extents` is Gather on
tensors with run-time dims (hobbit.graph.extents): every dim walked up to its
length in this inference, an index along a run-time axis checked against that
axis's run-time length."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import I64, KernelBuilder
from hobbit.emit.epilogue import collapse_extents
from hobbit.backend.cpu.copy import PARALLEL_MIN, emit_strided_copy
from hobbit.backend.cpu.index import checked_index, load_index
from hobbit.backend.cpu.parallel import Threads


def _as_affine(offsets: Sequence[int]) -> tuple[int, int] | None:
    """(first, step) when `offsets` is an arithmetic progression."""
    if isinstance(offsets, range):
        return offsets.start, offsets.step
    if len(offsets) <= 1:
        return (offsets[0] if offsets else 0), 0
    step = offsets[1] - offsets[0]
    if all(offsets[i] == offsets[0] + i * step for i in range(len(offsets))):
        return offsets[0], step
    return None


def constant_table(kb: KernelBuilder, values: Sequence[int]) -> ir.GlobalVariable:
    module = kb.fn.module
    ty = ir.ArrayType(I64, len(values))
    table = ir.GlobalVariable(module, ty, name=module.get_unique_name("index_table"))
    table.global_constant = True
    table.linkage = "private"
    table.unnamed_addr = True
    table.initializer = ir.Constant(ty, [int(v) for v in values])
    return table


def emit_table_copy(kb: KernelBuilder, src: ir.Value, dst: ir.Value, dtype: np.dtype,
                    offsets: list[Sequence[int]], lengths: tuple[int | ir.Value, ...] | None = None) -> None:
    """dst (contiguous, shape = lengths of `offsets`)[i_0, ..., i_n] = src[sum_d offsets[d][i_d]].

    Every offset must lie inside src; the caller computes them at compile time. `lengths`:
    each dim's trip count in this inference where dims are run-time (hobbit.graph.extents);
    a run-time dim's table is read up to its length, so its prefix of that length must be
    right at every size (ResizeNearest's are: hobbit.graph.extents.TABLE_ATTRS)."""
    shape = tuple(len(o) for o in offsets)
    if any(n == 0 for n in shape):
        return
    affine = [_as_affine(o) for o in offsets]
    if all(a is not None for a in affine):
        emit_strided_copy(kb, src, dst, dtype, shape, [a[1] for a in affine], sum(a[0] for a in affine),
                          lengths=lengths)
        return
    trips = list(shape) if lengths is None else list(lengths)
    dst_strides = contiguous_strides(tuple(shape))
    tables = [None if a is not None else constant_table(kb, o) for a, o in zip(affine, offsets)]
    base = sum(a[0] for a in affine if a is not None)

    def level(d: int, src_off: int | ir.Value, dst_off: int | ir.Value) -> None:
        if d == len(shape):
            kb.store(kb.load(src, dtype, src_off), dst, dtype, dst_off)
            return
        with kb.loop(0, trips[d], name=f"d{d}") as i:
            if tables[d] is not None:
                step = kb.load(tables[d], np.int64, i)
            else:
                step = kb.mul(i, affine[d][1])
            level(d + 1, kb.add(src_off, step), kb.add(dst_off, kb.mul(i, dst_strides[d])))

    level(0, base, 0)


def emit_runtime_gather(kb: KernelBuilder, data: ir.Value, indices: ir.Value, dst: ir.Value,
                        dtype: np.dtype, index_dtype: np.dtype, outer: int, axis_dim: int,
                        count: int, inner: int, axis: int) -> None:
    """dst[o, j, k] = data[o, idx[j], k] over data viewed as [outer, axis_dim, inner].

    A negative index counts from the end, as in ONNX; one outside [-axis_dim, axis_dim)
    is reported as invalid (run() raises, as onnxruntime does) and clamped, so the
    generated code never reads out of bounds (hobbit.backend.cpu.index.checked_index)."""
    if outer * count * inner == 0:
        return
    with kb.loop(0, outer, name="outer") as o:
        with kb.loop(0, count, name="idx") as j:
            idx = checked_index(kb, load_index(kb, indices, index_dtype, j), axis_dim, axis)
            src_base = kb.add(kb.mul(o, axis_dim * inner), kb.mul(idx, inner))
            dst_base = kb.mul(kb.add(kb.mul(o, count), j), inner)
            with kb.loop(0, inner, name="inner") as k:
                kb.store(kb.load(data, dtype, kb.add(src_base, k)), dst, dtype, kb.add(dst_base, k))


def emit_gather_extents(kb: KernelBuilder, data: ir.Value, indices: ir.Value, dst: ir.Value, dtype: np.dtype,
                        index_dtype: np.dtype, data_shape: tuple[int, ...], index_shape: tuple[int, ...],
                        axis: int, data_lengths: tuple[int | ir.Value, ...],
                        index_lengths: tuple[int | ir.Value, ...], checked: bool,
                        threads: Threads | None = None) -> None:
    """dst[p, j, q] = data[p, indices[j], q]: p the data's dims before `axis`, j the indices'
    dims, q the data's dims after it; every tensor in its bound layout (`data_shape`,
    `index_shape`, and their concatenation for dst), each dim walked up to its length in this
    inference (`data_lengths`, `index_lengths`: hobbit.graph.extents). With `checked`, each
    index is checked against the axis's length in this inference (a negative one counts from
    that end; hobbit.backend.cpu.index.checked_index), else the indices are positions already.
    `indices` may be a constant table (i64). With `threads`, a gather of at least
    PARALLEL_MIN elements (at the bound) shares its outermost loop."""
    rank = len(index_shape)
    out_shape = data_shape[:axis] + index_shape + data_shape[axis + 1:]
    if any(n == 0 for n in out_shape):
        return
    data_strides, out_strides = contiguous_strides(data_shape), contiguous_strides(out_shape)
    pieces = [  # (shape, lengths, source strides: data's or the indices', out strides)
        (data_shape[:axis], data_lengths[:axis], data_strides[:axis], out_strides[:axis]),
        (index_shape, index_lengths, contiguous_strides(index_shape), out_strides[axis:axis + rank]),
        (data_shape[axis + 1:], data_lengths[axis + 1:], data_strides[axis + 1:], out_strides[axis + rank:]),
    ]
    levels: list[list[tuple[int | ir.Value, int, int]]] = []  # per piece: (trip count, source stride, out stride)
    for shape, lengths, src_strides, dst_strides in pieces:
        _, (src_s, dst_s), trips = collapse_extents(kb, tuple(shape), [list(src_strides), list(dst_strides)],
                                                    tuple(lengths))
        levels.append([(t, a, b) for t, a, b in zip(trips, src_s, dst_s) if not (isinstance(t, int) and t == 1)])
    flat = levels[0] + levels[1] + levels[2]
    share_first = threads is not None and int(np.prod(out_shape, dtype=np.int64)) >= PARALLEL_MIN
    axis_length, axis_stride = data_lengths[axis], data_strides[axis]

    def level(d: int, src: int | ir.Value, at: int | ir.Value, out: int | ir.Value) -> None:
        if d == len(levels[0]) + len(levels[1]):  # the index of this position, once per row of q
            raw = load_index(kb, indices, index_dtype, at)
            idx = checked_index(kb, raw, axis_length, axis) if checked else raw
            src = kb.add(src, kb.mul(idx, axis_stride))
        if d == len(flat):
            kb.store(kb.load(data, dtype, src), dst, dtype, out)
            return
        trip, src_stride, out_stride = flat[d]
        lo, hi = threads.split(trip) if d == 0 and share_first else (0, trip)
        with kb.loop(lo, hi, name=f"g{d}") as i:
            if len(levels[0]) <= d < len(levels[0]) + len(levels[1]):
                level(d + 1, src, kb.add(at, kb.mul(i, src_stride)), kb.add(out, kb.mul(i, out_stride)))
            else:
                level(d + 1, kb.add(src, kb.mul(i, src_stride)), at, kb.add(out, kb.mul(i, out_stride)))

    level(0, 0, 0, 0)
