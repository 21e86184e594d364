"""A 2-D convolution's spatial lengths in this inference, for a conv whose input height
and width (and so its output's) are run-time dims (hobbit.graph.extents), and the index
arithmetic on them that every conv variant shares.

Tensors keep their bound layout: a plane is H x W (OH x OW) at the bound, and only its
first `h` rows and `w` columns hold data. Every conv variant reads an input position at
or past those lengths as padding (zero), as it reads one past the static H or W, and
computes the output rows [0, oh), each up to column ow; nothing past the last valid
element of a plane is read or written.

Where only the height is run-time (or the output has one row: a 1-D conv), a GEMM over
flattened positions computes oh*OW of them, all data. Where the width is run-time, a GEMM
over the bound's positions would also compute the columns [ow, OW) of every row (at a 320
bound, 43% more work at 224). So (hobbit.backend.cpu.conv): an im2col conv lays its columns
out packed (a row stride of ow), its GEMM writes its rows packed into the start of their
place in the output, and `unpack_rows` moves each row to its place at the bound's row
stride, applying the bias and fused epilogue as it goes; a 1x1 conv reads its input in
place, one GEMM over the rows where they are nearly the bound's width, else a GEMM per row
over its whole vectors with the rows' last columns packed into one GEMM (or a GEMM per row
over its whole width where the tails are too short to pay; or all packed, with many
channels); the direct and depthwise convs compute row by row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.scalar import Emit
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


def valid_range_at(kb: KernelBuilder, out_len: Index, in_len: Index, stride: int, offset: int
                   ) -> tuple[Index, Index]:
    """Output positions o in [lo, hi) below `out_len` whose input o*stride + offset lies in
    [0, in_len); static where both lengths are."""
    lo = kb.imin(-(offset // stride) if offset < 0 else 0, out_len)
    last = kb.add(in_len, -1 - offset)  # the input's last column, relative to the offset
    hi_raw = kb.add(floor_div(kb, last, stride), 1)  # at most 0 where no input column is reached
    return lo, imax(kb, lo, kb.imin(out_len, hi_raw))


# unpack_rows' epilogue: (e, vector, row, column, mask) -> the vector to store at that row and column.
RowEpilogue = Callable[[Emit, ir.Value, ir.Value, Index, ir.Value | None], ir.Value]


def unpack_rows(kb: KernelBuilder, ptr: ir.Value, dtype, base: Index, rows: Index, width: Index,
                row_stride: int, lanes: int, epilogue: RowEpilogue, offset: Index = 0) -> None:
    """Rows packed at ptr[base + r*width] (r < rows) moved to ptr[base + offset + r*row_stride]
    (width + offset <= row_stride), each vector through `epilogue` (its column counted from
    the row's start, offset excluded). In place: the last row first and each row's last vector
    first, so no vector is overwritten before it is read."""
    b = kb.b
    e = Emit(kb, dtype, lanes)
    width = kb.idx(width)
    whole = b.udiv(width, kb.i64(lanes))
    tail = b.sub(width, b.mul(whole, kb.i64(lanes)))
    with kb.loop(0, rows, name="unpack") as i:
        r = b.sub(b.sub(kb.idx(rows), kb.i64(1)), i)
        src, dst = kb.add(base, b.mul(r, width)), kb.add(kb.add(base, offset), kb.mul(r, row_stride))

        def move(j: Index, mask: ir.Value | None) -> None:
            v = kb.vload(ptr, dtype, kb.add(src, j), lanes, mask)
            kb.vstore(epilogue(e, v, r, j, mask), ptr, dtype, kb.add(dst, j), mask)

        with kb.if_then(b.icmp_unsigned("!=", tail, kb.i64(0))):
            move(b.mul(whole, kb.i64(lanes)), kb.runtime_prefix_mask(lanes, tail))
        with kb.loop(0, whole, name="unpack.v") as t:
            move(b.mul(b.sub(b.sub(whole, kb.i64(1)), t), kb.i64(lanes)), None)
