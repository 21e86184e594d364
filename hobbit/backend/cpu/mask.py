"""Kernels that choose each output element by its position: Trilu keeps one side of
a diagonal, OneHot writes `on` where the position equals an index and `off` elsewhere.
Neither reads memory at a data-dependent address, so run-time `k` and indices need
no clamping."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.copy import emit_fill
from hobbit.emit.half import compute_dtype, widen
from hobbit.backend.cpu.index import clamp, load_index, share
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.scalar import Emit


def emit_trilu(kb: KernelBuilder, x: ir.Value, dst: ir.Value, dtype: np.dtype, k: ir.Value | int,
               batch: int, rows: int, cols: int, upper: bool, threads: Threads | None = None) -> None:
    """Over [batch, rows, cols]: keep x where col - row >= k (upper) or <= k (lower), else 0.

    Each row splits at one column into a zero run and a copied run, two plain loops."""
    if batch * rows * cols == 0:
        return
    # Past these bounds every row is all kept or all zero; clamping keeps row + k from overflowing.
    k = clamp(kb, kb.idx(k), -rows - 1, cols + 1)
    lo, hi = share(threads, batch * rows, batch * rows * cols)
    with kb.loop(lo, hi, name="row") as r:  # every row of every matrix
        base = kb.mul(r, cols)
        edge = kb.b.add(kb.b.urem(r, kb.i64(rows)), k)
        if upper:
            split = clamp(kb, edge, 0, cols)  # columns [0, split) are zero
            emit_fill(kb, dst, dtype, 0, split, 0, base)
            with kb.loop(split, cols, name="col") as j:
                at = kb.add(base, j)
                kb.store(kb.load(x, dtype, at), dst, dtype, at)
        else:
            split = clamp(kb, kb.b.add(edge, kb.i64(1)), 0, cols)  # columns [split, cols) are zero
            with kb.loop(0, split, name="col") as j:
                at = kb.add(base, j)
                kb.store(kb.load(x, dtype, at), dst, dtype, at)
            emit_fill(kb, dst, dtype, split, cols, 0, base)


def load_scalar_index(kb: KernelBuilder, ptr: ir.Value | None, dtype: np.dtype | None, default: int) -> ir.Value:
    """A one-element integer input as i64, or `default` when the input is absent."""
    if ptr is None:
        return kb.i64(default)
    return load_index(kb, ptr, dtype, 0)


def emit_one_hot(kb: KernelBuilder, indices: ir.Value, index_dtype: np.dtype, values: ir.Value, dst: ir.Value,
                 dtype: np.dtype, outer: int, depth: int, inner: int, threads: Threads | None = None) -> None:
    """dst[o, j, i] = values[1] if index[o, i] (negative counts from the end) == j else values[0].

    Float indices truncate towards zero; indices outside [-depth, depth) match no j."""
    if outer * depth * inner == 0:
        return
    off, on = kb.load(values, dtype, 0), kb.load(values, dtype, 1)
    convert = Emit(kb, compute_dtype(index_dtype), 1)
    b = kb.b
    lo, hi = share(threads, outer, outer * depth * inner)
    with kb.loop(lo, hi, name="o") as o:
        with kb.loop(0, depth, name="j") as j:
            row = kb.mul(kb.add(kb.mul(o, depth), j), inner)
            with kb.loop(0, inner, name="i") as i:
                at = kb.add(kb.mul(o, inner), i)
                if convert.float:
                    raw = widen(b, kb.load(indices, index_dtype, at), index_dtype)
                    idx = convert.convert(raw, np.dtype(np.int64))
                else:
                    idx = load_index(kb, indices, index_dtype, at)
                idx = b.select(b.icmp_signed("<", idx, kb.i64(0)), b.add(idx, kb.i64(depth)), idx)
                hit = b.icmp_signed("==", idx, j)
                kb.store(b.select(hit, on, off), dst, dtype, kb.add(row, i))
