"""TopK: the k largest (or smallest) elements along one axis, sorted, with their indices.

The input is viewed as [outer, length, inner]; each (outer, inner) column keeps
its best k so far directly in the two outputs, in order. Elements are visited in
index order and one that is not strictly better than the current k-th is
rejected with one comparison; an accepted one is inserted after every held
element it does not beat. Equal values therefore keep ascending indices, which
is what onnxruntime returns. Every position written is below k by construction
(NaNs included), so the kernel never leaves its outputs."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.emit.half import compute_dtype, widen
from hobbit.backend.cpu.index import share
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.scalar import Emit


def emit_top_k(kb: KernelBuilder, x: ir.Value, values: ir.Value, indices: ir.Value, dtype: np.dtype,
               outer: int, length: int, inner: int, k: int, largest: bool, threads: Threads | None = None) -> None:
    if outer * inner * k == 0:
        return
    e = Emit(kb, compute_dtype(dtype), 1)
    b = kb.b
    index_dtype = np.dtype(np.int64)
    held = kb.alloca(kb.i64(0).type)
    position = kb.alloca(kb.i64(0).type)

    def better(v: ir.Value, other: ir.Value) -> ir.Value:
        """Compare two stored values (16-bit floats in float32)."""
        v, other = widen(b, v, dtype), widen(b, other, dtype)
        return e.gt(v, other) if largest else e.lt(v, other)

    lo, hi = share(threads, outer, outer * length * inner)
    with kb.loop(lo, hi, name="o") as o:
        with kb.loop(0, inner, name="c") as c:
            def slot(p: int | ir.Value) -> int | ir.Value:
                """Offset of output position p of this column."""
                return kb.add(kb.mul(kb.add(kb.mul(o, k), p), inner), c)

            b.store(kb.i64(0), held)
            with kb.loop(0, length, name="l") as l:
                v = kb.load(x, dtype, kb.add(kb.mul(kb.add(kb.mul(o, length), l), inner), c))
                count = b.load(held)
                full = b.icmp_signed("==", count, kb.i64(k))
                beats_last = better(v, kb.load(values, dtype, slot(k - 1)))
                with kb.if_then(b.or_(b.not_(full), beats_last)):
                    _insert(kb, e, values, indices, dtype, index_dtype, slot, better, v, l, count, k, position)
                    grown = b.add(count, kb.i64(1))
                    b.store(b.select(full, count, grown), held)


def _insert(kb: KernelBuilder, e: Emit, values: ir.Value, indices: ir.Value, dtype: np.dtype,
            index_dtype: np.dtype, slot, better, v: ir.Value, l: ir.Value, count: ir.Value, k: int,
            position: ir.Value) -> None:
    """Put (v, l) after the held elements it does not beat, shifting the rest down one place."""
    b = kb.b
    b.store(kb.i64(0), position)
    with kb.loop(0, count, name="p") as p:
        stays_ahead = b.not_(better(v, kb.load(values, dtype, slot(p))))
        b.store(b.add(b.load(position), b.zext(stays_ahead, kb.i64(0).type)), position)
    pos = b.load(position)
    top = kb.imin(count, k - 1)
    with kb.loop(0, b.sub(top, pos), name="shift") as t:
        to = b.sub(top, t)
        frm = b.sub(to, kb.i64(1))
        kb.store(kb.load(values, dtype, slot(frm)), values, dtype, slot(to))
        kb.store(kb.load(indices, index_dtype, slot(frm)), indices, index_dtype, slot(to))
    with kb.if_then(b.icmp_signed("<", pos, kb.i64(k))):
        kb.store(v, values, dtype, slot(pos))
        kb.store(l, indices, index_dtype, slot(pos))
