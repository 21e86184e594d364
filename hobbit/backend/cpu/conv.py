"""2-D convolution, lowered as its plan says (hobbit.plan.conv: the variants and why):
depthwise rows (backend/cpu/depthwise.py), one GEMM on the input or on an im2col of the
whole image, a GEMM reading padded input rows (backend/cpu/direct_conv.py), or blocks of
rows lowered by im2col into each thread's scratch, then the GEMM.

The GEMMs run in the plan's operand format (hobbit.plan.format): the weights are stored
in it (the bf16 pass's pairs for bf16), K counts its steps, and the float32 input is
converted where the GEMM packs it (or, for "KO" weights in bf16, after the im2col, into
the shared A). Bias and fused epilogue steps are applied to the accumulators before the
single store, indexed in the view [N, OC, OH*OW]."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.backend.cpu.depthwise import lower_depthwise
from hobbit.backend.cpu.direct_conv import lower_direct_conv
from hobbit.backend.cpu.dpbf16 import WORD, rows_to_pairs
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatA, MatB, MatC, emit_gemm, row_major_a, runtime_gemm, share_gemm
from hobbit.backend.cpu.im2col import im2col
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.conv_dims import Lengths, conv_lengths, unpack_rows
from hobbit.emit.scalar import Emit
from hobbit.graph.ir import Node
from hobbit.plan.conv import ConvPlan, block_positions, conv_shape, packs_pointwise, packs_rows, reads_input
from hobbit.plan.format import FLOAT32, node_format
from hobbit.plan.gemm import gemm_schedule


def lower_conv(k: KernelArgs) -> None:
    plan: ConvPlan = k.plan
    emit = {"depthwise": lower_depthwise, "gemm": _gemm_conv, "direct": lower_direct_conv,
            "im2col": _blocked_im2col_conv}[plan.variant]
    emit(k, plan, conv_lengths(k))


def _gemm_conv(k: KernelArgs, plan: ConvPlan, lengths: Lengths | None) -> None:
    """Per image and group: (im2col,) then one GEMM with bias and epilogue at the store.

    Normally rows are output channels and vectors run along the H*W positions. With
    weights in "KO" layout ([C*KH*KW, OC], chosen by the layout pass when H*W is a poor
    fit for the vector width, e.g. 7x7) the GEMM is transposed: rows are positions,
    vectors run along output channels and are stored with a stride of H*W; in a converting
    format (bf16) its A, the columns, is first converted into the shared `words`.

    With run-time `lengths` (float32 only: conv_dynamic) the GEMM runs on the positions in
    the output's rows and columns; with a run-time width and several rows (packs_rows),
    packed row by row and moved to their places with the bias and epilogue after it
    (hobbit.backend.cpu.conv_dims; a 1x1 conv then runs here only with "KO" weights, after
    an im2col that packs them)."""
    kb, node, s, sched, fmt = k.kb, k.node, plan.shape, plan.gemm, plan.format
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    steps = fmt.steps(K)
    by_channel = plan.by_channel
    rows, cols = (P, s.ocg) if by_channel else (s.ocg, P)
    used = P if lengths is None else kb.mul(lengths.oh, lengths.ow)  # the positions computed
    packed = lengths is not None and packs_rows(node)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    with kb.loop(0, s.n, name="n") as n, kb.loop(0, s.group, name="g") as g:
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        # The output's offsets: before the im2col when its columns are then converted (the order
        # of the instructions only; kept so that the generated IR stays what it was).
        if plan.words:
            oc0 = kb.mul(g, s.ocg)
            y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        if s.pointwise and not packed:
            src, src_off = x, x_off
        else:
            if lengths is None:
                im2col(kb, s, x, x_off, k.scratch, dtype, k.threads)
            else:
                im2col(kb, s, x, x_off, k.scratch, dtype, k.threads, rows=lengths.oh, width=P, lengths=lengths,
                       row_stride=lengths.ow, lanes=k.width(dtype))
            k.threads.sync()
            src, src_off = k.scratch, 0
        if not plan.words:
            oc0 = kb.mul(g, s.ocg)
            y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        if by_channel:
            if plan.words:
                words = kb.gep(k.scratch, WORD, plan.col)
                rows_to_pairs(kb, src, src_off, K, P, words, k.threads)
                k.threads.sync()
                src, src_off = words, 0
            a = MatA(src, src_off, panel=sched.mr, k=P, m=1)
            b = MatB(w, 0, k=sched.nr, panel=steps * sched.nr)  # packed panels; KO implies one group
            partial = MatC(k.scratch, plan.col + plan.words, m=s.ocg) if steps > sched.kc else None
            c = MatC(k.outputs[0], y_off, m=1, n=P, partial=partial)
        else:
            a = row_major_a(w, kb.mul(oc0, steps), steps, sched.mr)
            b = MatB(src, src_off, k=P)
            c = MatC(k.outputs[0], y_off, m=P)

        def epi(e: Emit, v, m, col, mask, n=n, oc0=oc0):
            if by_channel:
                oc, p = kb.add(oc0, col), m
                if bias is not None:
                    v = e.add(v, kb.vload(bias, dtype, oc, e.width, mask))
                return epilogue.apply(e, v, [n, oc, p], mask, axis=1)
            oc, p = kb.add(oc0, m), col
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, dtype, oc), e.width))
            return epilogue.apply(e, v, [n, oc, p], mask)

        def touch(m, col, n=n, oc0=oc0):
            epilogue.prefetch([n, kb.add(oc0, m), col])

        pack = k.thread_scratch(0, plan.pack, dtype) if plan.pack else None
        if lengths is None:
            emit_gemm(kb, sched, rows, cols, K, a, b, c, fmt, epi, k.threads, pack,
                      None if by_channel else touch)
        else:
            m_len, n_len = (used, s.ocg) if by_channel else (s.ocg, used)
            share_gemm(runtime_gemm(kb, sched, m_len, n_len, K, a, b, c, fmt, None if packed else epi, steps, pack,
                                    None if by_channel or packed else touch), k.threads, (rows, cols, steps))
            if packed:  # every thread's rows of the GEMM are in before any is moved
                k.threads.sync()
                k.threads.shares(s.ocg, lambda lo, hi, n=n, oc0=oc0, y_off=y_off: _unpack(
                    k, plan, epilogue, lengths, n, oc0, lo, hi, y_off, 0, lengths.oh))
        if (not s.pointwise or plan.words) and s.n * s.group > 1:
            k.threads.sync()  # the next im2col (or conversion) overwrites the scratch others may still read


def _blocked_im2col_conv(k: KernelArgs, plan: ConvPlan, lengths: Lengths | None) -> None:
    """im2col + GEMM over blocks of output rows. Each thread takes whole blocks and
    lowers them into its own L2-sized slice of scratch, so the columns are consumed
    while still in cache and threads never wait for each other.

    With run-time `lengths` a block holds as many rows of the run-time width as fit the
    plan's positions (hobbit.plan.conv.block_positions), and the blocks, counted at run time,
    are shared in claimed runs; with a run-time width and several rows (packs_rows) the GEMM
    runs on the block's positions packed row by row, then moved to their places with the
    bias and epilogue (hobbit.backend.cpu.conv_dims)."""
    kb, node, s, fmt = k.kb, k.node, plan.shape, plan.format
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    steps = fmt.steps(K)
    col = k.thread_scratch(0, plan.col, dtype) if plan.col else None
    pack = k.thread_scratch(plan.col * plan.threads, plan.pack, dtype) if plan.pack else None
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    alone = k.threads.alone()
    parts = 1 if lengths is None else m_parts(node, plan)  # (of a block's output channels)

    def block(image, oh0, count: int, live=None, span: int | None = None, part=None) -> None:
        """Rows oh0 .. oh0 + count of image `image` = (batch item, group); with run-time
        lengths, `live` rows (a run-time count) in a block of `span` positions, and with
        `part` (a run-time index), only that part of the output channels (m_parts)."""
        span = count * s.ow if span is None else span
        n, g = kb.b.udiv(image, kb.i64(s.group)), kb.b.urem(image, kb.i64(s.group))
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        oc0 = kb.mul(g, s.ocg)
        y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        if lengths is None:
            im2col(kb, s, x, x_off, col, dtype, alone, oh0, count)
        sched = gemm_schedule(s.ocg, span, steps, k.target, np.dtype(dtype).itemsize)
        # This block's output channels: [m_lo, m_lo + m_len) of the group's
        m_lo, m_len = (0, s.ocg) if part is None else _channel_part(kb, s.ocg, sched.mr, parts, part)
        a = row_major_a(w, kb.mul(kb.add(oc0, m_lo), steps), steps, sched.mr)
        b = MatB(col, 0, k=span)
        c = MatC(k.outputs[0], kb.add(kb.add(y_off, kb.mul(m_lo, P)), kb.mul(oh0, s.ow)), m=P)

        def epi(e: Emit, v, m, col_index, mask):
            oc = kb.add(kb.add(oc0, m_lo), m)
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, dtype, oc), e.width))
            return epilogue.apply(e, v, [n, oc, kb.add(kb.mul(oh0, s.ow), col_index)], mask)

        def touch(m, col_index):
            epilogue.prefetch([n, kb.add(kb.add(oc0, m_lo), m), kb.add(kb.mul(oh0, s.ow), col_index)])

        if lengths is None:
            emit_gemm(kb, sched, s.ocg, count * s.ow, K, a, b, c, fmt, epi, alone, pack, touch)
            return

        def gemm(b: MatB, positions, packed: bool) -> None:
            share_gemm(runtime_gemm(kb, sched, m_len, positions, K, a, b, c, fmt, None if packed else epi, steps,
                                    pack, None if packed else touch), alone, (s.ocg, span, steps))

        def packed_rows() -> None:
            im2col(kb, s, x, x_off, col, dtype, alone, oh0, live, width=span, lengths=lengths,
                   row_stride=lengths.ow, lanes=k.width(dtype))
            gemm(b, kb.mul(live, lengths.ow), packs_rows(node))
            if packs_rows(node):
                _unpack(k, plan, epilogue, lengths, n, oc0, m_lo, kb.add(m_lo, m_len), kb.add(y_off, kb.mul(oh0, s.ow)),
                        oh0, live)

        if not (s.pointwise and packs_rows(node)):
            packed_rows()
            return

        def by_row(width=lengths.ow) -> None:
            """A GEMM per row over its first `width` columns."""
            with kb.loop(0, live, name="row") as r:
                row = kb.add(oh0, r)

                def row_epi(e: Emit, v, m, col_index, mask):
                    return epi(e, v, m, kb.add(kb.mul(r, s.ow), col_index), mask)

                share_gemm(runtime_gemm(kb, sched, s.ocg, width, K, a,
                                        MatB(x, kb.add(x_off, kb.mul(row, s.w)), k=s.h * s.w),
                                        MatC(k.outputs[0], kb.add(y_off, kb.mul(row, s.ow)), m=P), fmt,
                                        row_epi, steps, pack, None), alone, (s.ocg, span, steps))

        def split_rows() -> None:
            """Each row's whole vectors in place (by_row), its last columns (fewer than a vector)
            packed with the other rows' into one GEMM where that pays (tail_lanes): a GEMM
            per row over its whole width spends the masked lanes of its last vector (55
            columns: four vectors for 55/64 of their lanes). The tails go first: their GEMM
            writes them packed at the block's first row, and they are moved (with the bias and
            epilogue) to their places before the rows' GEMMs write there."""
            most = tail_lanes(s.cg, s.ocg, sched.vw)
            if not most:
                by_row()
                return
            b = kb.b
            ow_len = kb.idx(lengths.ow)
            whole = b.mul(b.udiv(ow_len, kb.i64(sched.vw)), kb.i64(sched.vw))
            tail = b.sub(ow_len, whole)
            packed = b.and_(b.icmp_unsigned("!=", tail, kb.i64(0)), b.icmp_unsigned("<=", tail, kb.i64(most)))
            with kb.b.if_else(packed) as (tails, rows):
                with tails:
                    mask = kb.runtime_prefix_mask(sched.vw, tail)
                    with kb.loop(0, s.cg, name="c") as c, kb.loop(0, live, name="r") as r:
                        src = kb.add(kb.add(x_off, kb.mul(c, s.h * s.w)), kb.add(kb.mul(kb.add(oh0, r), s.w), whole))
                        v = kb.vload(x, dtype, src, sched.vw, mask)
                        kb.vstore(v, col, dtype, kb.add(kb.mul(c, span), b.mul(kb.idx(r), tail)), mask)
                    gemm(MatB(col, 0, k=span), b.mul(kb.idx(live), tail), True)
                    _unpack(k, plan, epilogue, lengths, n, oc0, 0, s.ocg, kb.add(y_off, kb.mul(oh0, s.ow)), oh0,
                            live, width=tail, offset=whole)
                    with kb.if_then(b.icmp_unsigned("!=", whole, kb.i64(0))):
                        by_row(whole)
                with rows:
                    by_row()

        # A 1x1 conv reads its input in place: one GEMM over the block's positions up to the
        # last row's width where the rows are at least 7/8 of the bound's (the columns past the
        # width cost at most 1/7 more; at the bound it is the static conv); narrower rows are
        # packed where the channels make packing cheap (hobbit.plan.conv.packs_pointwise),
        # else each row's whole vectors are a GEMM, its last columns packed with the other
        # rows' where that pays (split_rows).
        wide = kb.b.icmp_signed(">=", kb.b.mul(kb.idx(lengths.ow), kb.i64(8)), kb.i64(7 * s.ow))
        with kb.b.if_else(wide) as (flat, narrow):
            with flat:
                gemm(MatB(x, kb.add(x_off, kb.mul(oh0, s.w)), k=s.h * s.w),
                     kb.add(kb.mul(kb.add(live, -1), s.ow), lengths.ow), False)
            with narrow:
                if packs_pointwise(s):
                    packed_rows()
                else:
                    split_rows()

    if lengths is None:
        k.threads.bands(s.oh, plan.rows, block, images=s.n * s.group)
        return
    # Blocks of `rows` rows (the last one shorter), each within the plan's positions.
    b = kb.b
    positions = block_positions(s, k.target)
    oh_len = kb.idx(lengths.oh)
    rows = b.udiv(kb.i64(positions), kb.idx(lengths.ow))
    if parts == 1:
        # At most a thread's share of the rows: a small image in one block left the other threads
        # idle (SqueezeNet's 13x13 classifier conv ran at one thread's speed at two: 1.74 ms
        # against the static shared GEMM's 0.82).
        share = b.udiv(b.add(oh_len, kb.i64(plan.threads - 1)), kb.i64(plan.threads))
        rows = b.select(b.icmp_signed(">", rows, share), share, rows)
    bands = b.udiv(b.add(oh_len, b.sub(rows, kb.i64(1))), rows)

    def run(lo, hi) -> None:
        with kb.loop(lo, hi, name="block") as unit:
            image, rest = b.udiv(unit, kb.idx(kb.mul(bands, parts))), b.urem(unit, kb.idx(kb.mul(bands, parts)))
            part, band = (None, rest) if parts == 1 else (b.udiv(rest, bands), b.urem(rest, bands))
            oh0 = b.mul(band, rows)
            block(image, oh0, 0, kb.imin(rows, b.sub(oh_len, oh0)), positions, part)

    k.threads.runs(b.mul(kb.i64(s.n * s.group * parts), bands), run)


def m_parts(node: Node, plan: ConvPlan) -> int:
    """In how many parts a 1x1 conv with a run-time width that packs its rows
    (packs_pointwise) shares each block's output channels among threads: one per thread.
    Blocks of whole rows shared 13 rows 7:6 between two threads (SqueezeNet's 13x13
    classifier at 224x224; 9 rows 5:4 at 160x240), where the static conv splits one GEMM
    evenly; a part per thread of every block's channels is an even split (thread t's share
    of the claimed units is part t of every block), each part copying the block's rows in
    again (K per position, against the GEMM's M/threads x K)."""
    s = plan.shape
    if plan.threads == 1 or not (s.pointwise and packs_pointwise(s) and packs_rows(node)):
        return 1
    return plan.threads


def _channel_part(kb, channels: int, mr: int, parts: int, part: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(first, count) of output channels in `part` of `parts`: whole blocks of mr, near-equal."""
    b = kb.b
    blocks = -(-channels // mr)
    lo = b.mul(b.udiv(b.mul(part, kb.i64(blocks)), kb.i64(parts)), kb.i64(mr))
    hi = b.mul(b.udiv(b.mul(b.add(part, kb.i64(1)), kb.i64(blocks)), kb.i64(parts)), kb.i64(mr))
    hi = b.select(b.icmp_unsigned(">", hi, kb.i64(channels)), kb.i64(channels), hi)
    return lo, b.sub(hi, lo)


# A 1x1 conv's rows narrower than the bound's: the last columns of the rows (fewer than a
# vector, `t` of a vector's vw lanes) are packed into one GEMM (conv.split_rows) where the lanes
# a GEMM per row would leave masked, times the GEMM's work per column, pay for copying the
# tails in (K) and moving them out (M): K*M*(vw - t) >= TAIL_PAYS*vw*(K + M). Measured per
# kernel (1 thread, 79-wide bound) against a static compile: packed, 128 -> 32 at 55 columns
# (t = 7) 1.16x -> 1.08x, at 27 (t = 11) 1.26x -> 1.18x; 256 -> 48 at 55 1.15x -> 1.05x;
# 64 -> 16 at 55 1.17x -> 1.13x. Packing every tail lost where few lanes are saved: 64 -> 16 at
# 59 (t = 11) 1.10x -> 1.13x, 16 -> 64 at 13 (t = 13) 1.20x -> 1.52x; those stay a GEMM per row.
TAIL_PAYS = 5


def tail_lanes(k: int, m: int, vw: int) -> int:
    """The most lanes of a row's last vector that are packed (0: none; conv.split_rows)."""
    return max(0, min(vw - 1, vw - -(-TAIL_PAYS * vw * (k + m) // (k * m))))


def _unpack(k: KernelArgs, plan: ConvPlan, epilogue: Epilogue, lengths: Lengths, n, oc0, lo, hi, base, oh0, rows,
            width=None, offset=0) -> None:
    """Output channels oc0 + [lo, hi): `rows` rows of the run-time width (or `width` columns
    from column `offset`) stored packed from `base` (output row oh0's place) moved to their
    places, with the bias and epilogue (hobbit.backend.cpu.conv_dims.unpack_rows)."""
    kb, s = k.kb, plan.shape
    dtype = k.node.inputs[0].dtype
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    P = s.oh * s.ow
    with kb.loop(lo, hi, name="oc") as m:
        oc = kb.add(oc0, m)

        def epi(e: Emit, v, r, j, mask):
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, dtype, oc), e.width))
            return epilogue.apply(e, v, [n, oc, kb.add(kb.mul(kb.add(oh0, r), s.ow), kb.add(j, offset))], mask)

        unpack_rows(kb, k.outputs[0], dtype, kb.add(base, kb.mul(m, P)), rows, lengths.ow if width is None else width,
                    s.ow, k.width(dtype), epi, offset)


def conv_dynamic(node: Node) -> str | None:
    """None where the kernel follows this node's run-time dims: a float32 conv whose input
    height and width (either or both) are run-time, with static batch and channels, the
    output's run-time dims being the input's, every variant but a depthwise conv of a
    stride above 2 along W (its padded plane), fused epilogue operands whose run-time dims
    are the output's. bf16 GEMMs: not yet."""
    x, y = node.inputs[0], node.outputs[0]
    fmt = node_format(node)
    if fmt.micro != "fma" or np.dtype(y.dtype) != FLOAT32 or np.dtype(x.dtype) != FLOAT32:
        return f"its {fmt.name} GEMM runs at static shapes only (run-time dims: float32)"
    if any(v is not None and v.extents is not None and any(v.extents) for v in node.inputs[1:]):
        return "its weights or bias have run-time dims"
    x_ext, y_ext = x.extents or (None,) * 4, y.extents or (None,) * 4
    for axis, what in ((0, "batch"), (1, "channel")):
        if x_ext[axis] is not None or y_ext[axis] is not None:
            return f"a run-time {what} dim (run-time dims: height and width)"
    for axis, what in ((2, "height"), (3, "width")):
        if (x_ext[axis] is None) != (y_ext[axis] is None):
            return f"its input's and output's {what} are not both run-time"
    s = conv_shape(node)
    if s.depthwise and not reads_input(s):
        return f"a depthwise conv of stride {s.stride[1]} along W reads a padded plane (static shapes only)"
    for step in node.epilogue:
        v = step.operand
        if v is None:
            continue
        offset = 4 - len(v.shape)
        for axis, extent in enumerate(v.extents or ()):
            if extent is not None and y_ext[offset + axis] != extent:
                return f"epilogue operand '{v.name}' has a run-time dim {axis} the output does not share"
    return None


CPU.register("Conv", lower=lower_conv, dynamic=conv_dynamic)
