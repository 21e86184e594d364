"""Copies whose source index along some dim is not affine in the output index.

`emit_table_copy` covers Gather with constant indices and Pad in reflect, edge
and wrap modes: each output dim maps its index to a source offset, either a
`range` (an affine map, emitted as a stride) or a list (emitted as a constant
table read once per loop iteration of that dim). `emit_runtime_gather` is
Gather with indices known only at run time."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import I64, KernelBuilder
from hobbit.backend.cpu.copy import emit_strided_copy
from hobbit.backend.cpu.index import checked_index, load_index


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


def _constant_table(kb: KernelBuilder, values: Sequence[int]) -> ir.GlobalVariable:
    module = kb.fn.module
    ty = ir.ArrayType(I64, len(values))
    table = ir.GlobalVariable(module, ty, name=module.get_unique_name("index_table"))
    table.global_constant = True
    table.linkage = "private"
    table.unnamed_addr = True
    table.initializer = ir.Constant(ty, [int(v) for v in values])
    return table


def emit_table_copy(kb: KernelBuilder, src: ir.Value, dst: ir.Value, dtype: np.dtype,
                    offsets: list[Sequence[int]]) -> None:
    """dst (contiguous, shape = lengths of `offsets`)[i_0, ..., i_n] = src[sum_d offsets[d][i_d]].

    Every offset must lie inside src; the caller computes them at compile time."""
    shape = tuple(len(o) for o in offsets)
    if any(n == 0 for n in shape):
        return
    affine = [_as_affine(o) for o in offsets]
    if all(a is not None for a in affine):
        emit_strided_copy(kb, src, dst, dtype, shape, [a[1] for a in affine], sum(a[0] for a in affine))
        return
    dst_strides = contiguous_strides(tuple(shape))
    tables = [None if a is not None else _constant_table(kb, o) for a, o in zip(affine, offsets)]
    base = sum(a[0] for a in affine if a is not None)

    def level(d: int, src_off: int | ir.Value, dst_off: int | ir.Value) -> None:
        if d == len(shape):
            kb.store(kb.load(src, dtype, src_off), dst, dtype, dst_off)
            return
        with kb.loop(0, shape[d], name=f"d{d}") as i:
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
