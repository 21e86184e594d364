"""Running sums and products (CumSum, CumProd) along one axis.

The input is viewed as [outer, length, inner]. Each step along the axis combines
the previous output row with one input row, so the inner loop is a contiguous
row that LLVM vectorises; `exclusive` shifts the input by one step and
`reverse` walks the axis from its end. 16-bit floats combine in float32 and
round each output once, which equals their own sequential arithmetic."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.backend.cpu.index import share
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.reduce import combine
from hobbit.ops.reduce import identity
from hobbit.emit.scalar import Emit


def emit_cumulative(kb: KernelBuilder, x: ir.Value, dst: ir.Value, dtype: np.dtype, outer: int, length: int,
                    inner: int, how: str, exclusive: bool, reverse: bool, threads: Threads | None = None) -> None:
    """dst[o, l, i] = combine of x[o, m, i] over m before l (and l itself unless exclusive),
    where "before" runs from the end of the axis when `reverse`."""
    if outer * length * inner == 0:
        return
    e = Emit(kb, compute_dtype(dtype), 1)
    b = kb.b

    def row(o: ir.Value, step: int | ir.Value) -> int | ir.Value:
        """Start of row `step` (counted in walking order) of block `o`."""
        position = b.sub(kb.i64(length - 1), kb.idx(step)) if reverse else step
        return kb.mul(kb.add(kb.mul(o, length), position), inner)

    lo, hi = share(threads, outer, outer * length * inner)
    with kb.loop(lo, hi, name="o") as o:
        first = row(o, 0)
        with kb.loop(0, inner, name="i") as i:
            at = kb.add(first, i)
            if exclusive:
                start = narrow(b, kb.const(e.dtype, identity(e.dtype, how)), dtype)
            else:
                start = kb.load(x, dtype, at)
            kb.store(start, dst, dtype, at)
        with kb.loop(1, length, name="l") as step:
            here, previous = row(o, step), row(o, b.sub(step, kb.i64(1)))
            taken = previous if exclusive else here
            with kb.loop(0, inner, name="i") as i:
                acc = widen(b, kb.load(dst, dtype, kb.add(previous, i)), dtype)
                value = combine(e, how, acc, widen(b, kb.load(x, dtype, kb.add(taken, i)), dtype))
                kb.store(narrow(b, value, dtype), dst, dtype, kb.add(here, i))
