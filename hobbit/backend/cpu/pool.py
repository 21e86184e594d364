"""2-D max and average pooling (NCHW) with exact borders.

At stride 1 every output row is computed in place: the row is set to the identity, then
each input row its windows touch adds one pass over it. Which kernel rows are
valid depends on the output row and is computed at run time (a few integer
ops per row). Which kernel columns are valid is decided at compile time: the
output columns are cut into segments whose clipped windows have the same shape
(the border columns, and one interior segment), so the inner loop over output
columns has no bounds checks and its taps are unrolled constants; LLVM
vectorises it. Average pooling then scales each segment by
1 / (valid or pad-including count), the count being rows x columns.

At a larger stride LLVM leaves that loop scalar, so the columns are cut as for a run-time
width (`_VectorColumns`, below), with constant bounds: each output vector is combined in
registers over its window, a strided tap being every s-th lane of one masked load.
Measured at one thread (SqueezeNet's 3x3 stride-2 pools): uint8 0.167 -> 0.053 ms for the
model's three, float32 0.238 -> 0.152 ms.

With run-time dims (hobbit.graph.extents: a run-time batch, height or width), the planes
and the output rows are walked up to their lengths in this inference, the valid kernel rows
clipped at the run-time height. A run-time width moves the right border, so the columns are
cut at run time (`_VectorColumns`): the left border (windows that start in the left
padding), one interior range of whole windows, and the right border (windows that reach past
the run-time width: the taps at or after it are skipped, or counted as padding up to width +
pad_end for count_include_pad, exactly as at a static size). There each output element is
combined in registers over its whole window and stored once: the interior in vectors with
constant taps and a masked last vector (a strided tap is every s-th lane of a masked
load that serves the taps within s of each other), each border column finding its valid
taps at run time. The elements are combined in the segment kernel's order (rows, then
taps), so both ways give the same bits, NaNs included."""

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
    row_vec = row_width(k.width(dtype), ow_n)
    vectors = None
    if isinstance(w, int) and isinstance(ow, int) and sw == 1:
        segments = column_segments(ow_n, w, kw, sw, dw, pl, pr)
    else:
        vectors = _VectorColumns(kb, dtype, how, w, ow, kw, sw, dw, pl, pr, include_pad, row_vec)
    e = Emit(kb, dtype, 1)

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

            def rows() -> ir.Value:
                """The window's row count: its valid rows, or those before h + pad_end."""
                if include_pad:
                    return _taps_below(kb, kb.add(neg_start, kb.add(h, pb)), kh, dh)
                return _smax(kb, kb.b.sub(hi, lo), 0)

            if vectors is not None:
                def x_row(i: ir.Value) -> ir.Value:
                    return kb.add(x_plane, kb.mul(kb.add(start, kb.mul(i, dh)), w_n))
                vectors.row(x, y, x_row, lo, hi, y_row, rows() if average else None)
            else:
                _static_row(kb, e, how, x, y, x_plane, w_n, y_row, start, lo, hi, dh, ow_n, row_vec, segments,
                            sw, dw, pl, rows if average else None, include_pad)


def _static_row(kb: KernelBuilder, e: Emit, how: str, x: ir.Value, y: ir.Value, x_plane, w_n: int, y_row, start,
                lo: ir.Value, hi: ir.Value, dh: int, ow_n: int, row_vec: int, segments: list[Segment], sw: int,
                dw: int, pl: int, rows, include_pad: bool) -> None:
    """One output row of a static width: set to the identity, each input row of the window
    combined into it by segments (taps constants), then scaled for an average (`rows`: a
    function that emits the row count; None for a max)."""
    dtype = e.dtype

    def init(index, width, mask):
        kb.vstore(kb.const(dtype, identity(dtype, how), width), y, dtype, kb.add(y_row, index[0]), mask)

    emit_loop_nest(kb, (ow_n,), row_vec, init)
    with kb.loop(lo, hi, name="kh") as i:
        x_row = kb.add(x_plane, kb.mul(kb.add(start, kb.mul(i, dh)), w_n))
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
    if rows is not None:
        _scale_row(kb, e, y, y_row, rows(), segments, include_pad)


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


class _VectorColumns:
    """One output row of a run-time width w (or output width ow), or of a strided pool. Its
    columns are cut at run time (constants where w and ow are): [0, left) windows that start
    in the left padding, [left, right) whole windows inside the input, [right, ow) windows
    that reach past w. Each output element is combined in registers over its window's rows
    and columns and stored once (scaled, for an average):
    the interior in vectors of `width` columns (their taps constants, the last vector
    masked; at a stride s a tap's columns are every s-th lane of one masked load), the border
    columns one by one, finding their valid taps at run time. The window's elements are
    combined in the order of the segment kernel (rows, then taps), so the results are its."""

    def __init__(self, kb: KernelBuilder, dtype: np.dtype, how: str, w: int | ir.Value, ow: int | ir.Value,
                 kw: int, sw: int, dw: int, pl: int, pr: int, include_pad: bool, width: int):
        b = kb.b
        self.kb, self.dtype, self.how, self.include_pad, self.width = kb, dtype, how, include_pad, width
        self.w, self.ow, self.kw, self.sw, self.dw, self.pl, self.pr = w, ow, kw, sw, dw, pl, pr
        # The first column whose window starts at or after input column 0.
        self.left = kb.idx(kb.imin(-(-pl // sw), ow) if pl else 0)
        # Columns o whose last tap o*sw - pl + (kw-1)*dw is < w: o <= (w - 1 + pl - (kw-1)*dw) / sw.
        last = kb.idx(kb.add(w, pl - 1 - (kw - 1) * dw))
        whole = b.select(b.icmp_signed("<", last, kb.i64(0)), kb.i64(0), kb.add(kb.udiv(last, sw), 1))
        self.right = kb.idx(_imax(kb, self.left, kb.imin(whole, ow)))
        count = b.sub(self.right, self.left)
        self.vectors_end = b.add(self.left, b.mul(b.udiv(count, kb.i64(width)), kb.i64(width)))

    def row(self, x: ir.Value, y: ir.Value, x_row, lo: ir.Value, hi: ir.Value, y_row: ir.Value,
            rows: ir.Value | None) -> None:
        """Output row y_row from the input rows x_row(i), i in [lo, hi); `rows` is the average's
        row count (None for a max)."""
        kb, b, width = self.kb, self.kb.b, self.width
        e = Emit(kb, self.dtype, 1)
        rows_f = None if rows is None else b.sitofp(rows, llvm_type(self.dtype))
        self._border(x, y, x_row, lo, hi, y_row, rows_f, kb.i64(0), self.left)
        if width == 1:  # an output one column wide at the bound: no vectors
            self._border(x, y, x_row, lo, hi, y_row, rows_f, self.left, self.right)
        else:
            scale = None if rows_f is None else kb.splat(e.div(e.c(1.0), e.mul(rows_f, e.c(float(self.kw)))), width)
            with kb.loop(self.left, self.vectors_end, width, name="ow") as o:
                self._vector(x, y, x_row, lo, hi, y_row, scale, o, None)
            rest = b.sub(self.right, self.vectors_end)
            with kb.if_then(b.icmp_signed(">", rest, kb.i64(0))):
                self._vector(x, y, x_row, lo, hi, y_row, scale, self.vectors_end, rest)
        self._border(x, y, x_row, lo, hi, y_row, rows_f, self.right, self.ow)

    def _tap_columns(self, x: ir.Value, base: ir.Value, lanes: ir.Value | None) -> list[ir.Value]:
        """Each tap t's columns x[base + t*dw + j*sw], j < width (lanes: only the first `lanes`,
        the rest zero). At a stride sw > 1 one masked load serves every tap whose offset lies
        within sw of its first (each is every sw-th lane from its offset: 3x3 at stride 2 takes
        two loads), the load covering exactly the elements those lanes read."""
        kb, sw, width, dtype = self.kb, self.sw, self.width, self.dtype
        offsets = [t * self.dw for t in range(self.kw)]
        if sw == 1:
            mask = None if lanes is None else kb.runtime_prefix_mask(width, lanes)
            return [kb.vload(x, dtype, kb.add(base, offset), width, mask) for offset in offsets]
        out: list[ir.Value] = []
        while len(out) < len(offsets):
            first = offsets[len(out)]
            group = [offset - first for offset in offsets[len(out):] if offset < first + sw]
            if lanes is None:
                mask = kb.prefix_mask(width * sw, group[-1] + (width - 1) * sw + 1)
            else:
                span = kb.b.add(kb.b.mul(kb.i64(sw), lanes), kb.i64(group[-1] + 1 - sw))
                mask = kb.runtime_prefix_mask(width * sw, span)
            wide = kb.vload(x, dtype, kb.add(base, first), width * sw, mask)
            for shift in group:
                picks = ir.Constant(ir.VectorType(ir.IntType(32), width), [shift + j * sw for j in range(width)])
                out.append(kb.b.shuffle_vector(wide, ir.Constant(wide.type, None), picks))
        return out

    def _vector(self, x, y, x_row, lo, hi, y_row, scale: ir.Value | None, o: ir.Value,
                lanes: ir.Value | None) -> None:
        """Output columns [o, o + width) (the first `lanes` of them), all whole windows;
        `scale`: the average's 1 / count, splat."""
        kb, b, width = self.kb, self.kb.b, self.width
        e = Emit(kb, self.dtype, width)
        acc = kb.alloca(ir.VectorType(llvm_type(self.dtype), width))
        b.store(kb.const(self.dtype, identity(self.dtype, self.how), width), acc)
        with kb.loop(lo, hi, name="kh") as i:
            base = kb.add(x_row(i), kb.add(kb.mul(o, self.sw), -self.pl))
            v = b.load(acc)
            for columns in self._tap_columns(x, base, lanes):
                v = combine(e, self.how, v, columns)
            b.store(v, acc)
        v = b.load(acc)
        if scale is not None:
            v = e.mul(v, scale)
        kb.vstore(v, y, self.dtype, kb.add(y_row, o), None if lanes is None else kb.runtime_prefix_mask(width, lanes))

    def _border(self, x, y, x_row, lo, hi, y_row, rows_f, first: ir.Value, stop: int | ir.Value) -> None:
        """Output columns [first, stop) one by one, each window's valid taps found at run time."""
        kb, b = self.kb, self.kb.b
        e = Emit(kb, self.dtype, 1)
        with kb.loop(first, stop, name="ow_edge") as o:
            start = kb.add(kb.mul(o, self.sw), -self.pl)
            neg_start = b.sub(kb.i64(0), start)
            t_lo = _taps_below(kb, neg_start, self.kw, self.dw)
            t_hi = _taps_below(kb, kb.add(neg_start, self.w), self.kw, self.dw)
            acc = kb.alloca(llvm_type(self.dtype))
            b.store(kb.const(self.dtype, identity(self.dtype, self.how)), acc)
            with kb.loop(lo, hi, name="kh") as i:
                with kb.loop(t_lo, t_hi, name="kw") as t:
                    value = kb.load(x, self.dtype, kb.add(x_row(i), kb.add(start, kb.mul(t, self.dw))))
                    b.store(combine(e, self.how, b.load(acc), value), acc)
            v = b.load(acc)
            if rows_f is not None:
                if self.include_pad:  # taps before w + pad_end (never the ceil_mode overhang)
                    cols = _taps_below(kb, kb.add(neg_start, kb.add(self.w, self.pr)), self.kw, self.dw)
                else:
                    cols = _smax(kb, b.sub(t_hi, t_lo), 0)
                v = e.mul(v, e.div(e.c(1.0), e.mul(rows_f, b.sitofp(cols, llvm_type(self.dtype)))))
            kb.store(v, y, self.dtype, kb.add(y_row, o))


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
