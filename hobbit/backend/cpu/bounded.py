"""CPU kernels of the bounded-dynamic ops (hobbit/ops/bounded.py).

A bounded value is stored in its static bound shape, so every stride here is a
compile-time constant; only the trip counts along the data-dependent dim are loaded
from the extent inputs at run time. These kernels run the small post-processing part
of a model (score filters, detection lists): plain loops, left to LLVM."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.copy import emit_strided_copy
from hobbit.backend.cpu.index import clamp, load_index, loop_nest, update
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.status import check_range

I64 = np.dtype(np.int64)


def _extent(kb: KernelBuilder, ptr: ir.Value | None, static: int) -> int | ir.Value:
    """A run-time extent, clamped to its bound (an extent is never larger by construction;
    the clamp keeps a corrupt one from turning into an out-of-bounds loop)."""
    if ptr is None:
        return static
    return clamp(kb, kb.load(ptr, I64), 0, static)


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


@CPU.kernel("BoundedPad")
def _lower_pad(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    kb, axis = k.kb, k.node.attrs["axis"]
    outer, bound, inner = _split(tuple(x.shape), axis)
    n = _extent(kb, k.inputs[1], bound)
    fill = kb.const(x.dtype, k.node.attrs["value"])
    with kb.loop(0, outer, name="o") as o:
        with kb.loop(0, bound, name="r") as r:
            at = kb.add(kb.mul(o, bound * inner), kb.mul(r, inner))
            inside = kb.b.icmp_signed("<", r, kb.idx(n))
            with kb.loop(0, inner, name="i") as i:
                v = kb.load(k.inputs[0], x.dtype, kb.add(at, i))
                kb.store(kb.b.select(inside, v, fill), k.outputs[0], x.dtype, kb.add(at, i))


@CPU.kernel("BoundedCheck")
def _lower_check(k: KernelArgs) -> None:
    kb = k.kb
    value = kb.load(k.inputs[0], I64)
    limit = kb.load(k.inputs[1], I64)
    lo = limit if k.node.attrs["relation"] == "eq" else 0
    check_range(kb, value, lo, limit, "data-dependent length")
    kb.store(clamp_value(kb, value, lo, limit), k.outputs[0], I64)


def clamp_value(kb: KernelBuilder, v: ir.Value, lo: int | ir.Value, hi: ir.Value) -> ir.Value:
    b = kb.b
    v = b.select(b.icmp_signed("<", v, kb.idx(lo)), kb.idx(lo), v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def _checked(kb: KernelBuilder, raw: ir.Value, dim: int | ir.Value, axis: int) -> ir.Value:
    """`raw` as a position in [0, dim) for a run-time dim (negatives count from the end); when
    the dim is 0 at run time, no index is valid (reported) and position 0 of the bound is used."""
    d = kb.idx(dim)
    check_range(kb, raw, kb.b.neg(d), kb.b.sub(d, kb.i64(1)), "index", axis)
    b = kb.b
    idx = b.select(b.icmp_signed("<", raw, kb.i64(0)), b.add(raw, d), raw)
    idx = b.select(b.icmp_signed(">=", idx, d), b.sub(d, kb.i64(1)), idx)
    return b.select(b.icmp_signed("<", idx, kb.i64(0)), kb.i64(0), idx)


@CPU.kernel("BoundedGather")
def _lower_gather(k: KernelArgs) -> None:
    data, indices = k.node.inputs[:2]
    kb, axis = k.kb, k.node.attrs["axis"]
    outer, bound, inner = _split(tuple(data.shape), axis)
    rows = indices.shape[0] if indices.shape else 1
    per_row = int(np.prod(indices.shape[1:], dtype=np.int64)) if indices.shape else 1
    if outer * bound * inner * rows * per_row == 0:
        return
    count = kb.mul(_extent(kb, k.inputs[2], rows), per_row)
    dim = _extent(kb, k.inputs[3], bound)
    n_index = rows * per_row
    with kb.loop(0, outer, name="o") as o:
        with kb.loop(0, count, name="j") as j:
            idx = _checked(kb, load_index(kb, k.inputs[1], indices.dtype, j), dim, axis)
            src = kb.add(kb.mul(o, bound * inner), kb.mul(idx, inner))
            dst = kb.mul(kb.add(kb.mul(o, n_index), j), inner)
            with kb.loop(0, inner, name="i") as i:
                kb.store(kb.load(k.inputs[0], data.dtype, kb.add(src, i)), k.outputs[0], data.dtype, kb.add(dst, i))


@CPU.kernel("BoundedGatherND")
def _lower_gather_nd(k: KernelArgs) -> None:
    data, indices = k.node.inputs[:2]
    kb = k.kb
    q = indices.shape[-1]
    rows = int(np.prod(indices.shape[:-1], dtype=np.int64))
    inner = int(np.prod(data.shape[q:], dtype=np.int64))
    if rows * inner == 0:
        return
    strides = [int(np.prod(data.shape[d + 1:], dtype=np.int64)) for d in range(q)]
    lead = int(np.prod(indices.shape[1:-1], dtype=np.int64))
    count = kb.mul(_extent(kb, k.inputs[2], indices.shape[0]), lead)
    with kb.loop(0, count, name="row") as row:
        src: int | ir.Value = 0
        for d in range(q):
            raw = load_index(kb, k.inputs[1], indices.dtype, kb.add(kb.mul(row, q), d))
            src = kb.add(src, kb.mul(_checked(kb, raw, data.shape[d], d), strides[d]))
        dst = kb.mul(row, inner)
        with kb.loop(0, inner, name="i") as i:
            kb.store(kb.load(k.inputs[0], data.dtype, kb.add(src, i)), k.outputs[0], data.dtype, kb.add(dst, i))


@CPU.kernel("BoundedConcat")
def _lower_concat(k: KernelArgs) -> None:
    count, axis = k.node.attrs["count"], k.node.attrs["axis"]
    out = k.node.outputs[0]
    kb = k.kb
    outer, total, inner = _split(tuple(out.shape), axis)
    start: int | ir.Value = 0
    for v, ptr, extent in zip(k.node.inputs[:count], k.inputs[:count], k.inputs[count:]):
        _, bound, _ = _split(tuple(v.shape), axis)
        n = _extent(kb, extent, bound)
        rows = kb.mul(n, inner)
        with kb.loop(0, outer, name="o") as o:
            src = kb.mul(o, bound * inner)
            dst = kb.add(kb.mul(o, total * inner), kb.mul(start, inner))
            with kb.loop(0, rows, name="e") as e:
                kb.store(kb.load(ptr, v.dtype, kb.add(src, e)), k.outputs[0], v.dtype, kb.add(dst, e))
        start = kb.add(start, n)


@CPU.kernel("BoundedScatterElements")
def _lower_scatter(k: KernelArgs) -> None:
    data, indices = k.node.inputs[:2]
    kb, axis = k.kb, k.node.attrs["axis"]
    shape, index_shape = tuple(data.shape), tuple(indices.shape)
    emit_strided_copy(kb, k.inputs[0], k.outputs[0], data.dtype, (data.type.size,), [1], 0)
    if indices.type.size == 0:
        return
    rows = _extent(kb, k.inputs[3], index_shape[0])
    dim = _extent(kb, k.inputs[4], shape[axis])
    data_strides, index_strides = contiguous_strides(shape), contiguous_strides(index_shape)
    with kb.loop(0, rows, name="r") as r:
        def element(rest: list[ir.Value]) -> None:
            index = [r] + rest
            at = kb.affine(list(zip(index, index_strides)))
            pos = _checked(kb, load_index(kb, k.inputs[1], indices.dtype, at), dim, axis)
            terms = [(i, s) for d, (i, s) in enumerate(zip(index, data_strides)) if d != axis]
            target = kb.add(kb.affine(terms), kb.mul(pos, data_strides[axis]))
            update(kb, k.outputs[0], data.dtype, target, kb.load(k.inputs[2], data.dtype, at),
                   k.node.attrs["reduction"])

        loop_nest(kb, index_shape[1:], element)
