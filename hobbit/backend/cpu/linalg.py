"""Det: LU factorisation with partial pivoting, one matrix at a time.

Each matrix is copied to per-thread scratch and reduced to upper-triangular form
in place; the determinant is the product of the pivots, negated once per row
swap. A zero pivot column makes the determinant 0 and skips the elimination (no
division by zero). Matrices are independent, so they are shared among threads."""

from __future__ import annotations

import numpy as np

from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit


def lower_det(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    x = node.inputs[0]
    dtype = np.dtype(x.dtype)
    n = x.shape[-1]
    count = node.outputs[0].type.size
    e = Emit(kb, dtype, 1)
    a = k.thread_scratch(0, k.plan.matrix, dtype)
    det = kb.alloca(e.c(0.0).type)
    pivot_row = kb.alloca(kb.i64(0).type)
    best = kb.alloca(e.c(0.0).type)
    lo, hi = k.threads.split(count)
    with kb.loop(lo, hi, name="m") as m:
        base = kb.mul(m, n * n)
        with kb.loop(0, n * n, name="c") as c:
            kb.store(kb.load(k.inputs[0], dtype, kb.add(base, c)), a, dtype, c)
        kb.b.store(e.c(1.0), det)
        with kb.loop(0, n, name="col") as col:
            _choose_pivot(kb, e, a, n, col, pivot_row, best)
            p = kb.b.load(pivot_row)
            with kb.if_then(kb.b.icmp_signed("!=", p, col)):
                with kb.loop(0, n, name="j") as j:
                    top, other = kb.add(kb.mul(col, n), j), kb.add(kb.mul(p, n), j)
                    v_top, v_other = kb.load(a, dtype, top), kb.load(a, dtype, other)
                    kb.store(v_other, a, dtype, top)
                    kb.store(v_top, a, dtype, other)
                kb.b.store(e.neg(kb.b.load(det)), det)
            pivot = kb.load(a, dtype, kb.add(kb.mul(col, n), col))
            kb.b.store(e.mul(kb.b.load(det), pivot), det)
            nonzero = kb.b.fcmp_unordered("!=", pivot, e.c(0.0))
            with kb.if_then(nonzero):
                with kb.loop(kb.add(col, 1), n, name="i") as i:
                    factor = e.div(kb.load(a, dtype, kb.add(kb.mul(i, n), col)), pivot)
                    with kb.loop(kb.add(col, 1), n, name="j") as j:
                        at = kb.add(kb.mul(i, n), j)
                        update = e.sub(kb.load(a, dtype, at), e.mul(factor, kb.load(a, dtype, kb.add(kb.mul(col, n), j))))
                        kb.store(update, a, dtype, at)
        kb.store(kb.b.load(det), k.outputs[0], dtype, m)


def _choose_pivot(kb, e: Emit, a, n: int, col, pivot_row, best) -> None:
    """pivot_row = the row i >= col with the largest |a[i, col]| (the first one on ties)."""
    kb.b.store(col, pivot_row)
    kb.b.store(e.abs(kb.load(a, e.dtype, kb.add(kb.mul(col, n), col))), best)
    with kb.loop(kb.add(col, 1), n, name="r") as r:
        v = e.abs(kb.load(a, e.dtype, kb.add(kb.mul(r, n), col)))
        better = e.gt(v, kb.b.load(best))
        kb.b.store(e.select(better, v, kb.b.load(best)), best)
        kb.b.store(kb.b.select(better, r, kb.b.load(pivot_row)), pivot_row)


CPU.register("Det", lower=lower_det)
