"""A 2-D convolution's spatial lengths in this inference, for a conv whose input height
and width (and so its output's) are run-time dims (hobbit.graph.extents), and the index
arithmetic on them that every conv variant shares.

Tensors keep their bound layout: a plane is H x W (OH x OW) at the bound, and only its
first `h` rows and `w` columns hold data. Every conv variant reads an input position at
or past those lengths as padding (zero), as it reads one past the static H or W, and
computes the output rows [0, oh). Along a row, a GEMM over flattened positions computes
(oh - 1)*OW + ow of them (`positions`): the columns [ow, OW) of the rows before the last
are garbage the next kernels never read as data, and nothing past the last valid element
of a plane is read or written."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.builder import KernelBuilder
from hobbit.graph.extents import is_dynamic
from hobbit.plan.conv import ConvShape

Index = int | ir.Value


@dataclass(frozen=True)
class Lengths:
    """Input rows and columns, output rows and columns holding data (ints where static)."""

    h: Index
    w: Index
    oh: Index
    ow: Index


def conv_lengths(k: KernelArgs) -> Lengths | None:
    """The node's spatial lengths in this inference, or None for a conv of static shapes."""
    if not is_dynamic(k.node):
        return None
    x, y = k.node.inputs[0], k.node.outputs[0]
    return Lengths(k.extent(x, 2), k.extent(x, 3), k.extent(y, 2), k.extent(y, 3))


def positions(kb: KernelBuilder, s: ConvShape, rows: Index, ow: Index) -> Index:
    """Flattened output positions of `rows` output rows (at the bound's row stride OW) up to
    column `ow` of the last one: rows*OW when the width is static."""
    if isinstance(ow, int) and ow == s.ow:
        return kb.mul(rows, s.ow)
    return kb.add(kb.mul(kb.add(rows, -1), s.ow), ow)


def imax(kb: KernelBuilder, a: Index, b: Index) -> Index:
    """max(a, b), signed."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    a, b = kb.idx(a), kb.idx(b)
    return kb.b.select(kb.b.icmp_signed(">", a, b), a, b)


def floor_div(kb: KernelBuilder, a: Index, d: int) -> Index:
    """floor(a / d) for a signed a and a positive constant d."""
    if isinstance(a, int):
        return a // d
    if d == 1:
        return a
    b = kb.b
    q = b.sdiv(a, kb.i64(d))
    # sdiv rounds toward zero: one less where a is negative and not a multiple of d
    inexact = b.and_(b.icmp_signed("<", a, kb.i64(0)), b.icmp_signed("!=", b.mul(q, kb.i64(d)), a))
    return b.sub(q, b.zext(inexact, ir.IntType(64)))


def rows_in(kb: KernelBuilder, oh: Index, oh0: Index, count: int) -> Index:
    """How many of the output rows oh0 .. oh0 + count (a band of the bound's rows) lie
    below `oh`, 0 .. count: all of them where the output's height is static."""
    if isinstance(oh, int):
        return count
    return imax(kb, kb.imin(kb.b.sub(oh, kb.idx(oh0)), count), 0)


def valid_range_at(kb: KernelBuilder, out_len: Index, in_len: Index, stride: int, offset: int
                   ) -> tuple[Index, Index]:
    """Output positions o in [lo, hi) below `out_len` whose input o*stride + offset lies in
    [0, in_len); static where both lengths are."""
    lo = kb.imin(-(offset // stride) if offset < 0 else 0, out_len)
    last = kb.add(in_len, -1 - offset)  # the input's last column, relative to the offset
    hi_raw = kb.add(floor_div(kb, last, stride), 1)  # at most 0 where no input column is reached
    return lo, imax(kb, lo, kb.imin(out_len, hi_raw))
