"""2-D max and average pooling (NCHW) with exact borders.

Every output row is computed in place: the row is set to the identity, then
each input row its windows touch adds one pass over it. Which kernel rows are
valid depends on the output row and is computed at run time (a few integer
ops per row). Which kernel columns are valid is decided at compile time: the
output columns are cut into segments whose clipped windows have the same shape
(the border columns, and one interior segment), so the inner loop over output
columns has no bounds checks and its taps are unrolled constants; LLVM
vectorises it when the stride is 1. Average pooling then scales each segment by
1 / (valid or pad-including count), the count being rows x columns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.backend.cpu.elementwise import emit_loop_nest
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.reduce import combine
from hobbit.backend.cpu.reduce import row_width
from hobbit.emit.scalar import Emit
from hobbit.ops.reduce import identity


@dataclass(frozen=True)
class Segment:
    """Output columns [start, stop) whose windows use kernel taps [lo, hi); `padded`
    counts the taps that fall inside the input or its explicit padding."""

    start: int
    stop: int
    lo: int
    hi: int
    padded: int


def window_taps(o: int, size: int, k: int, stride: int, dilation: int, pad_begin: int,
                pad_end: int) -> tuple[int, int, int]:
    """(lo, hi, padded) for output position o: taps [lo, hi) read the input; `padded`
    taps lie before size + pad_end (the ceil_mode overhang is never counted)."""
    start = o * stride - pad_begin
    positions = [start + i * dilation for i in range(k)]
    valid = [i for i, p in enumerate(positions) if 0 <= p < size]
    padded = sum(1 for p in positions if p < size + pad_end)
    if not valid:
        return 0, 0, padded
    return valid[0], valid[-1] + 1, padded


def column_segments(out_size: int, size: int, k: int, stride: int, dilation: int, pad_begin: int,
                    pad_end: int) -> list[Segment]:
    segments: list[Segment] = []
    for o in range(out_size):
        lo, hi, padded = window_taps(o, size, k, stride, dilation, pad_begin, pad_end)
        last = segments[-1] if segments else None
        if last is not None and (last.lo, last.hi, last.padded) == (lo, hi, padded):
            segments[-1] = Segment(last.start, o + 1, lo, hi, padded)
        else:
            segments.append(Segment(o, o + 1, lo, hi, padded))
    return segments


def _smax(kb: KernelBuilder, a: ir.Value, b: int) -> ir.Value:
    bv = kb.i64(b)
    return kb.b.select(kb.b.icmp_signed(">", a, bv), a, bv)


def _smin(kb: KernelBuilder, a: ir.Value, b: int) -> ir.Value:
    bv = kb.i64(b)
    return kb.b.select(kb.b.icmp_signed("<", a, bv), a, bv)


def _taps_below(kb: KernelBuilder, limit: ir.Value, k: int, dilation: int) -> ir.Value:
    """How many of the taps 0, d, 2d, ... (k of them) are < limit: min(k, ceil(max(0, limit) / d))."""
    n = _smax(kb, limit, 0)
    if dilation > 1:
        n = kb.b.udiv(kb.b.add(n, kb.i64(dilation - 1)), kb.i64(dilation))
    return _smin(kb, n, k)


def lower_pool(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    x, y = k.inputs[0], k.outputs[0]
    dtype = np.dtype(node.inputs[0].dtype)
    n, c, h, w = node.inputs[0].shape
    _, _, oh_n, ow_n = node.outputs[0].shape
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    average = node.op == "AveragePool"
    how = "add" if average else "max"
    segments = column_segments(ow_n, w, kw, sw, dw, pl, pr)
    e = Emit(kb, dtype, 1)
    row_vec = row_width(k.width(dtype), ow_n)

    lo, hi = k.threads.split(n * c)
    with kb.loop(lo, hi, name="plane") as p:
        x_plane = kb.mul(p, h * w)
        y_plane = kb.mul(p, oh_n * ow_n)
        with kb.loop(0, oh_n, name="oh") as oh:
            start = kb.add(kb.mul(oh, sh), -pt)
            neg_start = kb.b.sub(kb.i64(0), start)
            lo = _taps_below(kb, neg_start, kh, dh)  # taps before row 0
            hi = _taps_below(kb, kb.add(neg_start, h), kh, dh)  # taps before row h
            y_row = kb.add(y_plane, kb.mul(oh, ow_n))

            def init(index, width, mask):
                kb.vstore(kb.const(dtype, identity(dtype, how), width), y, dtype, kb.add(y_row, index[0]), mask)

            emit_loop_nest(kb, (ow_n,), row_vec, init)
            with kb.loop(lo, hi, name="kh") as i:
                x_row = kb.add(x_plane, kb.mul(kb.add(start, kb.mul(i, dh)), w))
                for seg in segments:
                    if seg.lo >= seg.hi:
                        continue
                    with kb.loop(seg.start, seg.stop, name="ow") as o:
                        at = kb.add(y_row, o)
                        base = kb.add(x_row, kb.add(kb.mul(o, sw), -pl))
                        v = kb.load(y, dtype, at)
                        for t in range(seg.lo, seg.hi):
                            v = combine(e, how, v, kb.load(x, dtype, kb.add(base, t * dw)))
                        kb.store(v, y, dtype, at)
            if average:
                if a["count_include_pad"]:
                    rows = _taps_below(kb, kb.add(neg_start, h + pb), kh, dh)
                else:
                    rows = _smax(kb, kb.b.sub(hi, lo), 0)
                _scale_row(kb, e, y, y_row, rows, segments, bool(a["count_include_pad"]))


def _scale_row(kb: KernelBuilder, e: Emit, y: ir.Value, y_row: ir.Value, rows: ir.Value,
               segments: list[Segment], include_pad: bool) -> None:
    """Divide each segment of an output row by its window count (rows x columns)."""
    rows_f = kb.b.sitofp(rows, llvm_type(e.dtype))
    for seg in segments:
        cols = seg.padded if include_pad else seg.hi - seg.lo
        scale = e.div(e.c(1.0), e.mul(rows_f, e.c(float(cols))))
        with kb.loop(seg.start, seg.stop, name="ow") as o:
            at = kb.add(y_row, o)
            kb.store(e.mul(kb.load(y, e.dtype, at), scale), y, e.dtype, at)


CPU.register("MaxPool", lower=lower_pool)
CPU.register("AveragePool", lower=lower_pool)
