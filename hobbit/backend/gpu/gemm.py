"""Conv (implicit GEMM) and MatMul on the GPU: one tiled GEMM kernel, shared memory and
register blocking, tiles from hobbit/plan/gpu/gemm.py.

Block (x, y, z) computes C[y*BM:(y+1)*BM, x*BN:(x+1)*BN] of GEMM z (a conv's group, a
matmul's batch entry). Per K step of BK, two phases: the block stores the A tile
(transposed, one column of padding against bank conflicts) and the B tile from its
threads' staging registers into shared memory; then each thread issues the global loads
of the next step's tiles into its staging registers and adds the rank-BK product into
its TM x TN accumulators, so the loads' latency hides behind the multiply even with one
block per SM (batch-1 layers have few blocks). Tiles are zero outside M, N and K, so
ragged edges need no other case. Python loops over the micro-tile keep its indices
constant, so the private accumulators and staging arrays become registers.

A thread owns rows ty + i*(BM/TM) and columns tx + j*(BN/TN) (strided, not a block of
TM x TN): for a fixed (i, j) a warp reads consecutive words of B's tile (no bank
conflicts) and one or two of A's (broadcast), and stores consecutive outputs
(coalesced).

A conv's B is never materialised: B[k, n] is the input at channel k // (KH*KW) and
kernel offset k % (KH*KW) of output pixel n, or zero in the padding. Each thread loads
a single column of each B tile, so the pixel's image offset and top-left corner are
computed once, before the K loop, and kept in private registers.

The operands, staging and K loop (begin, k_steps) serve the tensor-core kernel as well
(hobbit/backend/gpu/mma.py), which replaces only the multiply and the accumulators' layout."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.graph.shapes import broadcast, broadcast_strides
from hobbit.backend.gpu.elementwise import unflatten
from hobbit.backend.gpu.args import GpuArgs
from hobbit.backend.gpu.simt import Private
from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.emit.epilogue import Epilogue
from hobbit.emit.scalar import Emit
from hobbit.ops.nn import matmul_b_shape, weight_shape
from hobbit.ops.registry import get_op
from hobbit.plan.gpu.gemm import GemmDims, Tile
from hobbit.plan.gpu.mma import MmaTile

F32 = np.dtype(np.float32)
OUTSIDE = -(1 << 40)  # a row coordinate no kernel offset brings back into the image


@dataclass
class Operands:
    """What differs between Conv and MatMul around the shared GEMM loop."""

    a: ir.Value
    a_base: int | ir.Value  # A's offset for this block's GEMM (uniform)
    b: ir.Value
    column: Callable[[ir.Value], list[ir.Value]]  # B column n -> per-thread values kept across K
    n_column: int  # how many values `column` returns
    b_offset: Callable[[ir.Value, list[ir.Value]], tuple[ir.Value, ir.Value]]  # k, column -> (valid, offset)
    store: Callable[[ir.Value, ir.Value, ir.Value], None]  # row m, column n, accumulated value


def _urem(kb: KernelBuilder, a: ir.Value, d: int) -> int | ir.Value:
    return 0 if d == 1 else kb.b.urem(a, kb.i64(d))


def _below(kb: KernelBuilder, a: ir.Value, bound: int) -> ir.Value:
    """0 <= a < bound (one unsigned compare)."""
    return kb.b.icmp_unsigned("<", kb.idx(a), kb.i64(bound))


def _load_or_zero(kb: KernelBuilder, ptr: ir.Value, valid: ir.Value, offset: int | ir.Value) -> ir.Value:
    """ptr[offset] where valid, else 0, without a branch: the load reads element 0 instead."""
    safe = kb.b.select(valid, kb.idx(offset), kb.i64(0))
    return kb.b.select(valid, kb.load(ptr, F32, safe), kb.const(F32, 0.0))


def conv_operands(k: GpuArgs, dims: GemmDims) -> Operands:
    kb, node = k.kb, k.node
    if node.attrs.get("weight_layout", "OIHW") != "OIHW":
        raise CodegenError("the GPU conv reads OIHW weights (the GPU pipeline keeps them so)")
    _, c, h, w = node.inputs[0].shape
    oc, cg, kh, kw = weight_shape(node)
    _, _, oh, ow = node.outputs[0].shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = node.attrs["strides"], node.attrs["dilations"], node.attrs["pads"]
    group = k.simt.block(2)
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    epilogue = Epilogue(kb, node, k.epilogue, get_op("Conv").epilogue_view(node))
    ohw = oh * ow

    def column(n: ir.Value) -> list[ir.Value]:
        image, pixel = kb.udiv(n, ohw), _urem(kb, n, ohw)
        row, col = kb.udiv(pixel, ow), _urem(kb, pixel, ow)
        base = kb.affine([(image, c * h * w), (group, cg * h * w)])
        top = kb.add(kb.mul(row, sh), -pt)
        inside = _below(kb, n, dims.n)
        return [kb.idx(base), kb.b.select(inside, kb.idx(top), kb.i64(OUTSIDE)), kb.idx(kb.add(kb.mul(col, sw), -pl))]

    def b_offset(kidx: ir.Value, cols: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
        base, top, left = cols
        channel, tap = kb.udiv(kidx, kh * kw), _urem(kb, kidx, kh * kw)
        y = kb.add(top, kb.mul(kb.udiv(tap, kw), dh))
        x = kb.add(left, kb.mul(_urem(kb, tap, kw), dw))
        valid = kb.b.and_(kb.b.and_(_below(kb, kidx, dims.k), _below(kb, y, h)), _below(kb, x, w))
        return valid, kb.affine([(base, 1), (channel, h * w), (y, w), (x, 1)])

    def store(m: ir.Value, n: ir.Value, x: ir.Value) -> None:
        channel = kb.add(kb.mul(group, dims.m), m)
        if bias is not None:
            x = kb.b.fadd(x, kb.load(bias, F32, channel))
        image, pixel = kb.udiv(n, ohw), _urem(kb, n, ohw)
        x = epilogue.apply(Emit(kb, F32, 1), x, [image, channel, pixel])
        kb.store(x, k.outputs[0], F32, kb.affine([(image, oc * ohw), (channel, ohw), (pixel, 1)]))

    return Operands(k.inputs[1], kb.mul(group, dims.m * dims.k), k.inputs[0], column, 3, b_offset, store)


def matmul_operands(k: GpuArgs, dims: GemmDims) -> Operands:
    kb, node = k.kb, k.node
    if node.attrs.get("b_layout", "KN") != "KN":
        raise CodegenError("the GPU matmul reads B as [..., K, N] (the GPU pipeline keeps it so)")
    a_shape, b_shape = tuple(node.inputs[0].shape), matmul_b_shape(node)
    batch = broadcast(a_shape[:-2], b_shape[:-2])
    index = unflatten(kb, k.simt.block(2), batch) if batch else []
    a_strides = [s * dims.m * dims.k for s in broadcast_strides(a_shape[:-2], batch)]
    b_strides = [s * dims.k * dims.n for s in broadcast_strides(b_shape[:-2], batch)]
    epilogue = Epilogue(kb, node, k.epilogue, get_op("MatMul").epilogue_view(node))
    c_base = kb.affine([(i, s * dims.m * dims.n) for i, s in zip(index, broadcast_strides(batch, batch))])
    b_base = kb.affine(list(zip(index, b_strides)))

    def column(n: ir.Value) -> list[ir.Value]:
        return [n]

    def b_offset(kidx: ir.Value, cols: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
        n = cols[0]
        valid = kb.b.and_(_below(kb, kidx, dims.k), _below(kb, n, dims.n))
        return valid, kb.add(b_base, kb.add(kb.mul(kidx, dims.n), n))

    def store(m: ir.Value, n: ir.Value, x: ir.Value) -> None:
        x = epilogue.apply(Emit(kb, F32, 1), x, index + [m, n])
        kb.store(x, k.outputs[0], F32, kb.add(c_base, kb.add(kb.mul(m, dims.n), n)))

    return Operands(k.inputs[0], kb.affine(list(zip(index, a_strides))), k.inputs[1], column, 1, b_offset, store)


def fma(kb: KernelBuilder, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    return kb.call_intrinsic("llvm.fma.f32", llvm_type(F32), [a, b, c])


@dataclass
class Shapes:
    """The block's tile, staged arrays and origin, shared by the emitters of its phases.
    Element (m, k) of the A tile is at m * a_m + k * a_k, (k, n) of the B tile at
    k * ldb + n: the SIMT multiply reads A transposed, the tensor-core fragments row-major
    (hobbit.backend.gpu.mma), each padded against bank conflicts."""

    t: Tile | MmaTile
    dims: GemmDims
    a_tile: ir.Value
    b_tile: ir.Value
    m0: ir.Value
    n0: ir.Value
    a_m: int
    a_k: int
    ldb: int
    to_shared: Callable[[KernelBuilder, ir.Value], ir.Value] | None = None  # rounds operands as they are staged

    @property
    def tile_threads(self) -> int:
        """Threads of one K group: one per micro-tile."""
        return (self.t.bm // self.t.tm) * (self.t.bn // self.t.tn)


def _owner(kb: KernelBuilder, s: Shapes, tid: ir.Value) -> tuple[int | ir.Value, ir.Value, ir.Value, ir.Value]:
    """(K group, index within the group, micro-tile row, micro-tile column) of thread `tid`."""
    t = s.t
    group = kb.b.udiv(tid, kb.i64(s.tile_threads)) if t.ks > 1 else 0
    within = _urem(kb, tid, s.tile_threads) if t.ks > 1 else tid
    return group, within, kb.b.udiv(within, kb.i64(t.bn // t.tn)), _urem(kb, within, t.bn // t.tn)


def _a_element(kb: KernelBuilder, s: Shapes, e: int | ir.Value) -> tuple[ir.Value, int | ir.Value]:
    """(row, k) in the A tile of element e: the tile is read row-major, BM x BK, so a warp
    reads runs of BK consecutive weights."""
    return kb.b.udiv(kb.idx(e), kb.i64(s.t.bk)), _urem(kb, kb.idx(e), s.t.bk)


def _b_element(kb: KernelBuilder, s: Shapes, tid: ir.Value, i: int) -> tuple[ir.Value, int | ir.Value]:
    """(k, column) in the B tile of this thread's element i: its column is the same for
    every i (threads is a multiple of BN), a warp reads consecutive columns."""
    t = s.t
    return kb.add(kb.b.udiv(tid, kb.i64(t.bn)), i * (t.threads // t.bn)), _urem(kb, tid, t.bn)


def _a_elements(kb: KernelBuilder, s: Shapes, tid: ir.Value):
    """(i, e, guard) for each A element this thread moves; guard: the tile has fewer
    elements than threads * count, so e may be past its end."""
    count = s.t.bm * s.t.bk
    for i in range(-(-count // s.t.threads)):
        e = kb.add(tid, i * s.t.threads)
        yield i, e, kb.if_then(_below(kb, e, count)) if count % s.t.threads else nullcontext()


def _fetch(kb: KernelBuilder, s: Shapes, ops: Operands, cols, staged, k0: ir.Value, tid: ir.Value) -> None:
    """This thread's elements of the A and B tiles at K offset k0, into its staging registers
    (zero outside M, N, K); they are stored to shared memory in the next step's first phase,
    so the loads are in flight during this step's multiply."""
    stage_a, stage_b = staged
    for i, e, guard in _a_elements(kb, s, tid):
        with guard:
            mm, kk = _a_element(kb, s, e)
            m, kidx = kb.add(s.m0, mm), kb.add(k0, kk)
            valid = kb.b.and_(_below(kb, m, s.dims.m), _below(kb, kidx, s.dims.k))
            stage_a.store(_load_or_zero(kb, ops.a, valid, kb.affine([(ops.a_base, 1), (m, s.dims.k), (kidx, 1)])), i)
    column = [cols.load(q) for q in range(ops.n_column)]
    for i in range(stage_b.count):
        kk, _ = _b_element(kb, s, tid, i)
        valid, offset = ops.b_offset(kb.add(k0, kk), column)
        stage_b.store(_load_or_zero(kb, ops.b, valid, offset), i)


def _stash(kb: KernelBuilder, s: Shapes, staged, tid: ir.Value) -> None:
    """The staging registers into the shared tiles: A transposed ([BK][BM + 1]), B as is."""
    stage_a, stage_b = staged
    for i, e, guard in _a_elements(kb, s, tid):
        with guard:
            mm, kk = _a_element(kb, s, e)
            kb.store(_staged(kb, s, stage_a.load(i)), s.a_tile, F32, kb.affine([(kk, s.a_k), (mm, s.a_m)]))
    for i in range(stage_b.count):
        kk, nn = _b_element(kb, s, tid, i)
        kb.store(_staged(kb, s, stage_b.load(i)), s.b_tile, F32, kb.affine([(kk, s.ldb), (nn, 1)]))


def _staged(kb: KernelBuilder, s: Shapes, x: ir.Value) -> ir.Value:
    return s.to_shared(kb, x) if s.to_shared is not None else x


def _multiply(kb: KernelBuilder, s: Shapes, acc, tid: ir.Value) -> None:
    """acc += this thread's share of A_tile^T B_tile: every KS-th k row from its group's."""
    t = s.t
    group, _, ty, tx = _owner(kb, s, tid)
    sums = [acc.load(q) for q in range(t.tm * t.tn)]
    for step in range(t.bk // t.ks):
        kk = kb.add(step * t.ks, group)
        a = [kb.load(s.a_tile, F32, kb.affine([(kk, s.a_k), (ty, 1)], i * (t.bm // t.tm))) for i in range(t.tm)]
        b = [kb.load(s.b_tile, F32, kb.affine([(kk, s.ldb), (tx, 1)], j * (t.bn // t.tn))) for j in range(t.tn)]
        sums = [fma(kb, a[q // t.tn], b[q % t.tn], sums[q]) for q in range(t.tm * t.tn)]
    for q, v in enumerate(sums):
        acc.store(v, q)


def begin(k: GpuArgs, s: Shapes, ops: Operands, acc: Private) -> tuple[Private, tuple[Private, Private]]:
    """Zero accumulators, each thread's B column (kept across K) and the first K step's
    tiles in its staging registers: (column, staged)."""
    kb, simt, t = k.kb, k.simt, s.t
    cols = simt.private(np.dtype(np.int64), ops.n_column)
    with simt.phase(sync=False) as tid:
        for q in range(acc.count):
            acc.store(kb.const(F32, 0.0), q)
        for q, v in enumerate(ops.column(kb.add(s.n0, _urem(kb, tid, t.bn)))):
            cols.store(v, q)
    staged = (simt.private(F32, -(-t.bm * t.bk // t.threads)), simt.private(F32, t.bk * t.bn // t.threads))
    with simt.phase(sync=False) as tid:
        _fetch(kb, s, ops, cols, staged, kb.i64(0), tid)
    return cols, staged


def k_steps(k: GpuArgs, s: Shapes, ops: Operands, cols: Private, staged: tuple[Private, Private],
            multiply: Callable[[], None]) -> None:
    """The K loop: the staged tiles into shared memory, then the next step's global loads
    issued before `multiply` (phases of its own that end with a barrier) consumes the tiles."""
    kb, simt, t = k.kb, k.simt, s.t
    with kb.loop(0, s.dims.k, t.bk, name="k0") as k0:
        with simt.phase() as tid:
            _stash(kb, s, staged, tid)
        with simt.phase(sync=False) as tid:
            # unguarded: the last step fetches a tile past K, all zeros; a branch around the
            # fetch made ptxas spill (VGG's first conv, K = 27, on sm_90)
            _fetch(kb, s, ops, cols, staged, kb.b.add(k0, kb.i64(t.bk)), tid)
        multiply()


def store_inside(kb: KernelBuilder, s: Shapes, ops: Operands, m: ir.Value, n: ir.Value, x: ir.Value) -> None:
    with kb.if_then(kb.b.and_(_below(kb, m, s.dims.m), _below(kb, n, s.dims.n))):
        ops.store(m, n, x)


def emit_gemm(k: GpuArgs, t: Tile, dims: GemmDims, ops: Operands) -> None:
    kb, simt = k.kb, k.simt
    if t.threads != simt.threads or simt.threads % t.bn:
        raise CodegenError(f"GEMM tile {t} does not match a block of {simt.threads} threads")
    s = Shapes(t, dims, simt.shared(F32, t.bk * (t.bm + 1), "a"), simt.shared(F32, t.bk * t.bn, "b"),
               kb.mul(simt.block(1), t.bm), kb.mul(simt.block(0), t.bn), a_m=1, a_k=t.bm + 1, ldb=t.bn)
    tmtn = t.tm * t.tn
    partial = simt.shared(F32, (t.ks - 1) * t.bm * t.bn, "partial") if t.ks > 1 else None
    acc = simt.private(F32, tmtn)
    cols, staged = begin(k, s, ops, acc)

    def multiply() -> None:
        with simt.phase() as tid:
            _multiply(kb, s, acc, tid)

    k_steps(k, s, ops, cols, staged, multiply)

    if partial is not None:  # groups 1.. hand their sums to group 0
        with simt.phase() as tid:
            group, within, _, _ = _owner(kb, s, tid)
            with kb.if_then(kb.b.icmp_unsigned("!=", group, kb.i64(0))):
                slot = kb.affine([(kb.b.sub(group, kb.i64(1)), s.tile_threads * tmtn), (within, tmtn)])
                for q in range(tmtn):
                    kb.store(acc.load(q), partial, F32, kb.add(slot, q))

    with simt.phase(sync=False) as tid:
        group, within, ty, tx = _owner(kb, s, tid)
        first = kb.if_then(kb.b.icmp_unsigned("==", group, kb.i64(0))) if partial is not None else nullcontext()
        with first:
            for q in range(tmtn):
                x = acc.load(q)
                for g in range(1, t.ks):
                    slot = kb.affine([(within, tmtn)], (g - 1) * s.tile_threads * tmtn + q)
                    x = kb.b.fadd(x, kb.load(partial, F32, slot))
                m = kb.affine([(s.m0, 1), (ty, 1)], (q // t.tn) * (t.bm // t.tm))
                n = kb.affine([(s.n0, 1), (tx, 1)], (q % t.tn) * (t.bn // t.tn))
                store_inside(kb, s, ops, m, n, x)
