"""2-D max and average pooling (NCHW) with exact borders.

Every output row is computed in place: the row is set to the identity, then
each input row its windows touch adds one pass over it. Which kernel rows are
valid depends on the output row and is computed at run time (a few integer
ops per row). Which kernel columns are valid is decided at compile time: the
output columns are cut into segments whose clipped windows have the same shape
(the border columns, and one interior segment), so the inner loop over output
columns has no bounds checks and its taps are unrolled constants; LLVM
vectorises it when the stride is 1. Average pooling then scales each segment by
1 / (valid or pad-including count), the count being rows x columns.

With run-time dims (hobbit.graph.extents: a run-time batch, height or width), the planes
and the output rows are walked up to their lengths in this inference, the valid kernel rows
clipped at the run-time height. A run-time width moves the right border, so the columns
are cut at run time instead (`_DynamicColumns`): the left border (windows that start in
the left padding), one interior range of whole windows (its taps unrolled constants, as
above) and the right border (windows that reach past the run-time width: the taps at or
after it are skipped, or counted as padding up to width + pad_end for count_include_pad,
exactly as at a static size); each border column finds its valid taps at run time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.graph.ir import Node
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
    _, c, h_n, w_n = node.inputs[0].shape
    _, _, oh_n, ow_n = node.outputs[0].shape
    # This inference's lengths (the bound's shapes give the strides): ints where static.
    n, _, h, w = k.extents(node.inputs[0])
    _, _, oh, ow = k.extents(node.outputs[0])
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    average = node.op == "AveragePool"
    how = "add" if average else "max"
    include_pad = bool(a["count_include_pad"]) if average else False
    if isinstance(w, int) and isinstance(ow, int):
        columns = _StaticColumns(column_segments(ow_n, w, kw, sw, dw, pl, pr), sw, dw, pl)
    else:
        columns = _DynamicColumns(kb, w, ow, kw, sw, dw, pl, pr)
    e = Emit(kb, dtype, 1)
    row_vec = row_width(k.width(dtype), ow_n)

    lo, hi = k.threads.split(kb.mul(n, c))
    with kb.loop(lo, hi, name="plane") as p:
        x_plane = kb.mul(p, h_n * w_n)
        y_plane = kb.mul(p, oh_n * ow_n)
        with kb.loop(0, oh, name="oh") as oh_i:
            start = kb.add(kb.mul(oh_i, sh), -pt)
            neg_start = kb.b.sub(kb.i64(0), start)
            lo = _taps_below(kb, neg_start, kh, dh)  # taps before row 0
            hi = _taps_below(kb, kb.add(neg_start, h), kh, dh)  # taps before row h
            y_row = kb.add(y_plane, kb.mul(oh_i, ow_n))

            def init(index, width, mask):
                kb.vstore(kb.const(dtype, identity(dtype, how), width), y, dtype, kb.add(y_row, index[0]), mask)

            emit_loop_nest(kb, (ow_n,), row_vec, init, lengths=[ow])
            with kb.loop(lo, hi, name="kh") as i:
                x_row = kb.add(x_plane, kb.mul(kb.add(start, kb.mul(i, dh)), w_n))
                columns.accumulate(kb, e, how, x, y, x_row, y_row)
            if average:
                if include_pad:
                    rows = _taps_below(kb, kb.add(neg_start, kb.add(h, pb)), kh, dh)
                else:
                    rows = _smax(kb, kb.b.sub(hi, lo), 0)
                columns.scale(kb, e, y, y_row, rows, include_pad)


class _StaticColumns:
    """The output columns of a static width: segments whose windows have one shape."""

    def __init__(self, segments: list[Segment], sw: int, dw: int, pl: int):
        self.segments, self.sw, self.dw, self.pl = segments, sw, dw, pl

    def accumulate(self, kb: KernelBuilder, e: Emit, how: str, x: ir.Value, y: ir.Value, x_row: ir.Value,
                   y_row: ir.Value) -> None:
        """Combine one input row (x_row: the offset of its column 0) into the output row."""
        sw, dw, pl = self.sw, self.dw, self.pl
        for seg in self.segments:
            if seg.lo >= seg.hi:
                continue
            with kb.loop(seg.start, seg.stop, name="ow") as o:
                at = kb.add(y_row, o)
                base = kb.add(x_row, kb.add(kb.mul(o, sw), -pl))
                v = kb.load(y, e.dtype, at)
                for t in range(seg.lo, seg.hi):
                    v = combine(e, how, v, kb.load(x, e.dtype, kb.add(base, t * dw)))
                kb.store(v, y, e.dtype, at)

    def scale(self, kb: KernelBuilder, e: Emit, y: ir.Value, y_row: ir.Value, rows: ir.Value,
              include_pad: bool) -> None:
        _scale_row(kb, e, y, y_row, rows, self.segments, include_pad)


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


class _DynamicColumns:
    """The output columns of a run-time width w (or output width ow), cut at run time:
    [0, left) windows that start in the left padding, [left, right) whole windows inside
    the input, [right, ow) windows that reach past w. The borders are a few columns each,
    which find their valid taps at run time; the interior's taps are constants."""

    def __init__(self, kb: KernelBuilder, w: int | ir.Value, ow: int | ir.Value, kw: int, sw: int, dw: int,
                 pl: int, pr: int):
        b = kb.b
        self.w, self.ow, self.kw, self.sw, self.dw, self.pl, self.pr = w, ow, kw, sw, dw, pl, pr
        # The first column whose window starts at or after input column 0.
        self.left = kb.imin(-(-pl // sw), ow) if pl else 0
        # Columns o whose last tap o*sw - pl + (kw-1)*dw is < w: o <= (w - 1 + pl - (kw-1)*dw) / sw.
        last = kb.add(w, pl - 1 - (kw - 1) * dw)
        last_v = kb.idx(last)
        whole = b.select(b.icmp_signed("<", last_v, kb.i64(0)), kb.i64(0), kb.add(kb.udiv(last_v, sw), 1))
        self.right = _imax(kb, self.left, kb.imin(whole, ow))

    def _taps(self, kb: KernelBuilder, o: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(start, lo, hi) of column o's window: taps [lo, hi) lie in [0, w)."""
        start = kb.idx(kb.add(kb.mul(o, self.sw), -self.pl))
        neg_start = kb.b.sub(kb.i64(0), start)
        lo = _taps_below(kb, neg_start, self.kw, self.dw)
        hi = _taps_below(kb, kb.add(neg_start, self.w), self.kw, self.dw)
        return start, lo, hi

    def accumulate(self, kb: KernelBuilder, e: Emit, how: str, x: ir.Value, y: ir.Value, x_row: ir.Value,
                   y_row: ir.Value) -> None:
        """Combine one input row (x_row: the offset of its column 0) into the output row."""
        def border(first: int | ir.Value, stop: int | ir.Value) -> None:
            if isinstance(stop, int) and stop == first:
                return
            with kb.loop(first, stop, name="ow_edge") as o:
                start, lo, hi = self._taps(kb, o)
                at = kb.add(y_row, o)
                with kb.loop(lo, hi, name="kw") as t:
                    v = combine(e, how, kb.load(y, e.dtype, at),
                                kb.load(x, e.dtype, kb.add(x_row, kb.add(start, kb.mul(t, self.dw)))))
                    kb.store(v, y, e.dtype, at)

        border(0, self.left)
        with kb.loop(self.left, self.right, name="ow") as o:
            at = kb.add(y_row, o)
            base = kb.add(x_row, kb.add(kb.mul(o, self.sw), -self.pl))
            v = kb.load(y, e.dtype, at)
            for t in range(self.kw):
                v = combine(e, how, v, kb.load(x, e.dtype, kb.add(base, t * self.dw)))
            kb.store(v, y, e.dtype, at)
        border(self.right, self.ow)

    def scale(self, kb: KernelBuilder, e: Emit, y: ir.Value, y_row: ir.Value, rows: ir.Value,
              include_pad: bool) -> None:
        """Divide each column of an output row by its window count (rows x columns), the
        columns counted as at a static size (column_segments)."""
        rows_f = kb.b.sitofp(rows, llvm_type(e.dtype))

        def apply(o: ir.Value, scale: ir.Value) -> None:
            at = kb.add(y_row, o)
            kb.store(e.mul(kb.load(y, e.dtype, at), scale), y, e.dtype, at)

        def border(first: int | ir.Value, stop: int | ir.Value) -> None:
            if isinstance(stop, int) and stop == first:
                return
            with kb.loop(first, stop, name="ow_edge") as o:
                start, lo, hi = self._taps(kb, o)
                if include_pad:  # taps before w + pad_end (never the ceil_mode overhang)
                    cols = _taps_below(kb, kb.b.sub(kb.idx(kb.add(self.w, self.pr)), start), self.kw, self.dw)
                else:
                    cols = _smax(kb, kb.b.sub(hi, lo), 0)
                cols_f = kb.b.sitofp(cols, llvm_type(e.dtype))
                apply(o, e.div(e.c(1.0), e.mul(rows_f, cols_f)))

        border(0, self.left)
        whole = e.div(e.c(1.0), e.mul(rows_f, e.c(float(self.kw))))
        with kb.loop(self.left, self.right, name="ow") as o:
            apply(o, whole)
        border(self.right, self.ow)


def _imax(kb: KernelBuilder, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    a, b = kb.idx(a), kb.idx(b)
    return kb.b.select(kb.b.icmp_signed(">", a, b), a, b)


def pool_dynamic(node: Node) -> str | None:
    """Run-time batch, height and width are followed (float32); a run-time channel dim is not
    (the planes are walked as batch x channels at the bound's channel stride)."""
    x, out = node.inputs[0], node.outputs[0]
    if np.dtype(x.dtype) != np.float32:
        return f"run-time dims are followed for float32 pools only, not {np.dtype(x.dtype).name}"
    x_ext = x.extents or (None,) * 4
    out_ext = out.extents or (None,) * 4
    if x_ext[1] is not None or out_ext[1] is not None:
        return "a run-time channel dim"
    if x_ext[0] != out_ext[0]:
        return "its output's run-time batch is not its input's"
    return None


CPU.register("MaxPool", lower=lower_pool, dynamic=pool_dynamic)
CPU.register("AveragePool", lower=lower_pool, dynamic=pool_dynamic)
