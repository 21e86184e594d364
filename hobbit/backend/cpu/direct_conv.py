"""Direct convolution for inputs with few channels (the RGB stems of image models).

im2col copies every input pixel KH*KW times into a column buffer that the GEMM
then reads: with three input channels there are so few multiply-adds per column
that writing the buffer costs about as much as the arithmetic. Here each thread
copies the input rows of a band of output rows into a zero-padded plane per
channel (stored by phase for stride 2: backend/cpu/depthwise.copy_row), and the GEMM
microkernel reads its B operand straight from the plane: row k = (c, kh, kw) of B
for output row r is channel c's plane at row r*stride + kh*dilation, shifted by
tap kw (MatB.taps: a loop over kh, the taps of a row unrolled). Rows outside the
image are zero rows of the plane, so the inner loops have no bounds checks.

With run-time lengths (hobbit.backend.cpu.conv_dims) the bands are cut from the run-time
height as static bands are from the static one (`runtime_bands`); rows and columns past
the input's lengths are padding (a plane row's columns past the run-time width are never
written in a call, and stay zero), and each output row's GEMM computes its run-time width."""

from __future__ import annotations

from llvmlite import ir

from hobbit.plan.conv import ConvPlan, input_rows
from hobbit.backend.cpu.conv_dims import Lengths
from hobbit.backend.cpu.copy import emit_fill
from hobbit.backend.cpu.depthwise import copy_row, tap_column
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatB, MatC, emit_gemm, row_major_a, runtime_gemm, share_gemm
from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.plan.bands import cut

def lower_direct_conv(k: KernelArgs, plan: ConvPlan, lengths: Lengths | None = None) -> None:
    kb, node, s, sched = k.kb, k.node, plan.shape, plan.gemm
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.c * s.kh * s.kw, s.oh * s.ow
    _, wp = s.padded_hw
    band = plan.rows
    rows_held = input_rows(s, band)
    plane_size = plan.plane
    plane = k.thread_scratch(0, plane_size, dtype)
    zero = kb.const(dtype, 0)
    emit_fill(kb, plane, dtype, 0, plane_size, zero)  # the padding columns stay zero
    lanes = k.width(dtype)
    taps = tuple(tap_column(s, kw * s.dilation[1]) for kw in range(s.kw))
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    alone = k.threads.alone()
    b = kb.b
    h_len, w_len, ow_len = (s.h, s.w, s.ow) if lengths is None else (lengths.h, lengths.w, lengths.ow)

    def load_rows(n, oh0, count: int | ir.Value) -> None:
        """Plane rows j = input rows oh0*stride - pad_top + j of every channel (zero outside)."""
        held = input_rows(s, count) if isinstance(count, int) else \
            kb.add(kb.mul(count, s.stride[0]), (s.kh - 1) * s.dilation[0] + 1 - s.stride[0])
        for c in range(s.c):
            src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            with kb.loop(0, held, name="j") as j:
                ih = b.sub(kb.idx(kb.add(kb.mul(oh0, s.stride[0]), j)), kb.i64(s.pad[0]))
                plane_row = kb.add(c * rows_held, j)
                inside = b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.idx(h_len)))
                with b.if_else(inside) as (copy, pad):
                    with copy:
                        # (a row's columns past its run-time length are padding: the planes are
                        # zeroed at every call and no row of this call writes them)
                        copy_row(kb, s, x, kb.add(src, kb.mul(ih, s.w)), plane, plane_row, dtype, lanes, w_len)
                    with pad:
                        emit_fill(kb, plane, dtype, 0, wp, zero, base=kb.mul(plane_row, wp))

    def run(n, oh0, count: int | ir.Value) -> None:
        """Output rows oh0 .. oh0 + count."""
        load_rows(n, oh0, count)
        with kb.loop(0, count, name="r") as r:
            oh = kb.add(oh0, r)
            first = kb.mul(oh, s.ow)

            def epi(e: Emit, v, m, col, mask):
                if bias is not None:
                    v = e.add(v, kb.splat(kb.load(bias, dtype, m), e.width))
                return epilogue.apply(e, v, [n, m, kb.add(first, col)], mask)

            def touch(m, col):
                epilogue.prefetch([n, m, kb.add(first, col)])

            a = row_major_a(w, 0, K, sched.mr)
            rows = MatB(plane, kb.mul(r, s.stride[0] * wp), k=rows_held * wp, taps=taps,
                        tap_rows=s.kh, tap_row=s.dilation[0] * wp)
            out = MatC(k.outputs[0], kb.add(kb.mul(n, s.oc * P), first), m=P)
            if isinstance(ow_len, int):
                emit_gemm(kb, sched, s.oc, s.ow, K, a, rows, out, plan.format, epi, alone, None, touch)
            else:
                share_gemm(runtime_gemm(kb, sched, s.oc, ow_len, K, a, rows, out, plan.format, epi, K, None, touch),
                           alone, (s.oc, s.ow, K))

    runtime_bands(k, s.n, s.oh, s.oh if lengths is None else lengths.oh, band, run)


def runtime_bands(k: KernelArgs, images: int, bound_rows: int, rows: ir.Value, band: int, body) -> None:
    """body(image, first_row, count) over the run-time `rows` of each of `images` images, as
    Threads.bands shares static rows: the images' rows (flattened) in one share per thread,
    each share claimed in runs (Threads.runs: a share's own thread first), each run in
    near-equal bands of at most `band` rows (body's count is a run-time value), a band that
    crosses an image cut at its end.

    Why not the bound's bands cut at the run-time height: the bound's shares fall on its
    rows, so at half the bound's height the first thread's share held every live row (three
    bands of 27 rows at a 320 bound and 160x240, the second thread's share none), and two
    threads split three bands 2:1, 1.35x the rows of an even split."""
    kb, b = k.kb, k.kb.b
    rows = kb.idx(rows)
    per_thread = 1
    if k.threads.max_threads > 1:  # the bound's most bands in a share: no run is taller than a band
        per_thread = cut(-(-images * bound_rows // k.threads.max_threads), band)[0]

    def run(first: ir.Value, end: ir.Value) -> None:
        first, end = kb.idx(first), kb.idx(end)
        length = b.sub(end, first)
        count = b.udiv(b.add(length, kb.i64(band - 1)), kb.i64(band))
        with kb.loop(0, count, name="band") as i:
            lo = b.add(first, b.udiv(b.mul(kb.idx(i), length), count))
            hi = b.add(first, b.udiv(b.mul(b.add(kb.idx(i), kb.i64(1)), length), count))
            if images == 1:
                body(kb.i64(0), lo, b.sub(hi, lo))
            else:
                _images(kb, lo, hi, rows, body)

    k.threads.runs(b.mul(kb.i64(images), rows), run, per_thread=per_thread)


def _images(kb, lo: ir.Value, hi: ir.Value, rows: ir.Value, body) -> None:
    """body(image, first_row, count) for the part of flattened rows [lo, hi) in each image
    of `rows` rows that it touches."""
    b = kb.b
    with kb.loop(b.udiv(lo, rows), b.add(b.udiv(b.sub(hi, kb.i64(1)), rows), kb.i64(1)), name="image") as image:
        start = b.mul(kb.idx(image), rows)
        top = b.select(b.icmp_unsigned(">", lo, start), b.sub(lo, start), kb.i64(0))
        bottom = kb.imin(b.sub(hi, start), rows)
        body(image, top, b.sub(bottom, top))
