"""Depthwise convolution (groups == channels), vectorised along output rows.

Channels are shared among threads. An output row is computed in vectors along
`ow`, each tap a vector of inputs times a broadcast weight, with bias and the
fused epilogue applied before the store. The vector width shrinks for narrow
late-stage rows (7 or 14 wide) so fewer lanes are wasted.

Strides 1 and 2 read the input (or, in the fused expand-depthwise kernel, the
expanded rows) in place: a tap is one masked vector load (stride 1), or two and
an even-lane shuffle (stride 2), where the mask zeroes the lanes in the padding;
taps of border rows that fall in the padding are left out. Larger strides go
through a zero-padded copy of the plane (one per thread, reused by every
channel), each tap gathered from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I1, I32, I64, KernelBuilder
from hobbit.errors import CodegenError
from hobbit.backend.cpu.conv_dims import Lengths, floor_div, imax
from hobbit.plan.conv import ConvPlan, ConvShape
from hobbit.backend.cpu.copy import emit_deinterleaved_row_copy, emit_fill, emit_row_copy
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.scalar import Emit

def row_width(s: ConvShape, lanes: int) -> int:
    """Vector width for rows of s.ow outputs: the target's, or the power of two that covers ow."""
    width = lanes
    while width // 2 >= max(s.ow, 4):
        width //= 2
    return width


def lower_depthwise(k: KernelArgs, plan: ConvPlan, lengths: Lengths | None = None) -> None:
    """With run-time `lengths` (hobbit.backend.cpu.conv_dims): the taps read the input
    (strides 1 and 2 along W; conv_dynamic refuses the padded planes of the others)."""
    kb, node, s = k.kb, k.node, plan.shape
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    mult = s.oc // s.c
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, s.oh * s.ow))
    width = row_width(s, k.width(dtype))
    if not plan.plane:  # the taps read the input (hobbit.plan.conv.reads_input)
        c_lo, c_hi = k.threads.split(s.c)
        with kb.loop(0, s.n, name="n") as n, kb.loop(c_lo, c_hi, name="c") as c:
            plane_base = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            with kb.loop(0, mult, name="mult") as j:
                oc = kb.add(kb.mul(c, mult), j)
                d = DepthwiseRows(w, bias, k.outputs[0], epilogue, dtype, width)
                row_at = lambda ih, base=plane_base: kb.add(base, kb.mul(ih, s.w))  # noqa: E731
                if lengths is None:
                    emit_rows_direct(kb, s, d, x, row_at, n, oc)
                else:
                    emit_rows_runtime(kb, s, d, x, row_at, n, oc, lengths)
        return
    if lengths is not None:
        raise CodegenError(f"depthwise conv {node.name!r}: run-time dims with a padded plane (conv_dynamic refuses it)")
    pad = k.thread_scratch(0, plan.plane, dtype)
    emit_fill(kb, pad, dtype, 0, plan.plane, kb.const(dtype, 0))  # channels only overwrite the inside
    c_lo, c_hi = k.threads.split(s.c)
    lanes = k.width(dtype)
    with kb.loop(0, s.n, name="n") as n, kb.loop(c_lo, c_hi, name="c") as c:
        plane_base = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
        with kb.loop(0, s.h, name="ih") as ih:
            copy_row(kb, s, x, kb.add(plane_base, kb.mul(ih, s.w)), pad, kb.add(ih, s.pad[0]), dtype, lanes)
        with kb.loop(0, mult, name="mult") as j:
            oc = kb.add(kb.mul(c, mult), j)
            emit_depthwise_rows(kb, s, DepthwiseRows(w, bias, k.outputs[0], epilogue, dtype, width),
                                pad, n, oc, 0, s.oh)


ROWS_PER_STEP = 4  # interior output rows computed side by side: independent FMA chains


@dataclass
class _ChannelRows:
    """What both row emitters (static and run-time lengths) set up for one channel: an Emit,
    its taps and bias as vectors, its output plane's offset, and the masked tap loads."""

    kb: KernelBuilder
    s: ConvShape
    d: DepthwiseRows
    src: ir.Value
    e: Emit
    taps: list
    b0: ir.Value
    out_base: ir.Value

    @property
    def offsets(self) -> list[int]:
        s = self.s
        return [kw * s.dilation[1] - s.pad[1] for kw in range(s.kw)]

    def tap(self, at, ow0, kw: int, masks: list, row_ok) -> ir.Value:
        """Tap kw's input vector for the outputs at column ow0 (stride 2: two loads, the even
        lanes kept), `masks[kw * stride + half]` its lanes inside the row, row_ok the row's."""
        kb, b, sw, width, dtype = self.kb, self.kb.b, self.s.stride[1], self.d.width, self.d.dtype
        at = kb.add(at, kb.add(kb.mul(ow0, sw), self.offsets[kw]))
        halves = []
        for half in range(sw):
            mask = masks[kw * sw + half]
            if row_ok is not True:  # a run-time row check: the whole vector on or off
                ok = kb.splat(row_ok, width)
                mask = ok if mask is None else b.and_(mask, ok)
            halves.append(kb.vload(self.src, dtype, kb.add(at, half * width), width, mask, inbounds=False))
        evens = ir.Constant(ir.VectorType(I32, width), [2 * i for i in range(width)])
        return halves[0] if sw == 1 else b.shuffle_vector(halves[0], halves[1], evens)


def _channel_rows(kb: KernelBuilder, s: ConvShape, d: DepthwiseRows, src: ir.Value, n, oc) -> _ChannelRows:
    width, dtype = d.width, d.dtype
    e = Emit(kb, dtype, width)
    taps = [kb.splat(kb.load(d.w, dtype, kb.add(kb.mul(oc, s.kh * s.kw), t)), width) for t in range(s.kh * s.kw)]
    b0 = kb.splat(kb.load(d.bias, dtype, oc), width) if d.bias is not None else e.c(0.0)
    out_base = kb.mul(kb.add(kb.mul(n, s.oc), oc), d.out_plane or s.oh * s.ow)
    return _ChannelRows(kb, s, d, src, e, taps, b0, out_base)


def emit_rows_direct(kb: KernelBuilder, s: ConvShape, d: DepthwiseRows, src: ir.Value, row_at, n, oc,
                     oh0: int | ir.Value = 0, count: int | None = None, store_row0: int | ir.Value | None = None) -> None:
    """Output rows oh0 .. oh0 + count (default: all) of channel `oc`, every tap a masked load
    from src at row_at(ih) (the offset of input row ih): lanes whose input column lies in
    the padding read zero, taps whose input row does are left out. Row oh is stored at row
    oh - oh0 + store_row0 of d.out (default: row oh). With a static oh0 the border rows are
    unrolled; otherwise a band that touches a border checks its rows at run time."""
    count = s.oh - oh0 if count is None else count
    store_row0 = oh0 if store_row0 is None else store_row0
    width, dtype = d.width, d.dtype
    r = _channel_rows(kb, s, d, src, n, oc)
    e, taps, b0, out_base, offsets, tap = r.e, r.taps, r.b0, r.out_base, r.offsets, r.tap
    (sh, dh), sw = (s.stride[0], s.dilation[0]), s.stride[1]
    b = kb.b

    def column_masks(ow0: int) -> list:
        """Per kw and per loaded vector (stride 2 loads two and keeps the even lanes): the
        lanes that feed an output and lie inside the row (None: all of them)."""
        masks = []
        for off in offsets:
            for half in range(sw):
                cols = [sw * ow0 + half * width + i + off for i in range(width)]
                lanes = [(half * width + i) // sw < s.ow - ow0 and 0 <= col < s.w for i, col in enumerate(cols)]
                masks.append(None if all(lanes) else ir.Constant(ir.VectorType(I1, width), [int(v) for v in lanes]))
        return masks

    # Vectors along the row: those with masked lanes are emitted on their own, the plain
    # ones between them as one loop.
    count_v = -(-s.ow // width)
    edge_masks = [column_masks(v * width) for v in range(count_v)]
    plain = [v for v in range(count_v) if all(m is None for m in edge_masks[v])]
    lo, hi = (plain[0], plain[-1] + 1) if plain else (0, 0)

    def rows(oh, step: int, row_ok) -> None:
        """Rows oh .. oh + step; row_ok(i, kh) says whether kernel row kh of row oh + i is
        inside the input: True, False (left out) or an i1 checked at run time."""
        def vector(ow0, masks, out_mask):
            accs = [b0] * step
            for kh in range(s.kh):
                live = [(i, ok) for i, ok in ((i, row_ok(i, kh)) for i in range(step)) if ok is not False]
                starts = {i: row_at(kb.add(kb.mul(kb.add(oh, i), sh), kh * dh - s.pad[0])) for i, _ in live}
                for kw in range(s.kw):
                    for i, ok in live:  # the rows side by side for each tap: independent chains
                        accs[i] = e.fma(taps[kh * s.kw + kw], tap(starts[i], ow0, kw, masks, ok), accs[i])
            for i in range(step):
                row = kb.add(kb.add(oh, i), kb.add(store_row0, kb.mul(oh0, -1)))
                p = kb.add(kb.mul(row, s.ow), ow0)
                kb.vstore(d.epilogue.apply(e, accs[i], [n, oc, p], out_mask), d.out, dtype, kb.add(out_base, p),
                          out_mask)

        def edge(v: int) -> None:
            vector(v * width, edge_masks[v], kb.prefix_mask(width, s.ow - v * width) if (v + 1) * width > s.ow else None)

        for v in range(lo):
            edge(v)
        if hi > lo:
            with kb.loop(lo * width, hi * width, width, name="ow") as ow0:
                vector(ow0, [None] * (s.kw * sw), None)
        for v in range(hi, count_v):
            edge(v)

    def grouped(first, total: int, row_ok) -> None:
        """Rows first .. first + total, ROWS_PER_STEP at a time."""
        step = min(ROWS_PER_STEP, max(1, total))
        steps, rest = divmod(total, step)
        if steps:
            with kb.loop(0, steps, name="r") as g:
                rows(kb.add(first, kb.mul(g, step)), step, row_ok)
        if rest:
            rows(kb.add(first, steps * step), rest, row_ok)

    def inside(oh: int, kh: int) -> bool:
        return 0 <= oh * sh + kh * dh - s.pad[0] < s.h

    top = min(s.oh, -(-s.pad[0] // sh))  # rows from here on have every kernel row inside...
    bottom = max(top, min(s.oh, (s.h - 1 - (s.kh - 1) * dh + s.pad[0]) // sh + 1))  # ...up to here
    if isinstance(oh0, int):
        first, last = max(oh0, min(top, oh0 + count)), min(oh0 + count, max(bottom, oh0))
        for oh in [*range(oh0, first), *range(last, oh0 + count)]:
            rows(oh, 1, lambda i, kh, oh=oh: inside(oh, kh))
        grouped(first, last - first, lambda i, kh: True)
        return

    interior = b.and_(b.icmp_signed(">=", kb.idx(oh0), kb.i64(top)),
                      b.icmp_signed("<=", kb.idx(kb.add(oh0, count)), kb.i64(bottom)))
    with b.if_else(interior) as (inner, border):
        with inner:
            grouped(oh0, count, lambda i, kh: True)
        with border:
            with kb.loop(0, count, name="r") as r:
                def ok(i: int, kh: int, r=r):
                    ih = kb.idx(kb.add(kb.mul(kb.add(oh0, r), sh), kh * dh - s.pad[0]))
                    return b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.i64(s.h)))
                rows(kb.add(oh0, r), 1, ok)


def emit_rows_runtime(kb: KernelBuilder, s: ConvShape, d: DepthwiseRows, src: ir.Value, row_at, n, oc,
                      lengths: Lengths) -> None:
    """emit_rows_direct for run-time lengths: output rows [0, lengths.oh) and columns
    [0, lengths.ow) of channel `oc`, input rows and columns at or past lengths.h and
    lengths.w read as padding. Interior rows (every kernel row inside) run ROWS_PER_STEP at a
    time, border rows one by one with their kernel rows checked at run time; along a row
    the vectors whose taps all lie inside run unmasked, the others with masks computed at
    run time (the left border's, and those past the interior up to the row's width)."""
    width, dtype = d.width, d.dtype
    b = kb.b
    r = _channel_rows(kb, s, d, src, n, oc)
    e, taps, b0, out_base, offsets, tap = r.e, r.taps, r.b0, r.out_base, r.offsets, r.tap
    (sh, dh), sw = (s.stride[0], s.dilation[0]), s.stride[1]
    h_len, w_len, oh_len, ow_len = (kb.idx(v) for v in (lengths.h, lengths.w, lengths.oh, lengths.ow))
    lane = ir.Constant(ir.VectorType(I64, width), list(range(width)))

    def runtime_masks(ow0: ir.Value) -> tuple[list, ir.Value]:
        """Per kw and per loaded vector (as column_masks in emit_rows_direct): the lanes that
        feed an output below the row's width and read a column inside it; and the store's."""
        masks = []
        outs_left = kb.splat(b.sub(ow_len, ow0), width)
        for off in offsets:
            for half in range(sw):
                feeds = ir.Constant(ir.VectorType(I64, width), [(half * width + i) // sw for i in range(width)])
                col = b.add(kb.splat(kb.idx(kb.add(kb.mul(ow0, sw), half * width + off)), width), lane)
                inside = b.and_(b.icmp_signed(">=", col, ir.Constant(col.type, [0] * width)),
                                b.icmp_signed("<", col, kb.splat(w_len, width)))
                masks.append(b.and_(inside, b.icmp_signed("<", feeds, outs_left)))
        return masks, b.icmp_signed("<", lane, outs_left)

    def vector(oh, step: int, row_ok, ow0, masks, out_mask):
        """Output vector at column ow0 of rows oh .. oh + step; row_ok(i, kh) as in emit_rows_direct."""
        accs = [b0] * step
        for kh in range(s.kh):
            live = [(i, ok) for i, ok in ((i, row_ok(i, kh)) for i in range(step)) if ok is not False]
            starts = {i: row_at(kb.add(kb.mul(kb.add(oh, i), sh), kh * dh - s.pad[0])) for i, _ in live}
            for kw in range(s.kw):
                for i, ok in live:
                    accs[i] = e.fma(taps[kh * s.kw + kw], tap(starts[i], ow0, kw, masks, ok), accs[i])
        for i in range(step):
            p = kb.add(kb.mul(kb.add(oh, i), s.ow), ow0)
            kb.vstore(d.epilogue.apply(e, accs[i], [n, oc, p], out_mask), d.out, dtype, kb.add(out_base, p), out_mask)

    # Vectors [0, first) have lanes left of the row; [first, plain_end) none outside it.
    first = -(-max(0, -min(offsets)) // (sw * width)) if offsets else 0
    vectors = b.udiv(b.add(ow_len, kb.i64(width - 1)), kb.i64(width))
    reach = sw * width - 1 + max(offsets)  # a vector's last column read, from sw*ow0
    whole_out = b.udiv(ow_len, kb.i64(width))  # vectors with every output lane below the width
    whole_in = kb.add(floor_div(kb, b.sub(w_len, kb.i64(reach + 1)), sw * width), 1)  # ...every column inside
    plain_end = imax(kb, kb.i64(first), kb.imin(whole_out, whole_in))

    def rows(oh, step: int, row_ok) -> None:
        def masked(v) -> None:
            ow0 = kb.mul(v, width)
            masks, out_mask = runtime_masks(ow0)
            vector(oh, step, row_ok, ow0, masks, out_mask)

        with kb.loop(0, kb.imin(vectors, first), name="owl") as v:
            masked(v)
        with kb.loop(kb.mul(first, width), kb.mul(plain_end, width), width, name="ow") as ow0:
            vector(oh, step, row_ok, ow0, [None] * (s.kw * sw), None)
        with kb.loop(plain_end, vectors, name="owr") as v:
            masked(v)

    def checked(oh: ir.Value) -> None:
        """Row oh, each kernel row checked against the input's height."""
        def ok(i: int, kh: int):
            ih = kb.idx(kb.add(kb.mul(oh, sh), kh * dh - s.pad[0]))
            return b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, h_len))
        rows(oh, 1, ok)

    top = kb.imin(kb.i64(-(-s.pad[0] // sh)), oh_len)  # rows from here on have every kernel row inside...
    bottom = kb.add(floor_div(kb, b.sub(h_len, kb.i64((s.kh - 1) * dh - s.pad[0] + 1)), sh), 1)  # ...below this
    bottom = imax(kb, top, kb.imin(bottom, oh_len))
    with kb.loop(0, top, name="rt") as oh:
        checked(oh)
    step = ROWS_PER_STEP
    groups = b.udiv(b.sub(bottom, top), kb.i64(step))
    with kb.loop(0, groups, name="r") as g:
        rows(b.add(top, b.mul(g, kb.i64(step))), step, lambda i, kh: True)
    with kb.loop(b.add(top, b.mul(groups, kb.i64(step))), bottom, name="ri") as oh:
        rows(oh, 1, lambda i, kh: True)
    with kb.loop(bottom, oh_len, name="rb") as oh:
        checked(oh)


@dataclass
class DepthwiseRows:
    """What computing rows of one output channel needs besides the plane."""

    w: ir.Value
    bias: ir.Value | None
    out: ir.Value
    epilogue: Epilogue  # or anything with Epilogue.apply's signature
    dtype: np.dtype
    width: int
    out_plane: int | None = None  # elements per channel of `out` (default OH*OW)


def emit_depthwise_rows(kb: KernelBuilder, s: ConvShape, d: DepthwiseRows, plane: ir.Value, n, oc,
                        oh0: int | ir.Value, count: int) -> None:
    """Output rows oh0 .. oh0 + count of channel `oc` from a padded plane whose first row is
    where output row oh0 starts reading (the whole plane for oh0 = 0 and count = OH), for
    strides of 3 and more."""
    _, wp = s.padded_hw
    width, dtype = d.width, d.dtype
    e = Emit(kb, dtype, width)
    taps = [kb.splat(kb.load(d.w, dtype, kb.add(kb.mul(oc, s.kh * s.kw), t)), width) for t in range(s.kh * s.kw)]
    b0 = kb.splat(kb.load(d.bias, dtype, oc), width) if d.bias is not None else e.c(0.0)
    out_base = kb.mul(kb.add(kb.mul(n, s.oc), oc), d.out_plane or s.oh * s.ow)
    with kb.loop(0, count, name="r") as r:
        oh = kb.add(oh0, r)
        row = kb.mul(r, s.stride[0] * wp)

        def vector(ow0, mask):
            acc = b0
            for kh in range(s.kh):
                for kw in range(s.kw):
                    v = _tap_vload(kb, s, plane, dtype, kb.add(row, kh * s.dilation[0] * wp), ow0,
                                   kw * s.dilation[1], width)
                    acc = e.fma(taps[kh * s.kw + kw], v, acc)
            p = kb.add(kb.mul(oh, s.ow), ow0)
            acc = d.epilogue.apply(e, acc, [n, oc, p], mask)
            kb.vstore(acc, d.out, dtype, kb.add(out_base, p), mask)

        full = s.ow - s.ow % width
        if full:
            with kb.loop(0, full, width, name="ow") as ow0:
                vector(ow0, None)
        if s.ow % width:
            vector(full, kb.prefix_mask(width, s.ow % width))


def copy_row(kb: KernelBuilder, s: ConvShape, src: ir.Value, src_base, plane: ir.Value, plane_row,
             dtype: np.dtype, lanes: int, count: int | ir.Value | None = None) -> None:
    """Input row (its first `count` elements: all W by default) -> padded plane row
    `plane_row` (after the left padding). For stride 2 the row is stored deinterleaved
    (even padded columns, then odd ones), so every tap of a stride-2 output vector is one
    contiguous load."""
    _, wp = s.padded_hw
    row = kb.mul(plane_row, wp)
    count = s.w if count is None else count
    if s.stride[1] != 2:
        emit_row_copy(kb, src, src_base, plane, kb.add(row, s.pad[1]), count, dtype, lanes)
        return
    emit_deinterleaved_row_copy(kb, src, src_base, count, plane, row, s.pad[1], 2, _half(s), dtype, lanes)


def _half(s: ConvShape) -> int:
    """Elements of the even half of a plane row stored deinterleaved (stride 2)."""
    return (s.padded_hw[1] + 1) // 2


def tap_column(s: ConvShape, offset: int) -> int:
    """Where, in a plane row written by copy_row, the inputs of a tap at padded column
    `offset` start: output column o reads element tap_column + o (stride 1 or 2)."""
    return offset if s.stride[1] == 1 else (offset % 2) * _half(s) + offset // 2


def _tap_vload(kb: KernelBuilder, s: ConvShape, plane, dtype, row, ow0, offset: int, width: int) -> ir.Value:
    """Inputs of one tap for outputs ow0 .. ow0 + width: padded columns ow*stride + offset,
    gathered (the plane path serves strides of 3 and more)."""
    stride = s.stride[1]
    vec = ir.Constant(ir.VectorType(kb.const(dtype, 0).type, width), None)
    start = kb.add(row, kb.add(kb.mul(ow0, stride), offset))
    for i in range(width):
        vec = kb.b.insert_element(vec, kb.load(plane, dtype, kb.add(start, i * stride)), ir.Constant(I32, i))
    return vec
