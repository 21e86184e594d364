"""3x3 stride-1 convolution by Winograd F(m x m, 3x3), m = 2 or 4.

Each m x m block of outputs ("tile") needs an a x a input patch (a = m + 2).
Transformed, the 9*m*m multiply-adds of a tile become a*a: 2.25x fewer for
m = 2, 4x fewer for m = 4. They run as a*a independent GEMMs
M[xi] (OC x T) = U[xi] (OC x C) @ V[xi] (C x T) over the T tiles, on the same
microkernel as every other conv. Phases per image:

1. copy each channel into the middle of a zero-padded plane stored by phase
   (one per thread, reused for every channel so it stays in cache);
2. V = B^T d B for every channel, in vectors of consecutive tiles (channels
   shared among threads);
3. the a*a GEMMs;
4. Y = A^T m A, in vectors of tiles interleaved into rows, bias and the fused
   epilogue, stored into NCHW.

The weights U = G g G^T are transformed at compile time (passes/winograd.py; the
transforms and the panel layout are in hobbit/plan/winograd.py) and stored in
panels of output channels, so the GEMMs stream U front to back. With
few tiles (7x7, 14x14, 28x28 images) the GEMMs run transposed (tiles_as_rows):
there U is several MB read once per call, and a GEMM one vector of tiles wide
would spend one broadcast of U per multiply-add.

The GEMMs run in the plan's operand format (hobbit.plan.winograd): float, or bf16 on
vdpbf16ps for F(2x2) convs the bf16 pass gave bf16 weights, whose transforms stay float32."""

from __future__ import annotations

from llvmlite import ir

from hobbit.target import Target
from hobbit.emit.builder import I32, KernelBuilder
from hobbit.plan.conv import ConvShape
from hobbit.backend.cpu.copy import emit_deinterleaved_row_copy, emit_fill
from hobbit.backend.cpu.dpbf16 import rows_to_pairs
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatA, MatB, MatC, emit_gemm
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.reduce import combine
from hobbit.emit.scalar import Emit
from hobbit.plan.format import Format
from hobbit.plan.gemm import GemmSchedule
from hobbit.plan.winograd import (Variant, VARIANTS, WinogradPlan, phase_len, plane_hw, plane_row, tile_gemm,
                                  tiles)


def tile_lanes(s: ConvShape, m: int, target: Target) -> int:
    """Tiles per vector in the transforms: the target's lanes, or the power of two that
    covers a narrow tile row."""
    width = target.lanes(4)
    while width // 2 >= max(tiles(s, m)[1], 2):
        width //= 2
    return width


class TileGemms:
    """The a*a GEMMs of a ConvWinograd in its plan's operand format, on its packed U
    ([a*a, panels, C steps, rows]: rows MR, or NR with tiles as rows) and the float32 V and M
    in scratch. In a converting format (bf16) V becomes operand words where the GEMM packs it
    (U broadcast, M = U V) or, transposed (V broadcast, M^T = V^T U^T), by one pass over the
    GEMM's own V rows into words in place, read then by every output-channel panel."""

    def __init__(self, fmt: Format, dtype):
        self.fmt, self.dtype = fmt, dtype

    def schedule(self, s: ConvShape, m: int, t: int, target: Target) -> GemmSchedule:
        return tile_gemm(s, m, t, target, self.fmt)

    def by_channel(self, kb: KernelBuilder, sched: GemmSchedule, s: ConvShape, u, xi, v, v_at, mm, m_at, t: int,
                   threads: Threads, pack) -> None:
        """M[xi] (OC x t) = U[xi] @ V[xi], V and M row-major at v[v_at] and mm[m_at]; A is U[xi]'s
        packed panels."""
        steps, rows = self.fmt.steps(s.c), sched.mr
        a = MatA(u, kb.mul(xi, -(-s.oc // rows) * steps * rows), panel=steps * rows, k=rows, m=1)
        emit_gemm(kb, sched, s.oc, t, s.c, a, MatB(v, v_at, k=t), MatC(mm, m_at, m=t), self.fmt, None, threads, pack)

    def by_tile(self, kb: KernelBuilder, sched: GemmSchedule, s: ConvShape, u, xi, scratch, v_at, m_at, t: int,
                threads: Threads) -> None:
        """M^T (t x OC) = V^T (t x C) @ U^T: B is U's panels, C is M read with strides."""
        steps = self.fmt.steps(s.c)
        if self.fmt.converts:
            rows_to_pairs(kb, scratch, v_at, s.c, t, kb.gep(scratch, self.dtype, v_at), threads)
        a = MatA(scratch, v_at, panel=sched.mr, k=t, m=1)
        b = MatB(u, kb.mul(xi, steps * s.oc), k=sched.nr, panel=steps * sched.nr)
        emit_gemm(kb, sched, t, s.oc, s.c, a, b, MatC(scratch, m_at, m=1, n=t), self.fmt, None, threads)


def lower_winograd(k: KernelArgs) -> None:
    plan: WinogradPlan = k.plan
    var = VARIANTS[plan.m]
    gemms = TileGemms(plan.format, k.node.inputs[0].dtype)
    if plan.band:
        _banded(k, plan, var, gemms)
    else:
        _whole_image(k, plan, var, gemms)


def _whole_image(k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms) -> None:
    """All tiles at once, in three phases shared out in claimed runs (Threads.runs): the
    input transform by channels, then whole GEMMs (one per xi, claimed one at a time: a
    thread reads only its own GEMMs' V and U), then the output transform by output channels."""
    kb, node, s, sched = k.kb, k.node, plan.shape, plan.gemm
    dtype = node.inputs[0].dtype
    u, bias = k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    th, tw = tiles(s, var.m)
    t = th * tw
    v_off, m_off = plan.v_off, plan.m_off
    pack = k.thread_scratch(plan.pack_off, plan.pack, dtype) if plan.pack else None
    by_tile = plan.by_tile
    epilogue = _epilogue(k, s)
    alone = k.threads.alone()

    def gemm(xi) -> None:
        v_at, m_at = kb.add(v_off, kb.mul(xi, s.c * t)), kb.add(m_off, kb.mul(xi, s.oc * t))
        if by_tile:
            gemms.by_tile(kb, sched, s, u, xi, k.scratch, v_at, m_at, t, alone)
        else:
            gemms.by_channel(kb, sched, s, u, xi, k.scratch, v_at, k.scratch, m_at, t, alone, pack)

    def gemm_range(lo, hi) -> None:
        with kb.loop(lo, hi, name="xi") as xi:
            gemm(xi)

    with kb.loop(0, s.n, name="n") as n:
        _input_transform(kb, k, s, var, n, v_off, dtype)
        k.threads.sync()
        k.threads.runs(var.alpha ** 2, gemm_range, per_thread=var.alpha ** 2)
        k.threads.sync()
        k.threads.runs(s.oc, lambda lo, hi: _output_transform(
            kb, k, s, var, bias, n, k.scratch, m_off, t, 0, th, s.oh - (th - 1) * var.m, (lo, hi), dtype, epilogue))
        if s.n > 1:
            k.threads.sync()  # the next image's GEMMs overwrite the M this output transform reads


def _input_transform(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, n, v_off: int,
                     dtype) -> None:
    th, tw = tiles(s, var.m)
    ph, _ = plane_hw(s, var.m)
    row = plane_row(s, var.m)
    t = th * tw
    pad = k.thread_scratch(0, ph * row, dtype)
    emit_fill(kb, pad, dtype, 0, ph * row, kb.const(dtype, 0))  # the border stays zero for every channel

    def channels(c_lo, c_hi) -> None:
        with kb.loop(c_lo, c_hi, name="c") as c:
            src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            with kb.loop(0, min(s.h, ph - s.pad[0]), name="ih") as ih:
                _copy_row(kb, k, s, var, kb.add(src, kb.mul(ih, s.w)), pad, kb.mul(kb.add(ih, s.pad[0]), row))
            _tiles_in(kb, k, s, var, pad, th, k.scratch, kb.add(v_off, kb.mul(c, t)), s.c * t)

    k.threads.runs(s.c, channels)


def _copy_row(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, src_at, plane, plane_at) -> None:
    """One input row into a padded plane row stored by phase."""
    dtype = k.node.inputs[0].dtype
    cols = min(s.w, plane_hw(s, var.m)[1] - s.pad[1])
    emit_deinterleaved_row_copy(kb, k.inputs[0], src_at, cols, plane, plane_at, s.pad[1], var.m,
                                phase_len(s, var.m), dtype, k.width(dtype))


def _tile_groups(kb: KernelBuilder, tw: int, lanes: int, body) -> None:
    """body(tj0, valid) for groups of `lanes` consecutive tiles of a tile row: a loop over
    the groups before the last (valid None), then the last, which holds the row's last
    (perhaps ragged) tile, with its number of tiles."""
    groups = -(-tw // lanes)
    if groups > 1:
        with kb.loop(0, (groups - 1) * lanes, lanes, name="tw") as tj0:
            body(tj0, None)
    body((groups - 1) * lanes, tw - (groups - 1) * lanes)


def _tiles_in(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, plane, rows: int,
              v, v_base, v_stride: int) -> None:
    """V = B^T d B for `rows` x tw tiles of a padded plane stored by phase; element xi of
    tile j goes to v[v_base + xi*v_stride + j]. Vectors run along tiles: tap (i, jj) of
    consecutive tiles is one contiguous load from phase jj % m of plane row m*ti + i."""
    dtype = k.node.inputs[0].dtype
    a, m = var.alpha, var.m
    tw = tiles(s, m)[1]
    row, phase, lanes = plane_row(s, m), phase_len(s, m), tile_lanes(s, m, k.target)
    e = Emit(kb, dtype, lanes)

    def group(ti, tj0, valid: int | None) -> None:
        mask = None if valid in (None, lanes) else kb.prefix_mask(lanes, valid)
        base = kb.add(kb.mul(ti, m * row), tj0)
        d = [[kb.vload(plane, dtype, kb.add(base, i * row + (jj % m) * phase + jj // m), lanes, mask)
              for jj in range(a)] for i in range(a)]
        rows_t = [[_combine(e, var.BT[r], [d[i][jj] for i in range(a)]) for jj in range(a)] for r in range(a)]
        at = kb.add(v_base, kb.add(kb.mul(ti, tw), tj0))
        for r in range(a):
            for col in range(a):
                kb.vstore(_combine(e, var.BT[col], rows_t[r]), v, dtype, kb.add(at, (r * a + col) * v_stride), mask)

    with kb.loop(0, rows, name="th") as ti:
        _tile_groups(kb, tw, lanes, lambda tj0, valid: group(ti, tj0, valid))


def _output_transform(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, bias, n, mm_ptr, mm_base,
                      t: int, tr0, count: int, last_height: int, oc_range, dtype, epilogue: Epilogue) -> None:
    """Y = A^T m A (+ bias, epilogue) for tile rows tr0 .. tr0+count, read from M at
    mm_ptr[mm_base + (xi*OC + oc)*t + tile]; the last tile row has `last_height` rows.

    Vectors run along tiles; the m vectors of an output row (one per column within the
    tile) are interleaved by shuffles into contiguous output, where the epilogue runs."""
    tw = tiles(s, var.m)[1]
    a, m = var.alpha, var.m
    lanes = tile_lanes(s, m, k.target)
    e = Emit(kb, dtype, lanes)
    pool = k.node.attrs.get("pool", 1)
    per_tile = m // pool  # output columns (and rows) per tile, after the fused pool
    out_h, out_w = s.oh // pool, s.ow // pool
    interleave = [ir.Constant(ir.VectorType(I32, lanes), [(q * lanes + i) % per_tile * lanes + (q * lanes + i) // per_tile
                                                        for i in range(lanes)]) for q in range(per_tile)]
    with kb.loop(*oc_range, name="oc") as oc:
        b0 = kb.splat(kb.load(bias, dtype, oc), lanes) if bias is not None else e.c(0.0)
        out_base = kb.mul(kb.add(kb.mul(n, s.oc), oc), out_h * out_w)

        def group(ti, tj0, valid: int | None, out_rows: int) -> None:
            mask = None if valid in (None, lanes) else kb.prefix_mask(lanes, valid)
            index = kb.add(kb.add(mm_base, kb.mul(oc, t)), kb.add(kb.mul(ti, tw), tj0))
            mm = [[kb.vload(mm_ptr, dtype, kb.add(index, (i * a + j) * s.oc * t), lanes, mask) for j in range(a)]
                  for i in range(a)]
            oh0 = kb.mul(kb.add(tr0, ti), per_tile)
            cols = None if valid is None else (s.ow - tj0 * m) // pool  # the last group's real outputs

            def tile_row(r: int) -> list:
                """Row r of the tiles' outputs: one vector per column of the tile."""
                row_r = [_combine(e, var.AT[r], [mm[i][j] for i in range(a)]) for j in range(a)]
                return [_combine(e, var.AT[col], row_r) for col in range(m)]

            for r in range(out_rows // pool):
                if pool == 1:
                    y = tile_row(r)
                else:  # the max of each 2x2 window, which lies inside one tile (m is even)
                    top, bottom = tile_row(2 * r), tile_row(2 * r + 1)
                    y = [combine(e, "max", combine(e, "max", top[2 * c], top[2 * c + 1]),
                                 combine(e, "max", bottom[2 * c], bottom[2 * c + 1])) for c in range(per_tile)]
                y = _concat(kb, [e.add(v, b0) for v in y])
                for q in range(per_tile):
                    live = lanes if cols is None else min(lanes, cols - q * lanes)
                    if live <= 0:
                        continue
                    out_mask = None if live == lanes else kb.prefix_mask(lanes, live)
                    p = kb.add(kb.mul(kb.add(oh0, r), out_w), kb.add(kb.mul(tj0, per_tile), q * lanes))
                    v = epilogue.apply(e, kb.b.shuffle_vector(y, y, interleave[q]), [n, oc, p], out_mask)
                    kb.vstore(v, k.outputs[0], dtype, kb.add(out_base, p), out_mask)

        def tile_row(ti, out_rows: int) -> None:
            _tile_groups(kb, tw, lanes, lambda tj0, valid: group(ti, tj0, valid, out_rows))

        with kb.loop(0, count - 1, name="th") as ti:
            tile_row(ti, m)
        tile_row(count - 1, last_height)


def _epilogue(k: KernelArgs, s: ConvShape) -> Epilogue:
    """The node's fused steps, on its (pooled, with a fused pool) outputs."""
    pool = k.node.attrs.get("pool", 1)
    return Epilogue(k.kb, k.node, k.epilogue, (s.n, s.oc, (s.oh // pool) * (s.ow // pool)))


def _concat(kb: KernelBuilder, vectors: list) -> ir.Value:
    """One vector of all lanes of `vectors` (equal widths, a power-of-two count), in order."""
    while len(vectors) > 1:
        width = vectors[0].type.count
        both = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        vectors = [kb.b.shuffle_vector(x, y, both) for x, y in zip(vectors[::2], vectors[1::2])]
    return vectors[0]


def _combine(e: Emit, coefs, values):
    """sum(coef * value), skipping zero coefficients and multiplications by ±1."""
    acc = None
    for coef, v in zip(coefs, values):
        if coef == 0:
            continue
        term = v if abs(coef) == 1 else e.mul(v, e.c(abs(coef)))
        if acc is None:
            acc = term if coef > 0 else e.neg(term)
        else:
            acc = e.add(acc, term) if coef > 0 else e.sub(acc, term)
    return acc if acc is not None else e.c(0.0)


def _banded(k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms) -> None:
    """Bands of tile rows, each carried through all phases while its V and M sit in L2.
    Threads take whole bands into their own scratch, so they never wait for each other."""
    kb, node, s = k.kb, k.node, plan.shape
    dtype = node.inputs[0].dtype
    m, a = var.m, var.alpha
    th, tw = tiles(s, m)
    rows = plan.band
    band, v_size, m_size, pack_size = plan.plane, plan.v, plan.mm, plan.pack
    per_thread = band + v_size + m_size + pack_size
    plane = k.thread_scratch(0, per_thread, dtype)
    v_blk = k.thread_scratch(band, per_thread, dtype)
    m_blk = k.thread_scratch(band + v_size, per_thread, dtype)
    pack = k.thread_scratch(band + v_size + m_size, per_thread, dtype) if pack_size else None
    emit_fill(kb, plane, dtype, 0, band, kb.const(dtype, 0))  # column padding stays zero
    epilogue = _epilogue(k, s)
    alone = k.threads.alone()
    bias = k.inputs[2] if len(k.inputs) > 2 else None

    def run_band(n, tr0, count: int, holds_last_row: bool) -> None:
        t_blk = count * tw
        _band_input(kb, k, s, var, n, tr0, count, plane, v_blk, t_blk, dtype)
        sched = gemms.schedule(s, m, t_blk, k.target)
        with kb.loop(0, a * a, name="xi") as xi:
            gemms.by_channel(kb, sched, s, k.inputs[1], xi, v_blk, kb.mul(xi, s.c * t_blk), m_blk,
                             kb.mul(xi, s.oc * t_blk), t_blk, alone, pack)
        last_height = s.oh - (th - 1) * m if holds_last_row else m
        _output_transform(kb, k, s, var, bias, n, m_blk, 0, t_blk, tr0, count, last_height, (0, s.oc),
                          dtype, epilogue)

    def band(n, tr0, count: int) -> None:
        if not s.oh % m:
            run_band(n, tr0, count, False)
            return
        with kb.b.if_else(kb.b.icmp_signed("<", kb.idx(kb.add(tr0, count)), kb.i64(th))) as (inner, final):
            with inner:
                run_band(n, tr0, count, False)
            with final:  # this band holds the ragged last tile row
                run_band(n, tr0, count, True)

    k.threads.bands(th, rows, band, images=s.n)


def _band_input(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, n, tr0, count: int,
                plane, v_blk, t_blk: int, dtype) -> None:
    """V for tile rows tr0 .. tr0+count of every channel, via a padded band of input rows."""
    m = var.m
    row = plane_row(s, m)
    b = kb.b
    with kb.loop(0, s.c, name="c") as c:
        src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
        with kb.loop(0, count * m + 2, name="br") as r:
            ih = b.sub(kb.idx(kb.add(kb.mul(tr0, m), r)), kb.i64(s.pad[0]))
            dst = kb.mul(r, row)
            inside = b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.i64(s.h)))
            with b.if_else(inside) as (copy, zero):
                with copy:
                    _copy_row(kb, k, s, var, kb.add(src, kb.mul(ih, s.w)), plane, dst)
                with zero:
                    emit_fill(kb, plane, dtype, 0, row, kb.const(dtype, 0), base=dst)
        _tiles_in(kb, k, s, var, plane, count, v_blk, kb.mul(c, t_blk), s.c * t_blk)


CPU.register("ConvWinograd", lower=lower_winograd)
