"""im2col: the patches of a convolution's input laid out as the rows of a GEMM's B matrix."""

from __future__ import annotations

from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.conv_dims import Lengths, valid_range_at
from hobbit.backend.cpu.copy import emit_fill
from hobbit.backend.cpu.parallel import Threads
from hobbit.plan.conv import ConvShape


def im2col(kb: KernelBuilder, s: ConvShape, x, x_off, col, dtype, threads: Threads,
           oh0: int | ir.Value = 0, rows: int | ir.Value | None = None, fill: int | ir.Value = 0,
           width: int | None = None, lengths: Lengths | None = None, row_stride: int | ir.Value | None = None,
           lanes: int = 0) -> None:
    """col[(c*KH + kh)*KW + kw, r*OW + ow] = x[c, (oh0 + r)*sh + kh*dh - pt, ow*sw + kw*dw - pl],
    or `fill` in the padding (a quantized zero for int8, a run-time value for ConvInteger's), for output rows oh0 .. oh0 + rows
    (all rows by default). A row of col holds `width` elements (rows*OW by default), output
    row r starting at r*row_stride (OW by default).

    With run-time `lengths` (hobbit.backend.cpu.conv_dims; `rows` may then be a run-time
    count) input rows and columns past the input's lengths are padding, and only the
    columns ow < lengths.ow of each output row are written (packed, with a row_stride of
    lengths.ow: hobbit.backend.cpu.conv_dims.unpack_rows). A copy of a run-time length runs
    in vectors of `lanes` (strided_copy): LLVM's own vectorisation of that loop ran a stride-2
    im2col at 1.3x the time of the static one.

    Kernel columns are unrolled (each gets static bounds for its valid output columns,
    so the copy loop vectorises cleanly); kernel rows are a runtime loop, which keeps a
    7x7 kernel at 7 loop bodies for LLVM to optimise, not 49."""
    b = kb.b
    zero = fill if isinstance(fill, ir.Value) else kb.const(dtype, fill)
    rows = s.oh if rows is None else rows
    width = rows * s.ow if width is None else width
    h_len, w_len, ow_len = (s.h, s.w, s.ow) if lengths is None else (lengths.h, lengths.w, lengths.ow)
    row_stride = s.ow if row_stride is None else row_stride

    def channels(c_lo, c_hi) -> None:
        with kb.loop(c_lo, c_hi, name="c") as c, kb.loop(0, s.kh, name="kh") as kh:
            x_c = kb.add(x_off, kb.mul(c, s.h * s.w))
            dy = b.sub(kb.idx(kb.mul(kh, s.dilation[0])), kb.i64(s.pad[0]))
            for kw in range(s.kw):
                row = kb.mul(kb.add(kb.mul(kb.add(kb.mul(c, s.kh), kh), s.kw), kw), width)
                dx = kw * s.dilation[1] - s.pad[1]
                ow_lo, ow_hi = valid_range_at(kb, ow_len, w_len, s.stride[1], dx)
                with kb.loop(0, rows, name="r") as r:
                    dst = kb.add(row, kb.mul(r, row_stride))
                    ih = b.add(b.mul(kb.idx(kb.add(oh0, r)), kb.i64(s.stride[0])), dy)
                    inside = b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.idx(h_len)))
                    with b.if_else(inside) as (copy, pad):
                        with copy:
                            src = kb.add(x_c, kb.add(kb.mul(ih, s.w), dx))
                            emit_fill(kb, col, dtype, 0, ow_lo, zero, base=dst)
                            if isinstance(ow_hi, int) or not lanes:
                                with kb.loop(ow_lo, ow_hi, name="ow") as ow:
                                    v = kb.load(x, dtype, kb.add(src, kb.mul(ow, s.stride[1])))
                                    kb.store(v, col, dtype, kb.add(dst, ow))
                            else:
                                strided_copy(kb, x, src, col, dst, ow_lo, ow_hi, s.stride[1], dtype, lanes)
                            emit_fill(kb, col, dtype, ow_hi, ow_len, zero, base=dst)
                        with pad:
                            emit_fill(kb, col, dtype, 0, ow_len, zero, base=dst)

    threads.shares(s.cg, channels)



def strided_copy(kb: KernelBuilder, src: ir.Value, src_base, dst: ir.Value, dst_base, lo: ir.Value, hi: ir.Value,
                 stride: int, dtype, lanes: int) -> None:
    """dst[dst_base + o] = src[src_base + o*stride] for o in [lo, hi) (a run-time range), in
    vectors of `lanes`: each loads stride*lanes contiguous inputs and keeps every stride-th.
    Every vector but the last reads only inputs below the next vector's first; the last one
    (1 .. lanes outputs) loads and stores under masks, so nothing past o = hi - 1 is read."""
    b = kb.b
    wide = stride * lanes
    keep = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [stride * i for i in range(lanes)])
    lo, hi = kb.idx(lo), kb.idx(hi)
    count = b.sub(hi, lo)

    def vector(o, outputs: ir.Value | None) -> None:
        load_mask = None if outputs is None else \
            kb.runtime_prefix_mask(wide, b.add(b.mul(b.sub(outputs, kb.i64(1)), kb.i64(stride)), kb.i64(1)))
        v = kb.vload(src, dtype, kb.add(src_base, kb.mul(o, stride)), wide, load_mask)
        if stride > 1:
            v = b.shuffle_vector(v, v, keep)
        store_mask = None if outputs is None else kb.runtime_prefix_mask(lanes, outputs)
        kb.vstore(v, dst, dtype, kb.add(dst_base, o), store_mask)

    with kb.if_then(b.icmp_signed(">", count, kb.i64(0))):
        whole = b.udiv(b.sub(count, kb.i64(1)), kb.i64(lanes))  # the vectors before the last
        with kb.loop(0, whole, name="owv") as t:
            vector(b.add(lo, b.mul(t, kb.i64(lanes))), None)
        vector(b.add(lo, b.mul(whole, kb.i64(lanes))), b.sub(count, b.mul(whole, kb.i64(lanes))))
