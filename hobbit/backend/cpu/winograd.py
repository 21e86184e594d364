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
vdpbf16ps for F(2x2) convs the bf16 pass gave bf16 weights, whose transforms stay float32.

With run-time height and width (hobbit.graph.extents; float32, no fused pool:
winograd_dynamic) the plan is the bound's (tile, GEMM orientation, bands or not) and the
lengths are read at entry (Lengths): input positions past them are padding like those past a
static edge (plane rows and columns are copied up to them, the rest of the plane cleared on
every call); the tiles over this inference's output are numbered compactly in V and M, whose
rows keep one compile-time stride (plan.stride), so the a*a GEMMs run over the run-time count
of tiles only; the output transform stores only inside the lengths (a run-time last tile row
height, masks at the right edge). Banded convs cut their run-time tile rows into bands by the
bound's rule computed at run time (_banded_runtime)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.target import Target
from hobbit.emit.builder import I32, KernelBuilder
from hobbit.graph.ir import Node
from hobbit.graph.shapes import view_strides
from hobbit.plan.conv import ConvShape
from hobbit.backend.cpu.copy import emit_deinterleaved_row_copy, emit_fill
from hobbit.backend.cpu.dpbf16 import rows_to_pairs
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MICROKERNELS, Index, MatA, MatB, MatC, ceil_units, emit_gemm, share_runtime
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.reduce import combine
from hobbit.emit.scalar import Emit
from hobbit.plan.format import FLOAT32, Format, node_format
from hobbit.plan.gemm import GemmSchedule
from hobbit.plan.winograd import (Variant, VARIANTS, WinogradPlan, band_budget, band_capacity, phase_len, plane_hw,
                                  plane_row, tile_gemm, tiles)


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
                   threads: Threads, pack, count: Index) -> None:
        """M[xi] (OC x count) = U[xi] @ V[xi] over `count` tiles, V and M row-major at v[v_at] and
        mm[m_at] with rows of t; A is U[xi]'s packed panels."""
        steps, rows = self.fmt.steps(s.c), sched.mr
        a = MatA(u, kb.mul(xi, -(-s.oc // rows) * steps * rows), panel=steps * rows, k=rows, m=1)
        b, c = MatB(v, v_at, k=t), MatC(mm, m_at, m=t)
        if isinstance(count, int):
            emit_gemm(kb, sched, s.oc, count, s.c, a, b, c, self.fmt, None, threads, pack)
        else:  # a run-time count of tiles (at most t)
            gemm = MICROKERNELS[self.fmt.micro](kb, sched, s.oc, count, s.c, a, b, c, self.fmt, None, pack, None)
            share_runtime(gemm, threads, (s.oc, t, steps))

    def by_tile(self, kb: KernelBuilder, sched: GemmSchedule, s: ConvShape, u, xi, scratch, v_at, m_at, t: int,
                threads: Threads, count: Index) -> None:
        """M^T (count x OC) = V^T (count x C) @ U^T over `count` tiles, rows of t apart: B is U's
        panels, C is M written with strides."""
        steps = self.fmt.steps(s.c)
        if self.fmt.converts:
            rows_to_pairs(kb, scratch, v_at, s.c, t, kb.gep(scratch, self.dtype, v_at), threads)
        a = MatA(scratch, v_at, panel=sched.mr, k=t, m=1)
        b = MatB(u, kb.mul(xi, steps * s.oc), k=sched.nr, panel=steps * sched.nr)
        c = MatC(scratch, m_at, m=1, n=t)
        if isinstance(count, int):
            emit_gemm(kb, sched, count, s.oc, s.c, a, b, c, self.fmt, None, threads)
        else:  # a run-time count of tiles (at most t)
            gemm = MICROKERNELS[self.fmt.micro](kb, sched, count, s.oc, s.c, a, b, c, self.fmt, None, None, None)
            share_runtime(gemm, threads, (t, s.oc, steps))


@dataclass(frozen=True)
class Lengths:
    """A ConvWinograd's spatial lengths in this inference: its input's rows and columns, its
    output's, and its tile rows and columns; ints where static, i64 values along run-time
    dims (hobbit.graph.extents). Planes, V and M keep the bound's layout whatever the lengths."""
    h: Index
    w: Index
    oh: Index
    ow: Index
    th: Index
    tw: Index

    @staticmethod
    def of(k: KernelArgs, s: ConvShape, m: int) -> "Lengths":
        x, y = k.node.inputs[0], k.node.outputs[0]
        if x.extents is None and y.extents is None:
            return Lengths(s.h, s.w, s.oh, s.ow, *tiles(s, m))
        kb = k.kb
        oh, ow = k.extent(y, 2), k.extent(y, 3)
        return Lengths(k.extent(x, 2), k.extent(x, 3), oh, ow, ceil_units(kb, oh, m), ceil_units(kb, ow, m))

    @property
    def static(self) -> bool:
        return all(isinstance(v, int) for v in (self.h, self.w, self.oh, self.ow))

    def plane_rows(self, kb: KernelBuilder, s: ConvShape, m: int) -> Index:
        """Input rows the tiles read (a plane holds them from row pad_top)."""
        return kb.imin(self.h, kb.add(kb.mul(self.th, m), 2 - s.pad[0]))

    def plane_cols(self, kb: KernelBuilder, s: ConvShape, m: int) -> Index:
        """Input columns the tiles read."""
        return kb.imin(self.w, kb.add(kb.mul(self.tw, m), 2 - s.pad[1]))


def lower_winograd(k: KernelArgs) -> None:
    plan: WinogradPlan = k.plan
    var = VARIANTS[plan.m]
    gemms = TileGemms(plan.format, k.node.inputs[0].dtype)
    size = Lengths.of(k, plan.shape, plan.m)
    if plan.band and size.static:
        _banded(k, plan, var, gemms, size)
    elif plan.band:
        _banded_runtime(k, plan, var, gemms, size)
    else:
        _whole_image(k, plan, var, gemms, size)


def _whole_image(k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms, size: Lengths) -> None:
    """All tiles at once, in three phases shared out in claimed runs (Threads.runs): the
    input transform by channels, then whole GEMMs (one per xi, claimed one at a time: a
    thread reads only its own GEMMs' V and U), then the output transform by output channels."""
    kb, node, s, sched = k.kb, k.node, plan.shape, plan.gemm
    dtype = node.inputs[0].dtype
    u, bias = k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    t = plan.stride  # between V's and M's rows, whose first `count` tiles are computed
    count = kb.mul(size.th, size.tw)
    v_off, m_off = plan.v_off, plan.m_off
    pack = k.thread_scratch(plan.pack_off, plan.pack, dtype) if plan.pack else None
    by_tile = plan.by_tile
    epilogue = _epilogue(k, s)
    alone = k.threads.alone()

    def gemm(xi) -> None:
        v_at, m_at = kb.add(v_off, kb.mul(xi, s.c * t)), kb.add(m_off, kb.mul(xi, s.oc * t))
        if by_tile:
            gemms.by_tile(kb, sched, s, u, xi, k.scratch, v_at, m_at, t, alone, count)
        else:
            gemms.by_channel(kb, sched, s, u, xi, k.scratch, v_at, k.scratch, m_at, t, alone, pack, count)

    def gemm_range(lo, hi) -> None:
        with kb.loop(lo, hi, name="xi") as xi:
            gemm(xi)

    last_height = _last_height(kb, size.oh, size.th, var.m)
    with kb.loop(0, s.n, name="n") as n:
        _input_transform(kb, k, s, var, n, v_off, t, dtype, size)
        k.threads.sync()
        k.threads.runs(var.alpha ** 2, gemm_range, per_thread=var.alpha ** 2)
        k.threads.sync()
        k.threads.runs(s.oc, lambda lo, hi: _output_transform(
            kb, k, s, var, bias, n, k.scratch, m_off, t, 0, size.th, last_height, (lo, hi), dtype, epilogue, size))
        if s.n > 1:
            k.threads.sync()  # the next image's GEMMs overwrite the M this output transform reads


def _input_transform(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, n, v_off: int, t: int,
                     dtype, size: Lengths) -> None:
    """V of image n (rows t apart) from each channel's padded plane."""
    row = plane_row(s, var.m)
    pad = k.thread_scratch(0, plane_hw(s, var.m)[0] * row, dtype)
    # The border stays zero for every channel (and with run-time lengths, every cell past them,
    # whatever a larger inference left: only the rows the tiles read are cleared).
    emit_fill(kb, pad, dtype, 0, kb.mul(kb.add(kb.mul(size.th, var.m), 2), row), kb.const(dtype, 0))
    rows, cols = size.plane_rows(kb, s, var.m), size.plane_cols(kb, s, var.m)

    def channels(c_lo, c_hi) -> None:
        with kb.loop(c_lo, c_hi, name="c") as c:
            src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            with kb.loop(0, rows, name="ih") as ih:
                _copy_row(kb, k, s, var, kb.add(src, kb.mul(ih, s.w)), pad, kb.mul(kb.add(ih, s.pad[0]), row), cols)
            _tiles_in(kb, k, s, var, pad, size.th, k.scratch, kb.add(v_off, kb.mul(c, t)), s.c * t, size.tw)

    k.threads.runs(s.c, channels)


def _copy_row(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, src_at, plane, plane_at,
              cols: Index) -> None:
    """The first `cols` elements of an input row into a padded plane row stored by phase."""
    dtype = k.node.inputs[0].dtype
    emit_deinterleaved_row_copy(kb, k.inputs[0], src_at, cols, plane, plane_at, s.pad[1], var.m,
                                phase_len(s, var.m), dtype, k.width(dtype))


def _tile_groups(kb: KernelBuilder, tw: Index, lanes: int, body) -> None:
    """body(tj0, valid) for groups of `lanes` consecutive tiles of a tile row: a loop over
    the groups before the last (valid None), then the last, which holds the row's last
    (perhaps ragged) tile, with its number of tiles (1 .. lanes; at run time for a run-time tw)."""
    if not isinstance(tw, int):
        b = kb.b
        last = b.mul(b.udiv(b.sub(tw, kb.i64(1)), kb.i64(lanes)), kb.i64(lanes))
        with kb.loop(0, last, lanes, name="tw") as tj0:
            body(tj0, None)
        body(last, b.sub(tw, last))
        return
    groups = -(-tw // lanes)
    if groups > 1:
        with kb.loop(0, (groups - 1) * lanes, lanes, name="tw") as tj0:
            body(tj0, None)
    body((groups - 1) * lanes, tw - (groups - 1) * lanes)


def _group_mask(kb: KernelBuilder, lanes: int, valid: Index | None):
    """The mask of a group of `valid` tiles (None: all `lanes`)."""
    if valid is None or (isinstance(valid, int) and valid == lanes):
        return None
    return kb.prefix_mask(lanes, valid) if isinstance(valid, int) else kb.runtime_prefix_mask(lanes, valid)


def _tiles_in(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, plane, rows: Index,
              v, v_base, v_stride: int, tw: Index) -> None:
    """V = B^T d B for `rows` x tw tiles of a padded plane stored by phase; element xi of
    tile j goes to v[v_base + xi*v_stride + j]. Vectors run along tiles: tap (i, jj) of
    consecutive tiles is one contiguous load from phase jj % m of plane row m*ti + i."""
    dtype = k.node.inputs[0].dtype
    a, m = var.alpha, var.m
    row, phase, lanes = plane_row(s, m), phase_len(s, m), tile_lanes(s, m, k.target)
    e = Emit(kb, dtype, lanes)

    def group(ti, tj0, valid: Index | None) -> None:
        mask = _group_mask(kb, lanes, valid)
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
                      t: int, tr0, count: Index, last_height: Index, oc_range, dtype, epilogue: Epilogue,
                      size: Lengths) -> None:
    """Y = A^T m A (+ bias, epilogue) for tile rows tr0 .. tr0+count, read from M at
    mm_ptr[mm_base + (xi*OC + oc)*t + tile]; the last tile row has `last_height` rows.

    Vectors run along tiles; the m vectors of an output row (one per column within the
    tile) are interleaved by shuffles into contiguous output, where the epilogue runs.
    Only outputs inside size's lengths are stored (run-time ones: masks and rows known at
    run time)."""
    tw = size.tw
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

        def group(ti, tj0, valid: Index | None, out_rows: Index) -> None:
            mask = _group_mask(kb, lanes, valid)
            index = kb.add(kb.add(mm_base, kb.mul(oc, t)), kb.add(kb.mul(ti, tw), tj0))
            mm = [[kb.vload(mm_ptr, dtype, kb.add(index, (i * a + j) * s.oc * t), lanes, mask) for j in range(a)]
                  for i in range(a)]
            oh0 = kb.mul(kb.add(tr0, ti), per_tile)
            cols = None if valid is None else _sub(kb, size.ow, kb.mul(tj0, m))  # the last group's real outputs
            if isinstance(cols, int):
                cols //= pool

            def tile_row(r: int) -> list:
                """Row r of the tiles' outputs: one vector per column of the tile."""
                row_r = [_combine(e, var.AT[r], [mm[i][j] for i in range(a)]) for j in range(a)]
                return [_combine(e, var.AT[col], row_r) for col in range(m)]

            for r in range(out_rows // pool) if isinstance(out_rows, int) else range(m):
                with kb.when_greater(out_rows, r):  # (a run-time last tile row: the rows it has)
                    if pool == 1:
                        y = tile_row(r)
                    else:  # the max of each 2x2 window, which lies inside one tile (m is even)
                        top, bottom = tile_row(2 * r), tile_row(2 * r + 1)
                        y = [combine(e, "max", combine(e, "max", top[2 * c], top[2 * c + 1]),
                                     combine(e, "max", bottom[2 * c], bottom[2 * c + 1])) for c in range(per_tile)]
                    y = _concat(kb, [e.add(v, b0) for v in y])
                    for q in range(per_tile):
                        if isinstance(cols, ir.Value):
                            out_mask = _below(kb, lanes, q * lanes, cols)
                        else:
                            live = lanes if cols is None else min(lanes, cols - q * lanes)
                            if live <= 0:
                                continue
                            out_mask = None if live == lanes else kb.prefix_mask(lanes, live)
                        p = kb.add(kb.mul(kb.add(oh0, r), out_w), kb.add(kb.mul(tj0, per_tile), q * lanes))
                        v = epilogue.apply(e, kb.b.shuffle_vector(y, y, interleave[q]), [n, oc, p], out_mask)
                        kb.vstore(v, k.outputs[0], dtype, kb.add(out_base, p), out_mask)

        def tile_row(ti, out_rows: Index) -> None:
            _tile_groups(kb, tw, lanes, lambda tj0, valid: group(ti, tj0, valid, out_rows))

        with kb.loop(0, kb.add(count, -1), name="th") as ti:
            tile_row(ti, m)
        tile_row(kb.add(count, -1), last_height)


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


def _banded(k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms, size: Lengths) -> None:
    """Bands of tile rows, each carried through all phases while its V and M sit in L2.
    Threads take whole bands into their own scratch, so they never wait for each other."""
    kb, s = k.kb, plan.shape
    m = var.m
    th, tw = tiles(s, m)
    band = _Band(k, plan, var, gemms, size)

    def run_band(n, tr0, count: int, holds_last_row: bool) -> None:
        t_blk = count * tw
        band.run(n, tr0, count, t_blk, gemms.schedule(s, m, t_blk, k.target),
                 s.oh - (th - 1) * m if holds_last_row else m)

    def one(n, tr0, count: int) -> None:
        if not s.oh % m:
            run_band(n, tr0, count, False)
            return
        with kb.b.if_else(kb.b.icmp_signed("<", kb.idx(kb.add(tr0, count)), kb.i64(th))) as (inner, final):
            with inner:
                run_band(n, tr0, count, False)
            with final:  # this band holds the ragged last tile row
                run_band(n, tr0, count, True)

    k.threads.bands(th, plan.band, one, images=s.n)


def _banded_runtime(k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms, size: Lengths) -> None:
    """_banded for run-time lengths, cut as Threads.bands cuts the static rows: the tile rows
    in one share per thread (balanced to within one row), each share in bands of the height
    the bound's rule (band_height) gives at this inference's tiles or one less (the taller
    first), all computed at run time. Each share has as many units as the largest share has
    bands (a smaller share's last may be empty), claimed in runs (Threads.runs: a share's
    units are its thread's own first); each band's GEMMs run over its tiles, V and M laid
    out for plan.stride tiles a band."""
    kb, b, s = k.kb, k.kb.b, plan.shape
    m, shares = var.m, plan.threads
    t_blk = plan.stride
    sched = gemms.schedule(s, m, band_capacity(s, m, k.target, plan.threads)[1], k.target)
    band = _Band(k, plan, var, gemms, size)
    th, tw = kb.idx(size.th), kb.idx(size.tw)
    most, least = band_budget(s, m, k.target)
    rows = _imax(kb, _imax(kb, kb.i64(1), b.udiv(kb.i64(most), tw)), b.udiv(b.add(kb.i64(least - 1), tw), tw))
    rows = kb.imin(rows, ceil_units(kb, th, shares))
    per_share = _ceil_div(kb, ceil_units(kb, th, shares), rows)  # units per share: the largest share's bands
    per_image = kb.mul(per_share, shares)

    def one(n, unit) -> None:
        """Band `unit % per_share` of share `unit // per_share` of image n, if it has one."""
        v, j = (0, unit) if shares == 1 else (b.udiv(unit, per_share), b.urem(unit, per_share))
        lo = b.udiv(kb.idx(kb.mul(v, th)), kb.i64(shares))
        share = b.sub(b.udiv(b.mul(kb.idx(kb.add(v, 1)), th), kb.i64(shares)), lo)
        count = _ceil_div(kb, share, rows)  # this share's bands (none in an empty share)
        with kb.if_then(b.icmp_unsigned("<", j, count)):
            small = b.udiv(share, count)
            big = b.sub(share, b.mul(small, count))  # bands one row taller than `small`
            tr0 = b.add(lo, b.add(b.mul(j, small), kb.imin(j, big)))
            height = b.add(small, b.zext(b.icmp_unsigned("<", j, big), ir.IntType(64)))
            last = b.sub(b.add(tr0, height), kb.i64(1))  # the band's last tile row, and its output rows:
            out_rows = kb.imin(m, b.sub(kb.idx(size.oh), b.mul(last, kb.i64(m))))
            band.run(n, tr0, height, t_blk, sched, out_rows)

    def run(lo, hi) -> None:
        with kb.loop(lo, hi, name="band") as unit:
            if s.n == 1:
                one(0, unit)
            else:
                one(b.udiv(unit, per_image), b.urem(unit, per_image))

    k.threads.runs(kb.mul(s.n, per_image), run)


class _Band:
    """One band of tile rows through every phase, in this thread's scratch (plane, V, M and
    packing buffer, planned by WinogradPlan)."""

    def __init__(self, k: KernelArgs, plan: WinogradPlan, var: Variant, gemms: TileGemms, size: Lengths):
        kb, s, dtype = k.kb, plan.shape, k.node.inputs[0].dtype
        self.k, self.s, self.var, self.gemms, self.size, self.dtype = k, s, var, gemms, size, dtype
        band, v_size, m_size, pack_size = plan.plane, plan.v, plan.mm, plan.pack
        per_thread = band + v_size + m_size + pack_size
        self.plane = k.thread_scratch(0, per_thread, dtype)
        self.v = k.thread_scratch(band, per_thread, dtype)
        self.mm = k.thread_scratch(band + v_size, per_thread, dtype)
        self.pack = k.thread_scratch(band + v_size + m_size, per_thread, dtype) if pack_size else None
        # Column padding stays zero (and with a run-time width, every column past it: a
        # band's rows are copied only up to this inference's width).
        emit_fill(kb, self.plane, dtype, 0, band, kb.const(dtype, 0))
        self.epilogue = _epilogue(k, s)
        self.alone = k.threads.alone()
        self.bias = k.inputs[2] if len(k.inputs) > 2 else None
        self.cols = size.plane_cols(kb, s, var.m)

    def run(self, n, tr0, count: Index, t_blk: int, sched: GemmSchedule, last_height: Index) -> None:
        """Tile rows tr0 .. tr0+count of image n, V's and M's rows t_blk apart; the last tile
        row has `last_height` output rows."""
        k, kb, s, var, size = self.k, self.k.kb, self.s, self.var, self.size
        a = var.alpha
        _band_input(kb, k, s, var, n, tr0, count, self.plane, self.v, t_blk, self.dtype, size, self.cols)
        tiles_now = kb.mul(count, size.tw)
        with kb.loop(0, a * a, name="xi") as xi:
            self.gemms.by_channel(kb, sched, s, k.inputs[1], xi, self.v, kb.mul(xi, s.c * t_blk), self.mm,
                                  kb.mul(xi, s.oc * t_blk), t_blk, self.alone, self.pack, tiles_now)
        _output_transform(kb, k, s, var, self.bias, n, self.mm, 0, t_blk, tr0, count, last_height, (0, s.oc),
                          self.dtype, self.epilogue, size)


def _band_input(kb: KernelBuilder, k: KernelArgs, s: ConvShape, var: Variant, n, tr0, count: Index,
                plane, v_blk, t_blk: int, dtype, size: Lengths, cols: Index) -> None:
    """V for tile rows tr0 .. tr0+count of every channel, via a padded band of input rows
    (rows past the input's height are padding); V's rows t_blk apart."""
    m = var.m
    row = plane_row(s, m)
    b = kb.b
    with kb.loop(0, s.c, name="c") as c:
        src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
        with kb.loop(0, kb.add(kb.mul(count, m), 2), name="br") as r:
            ih = b.sub(kb.idx(kb.add(kb.mul(tr0, m), r)), kb.i64(s.pad[0]))
            dst = kb.mul(r, row)
            inside = b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.idx(size.h)))
            with b.if_else(inside) as (copy, zero):
                with copy:
                    _copy_row(kb, k, s, var, kb.add(src, kb.mul(ih, s.w)), plane, dst, cols)
                with zero:
                    emit_fill(kb, plane, dtype, 0, row, kb.const(dtype, 0), base=dst)
        _tiles_in(kb, k, s, var, plane, count, v_blk, kb.mul(c, t_blk), s.c * t_blk, size.tw)


def winograd_dynamic(node: Node) -> str | None:
    """None where the kernel follows this node's run-time dims: float32 GEMMs, run-time height
    and width (batch and channels static), no fused pool, and fused epilogue operands whose
    run-time dims are the output's, read contiguously along its rows (a residual) or broadcast."""
    if node.attrs.get("pool", 1) != 1:
        return "its fused pool runs at static shapes only"
    x, y = node.inputs[0], node.outputs[0]
    fmt = node_format(node)
    if fmt.micro != "fma" or np.dtype(x.dtype) != FLOAT32:
        return f"its {fmt.name} GEMMs run at static shapes only (run-time dims: float32)"
    for v in (x, y):
        if any(e is not None for e in (v.extents or (None, None))[:2]):
            return f"'{v.name}' has a run-time batch or channel dim (run-time dims: height and width only)"
    ext = y.extents or (None,) * 4
    n, oc, oh, ow = y.shape
    for step in node.epilogue:
        v = step.operand
        if v is None or v.extents is None:
            continue
        offset = 4 - len(v.shape)
        for axis, extent in enumerate(v.extents):
            if extent is not None and ext[offset + axis] != extent:
                return f"epilogue operand '{v.name}' has a run-time dim {axis} the output does not share"
        strides = view_strides(v.shape, y.shape, (n, oc, oh * ow))
        if strides is None or strides[-1] not in (0, 1):
            return f"epilogue operand '{v.name}' is read with strides along the output's rows"
    return None


def _last_height(kb: KernelBuilder, oh: Index, th: Index, m: int) -> Index:
    """The output rows of the last of th tile rows over oh rows."""
    return _sub(kb, oh, kb.mul(kb.add(th, -1), m))


def _ceil_div(kb: KernelBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """ceil(a / b) for run-time a >= 0 and b >= 1."""
    return kb.b.udiv(kb.b.add(a, kb.b.sub(b, kb.i64(1))), b)


def _imax(kb: KernelBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed(">", a, b), a, b)


def _sub(kb: KernelBuilder, a: Index, b: Index) -> Index:
    return a - b if isinstance(a, int) and isinstance(b, int) else kb.b.sub(kb.idx(a), kb.idx(b))


def _below(kb: KernelBuilder, lanes: int, first: int, count: ir.Value) -> ir.Value:
    """The mask of lanes i with first + i < count (count known at run time)."""
    at = ir.Constant(ir.VectorType(ir.IntType(64), lanes), [first + i for i in range(lanes)])
    return kb.b.icmp_signed("<", at, kb.splat(count, lanes))


CPU.register("ConvWinograd", lower=lower_winograd, dynamic=winograd_dynamic)
