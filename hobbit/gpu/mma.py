"""Conv and MatMul on tensor cores (precision="tf32"; tiles from hobbit/plan/gpu_mma.py):
the GEMM kernel's operands, staging and K loop (hobbit.gpu.gemm) with mma.sync.m16n8k8
for the multiply, TF32 operands and float32 accumulators.

Warp w of the block owns rows (w // WN) * WM .. + WM and columns (w % WN) * WN .. + WN of
the tile as MT x NT mma tiles. Per k-step of 8 in the staged BK, each thread loads its
fragments from the shared tiles in the layout the PTX ISA gives for m16n8k8 .tf32 (with
g = lane / 4 and t = lane % 4): A's a0..a3 are (row, k) = (g, t), (g+8, t), (g, t+4),
(g+8, t+4); B's b0, b1 are (k, column) = (t, g), (t+4, g); the accumulators c0..c3 are
(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). Then it issues one mma per tile.

The host emulation has no warp whose registers the instruction could gather: there the
mma is a phase of its own, after every thread's fragment loads, in which each thread
computes its c0..c3 from the fragments the lanes of its warp loaded, found through the
same layout. So the emulation checks the fragment loads as the hardware would consume
them, not a re-derivation of the product from shared memory."""

from __future__ import annotations

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.gpu.gemm import F32, Operands, Shapes, begin, fma, k_steps, store_inside
from hobbit.gpu.kernels import GpuArgs
from hobbit.gpu.simt import Private
from hobbit.lower.builder import I32, KernelBuilder, llvm_type
from hobbit.plan.gpu_gemm import GemmDims
from hobbit.plan.gpu_mma import WARP, MmaTile

MMA = "llvm.nvvm.mma.m16n8k8.row.col.tf32"
A_SLOTS = ((0, 0), (8, 0), (0, 4), (8, 4))  # a0..a3: (row, k) from (g, t)
B_SLOTS = (0, 4)  # b0, b1: k from t (column g)
C_SLOTS = ((0, 0), (0, 1), (8, 0), (8, 1))  # c0..c3: (row, column) from (g, 2t)


def _lane(kb: KernelBuilder, t: MmaTile, tid: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value]:
    """(first thread of the warp, g, t, the warp's first row and first column in the tile)."""
    b = kb.b
    warp, lane = b.udiv(tid, kb.i64(WARP)), b.urem(tid, kb.i64(WARP))
    row0 = kb.mul(b.udiv(warp, kb.i64(t.wn)), t.warp_m)
    col0 = kb.mul(b.urem(warp, kb.i64(t.wn)), t.warp_n)
    return kb.mul(warp, WARP), b.udiv(lane, kb.i64(4)), b.urem(lane, kb.i64(4)), row0, col0


def _load_fragments(kb: KernelBuilder, s: Shapes, frags: tuple[Private, Private], k8: int, tid: ir.Value) -> None:
    t = s.t
    frag_a, frag_b = frags
    _, g, tq, row0, col0 = _lane(kb, t, tid)
    for mi in range(t.mt):
        for r, (dr, dk) in enumerate(A_SLOTS):
            row = kb.affine([(row0, 1), (g, 1)], mi * 16 + dr)
            frag_a.store(kb.load(s.a_tile, F32, kb.affine([(row, s.a_m), (tq, 1)], k8 * 8 + dk)), mi * 4 + r)
    for ni in range(t.nt):
        for r, dk in enumerate(B_SLOTS):
            column = kb.affine([(col0, 1), (g, 1)], ni * 8)
            frag_b.store(kb.load(s.b_tile, F32, kb.affine([(tq, s.ldb), (column, 1)], (k8 * 8 + dk) * s.ldb)),
                         ni * 2 + r)


def _mma(kb: KernelBuilder, t: MmaTile, acc: Private, frags: tuple[Private, Private]) -> None:
    """acc += A B per mma tile: the instruction, on the warp's fragments."""
    frag_a, frag_b = frags
    f32 = llvm_type(F32)
    result = ir.LiteralStructType([f32] * 4)
    for mi in range(t.mt):
        for ni in range(t.nt):
            q0 = (mi * t.nt + ni) * 4
            a = [kb.b.bitcast(frag_a.load(mi * 4 + r), I32) for r in range(4)]
            b = [kb.b.bitcast(frag_b.load(ni * 2 + r), I32) for r in range(2)]
            d = kb.call_intrinsic(MMA, result, a + b + [acc.load(q0 + r) for r in range(4)])
            for r in range(4):
                acc.store(kb.b.extract_value(d, r), q0 + r)


def _mma_emulated(kb: KernelBuilder, t: MmaTile, acc: Private, frags: tuple[Private, Private],
                  tid: ir.Value) -> None:
    """The host's mma: this thread's c0..c3 of each tile from its warp's fragments. A's
    (g + dr, k) is lane g*4 + k%4's register dr/8 + 2*(k/4); B's (k, c) lane c*4 + k%4's k/4."""
    frag_a, frag_b = frags
    first, g, tq, _, _ = _lane(kb, t, tid)
    for mi in range(t.mt):
        for ni in range(t.nt):
            for r, (dr, dc) in enumerate(C_SLOTS):
                q = (mi * t.nt + ni) * 4 + r
                x = acc.load(q)
                for kk in range(8):
                    a_lane = kb.affine([(first, 1), (g, 4)], kk % 4)
                    b_lane = kb.affine([(first, 1), (tq, 8)], dc * 4 + kk % 4)
                    a = frag_a.load_of(a_lane, mi * 4 + dr // 8 + 2 * (kk // 4))
                    b = frag_b.load_of(b_lane, ni * 2 + kk // 4)
                    x = fma(kb, a, b, x)
                acc.store(x, q)


def emit_mma_gemm(k: GpuArgs, t: MmaTile, dims: GemmDims, ops: Operands) -> None:
    kb, simt = k.kb, k.simt
    if t.threads != simt.threads or simt.threads % t.bn or k.target.warp != WARP:
        raise CodegenError(f"tensor-core tile {t} does not match a block of {simt.threads} threads "
                           f"in warps of {k.target.warp}")
    s = Shapes(t, dims, simt.shared(F32, t.bm * t.lda, "a"), simt.shared(F32, t.bk * t.ldb, "b"),
               kb.mul(simt.block(1), t.bm), kb.mul(simt.block(0), t.bn), a_m=t.lda, a_k=1, ldb=t.ldb, tf32=True)
    acc = simt.private(F32, t.accumulators)
    frags = (simt.private(F32, t.mt * 4), simt.private(F32, t.nt * 2))
    cols, staged = begin(k, s, ops, acc)

    def multiply() -> None:
        steps = t.bk // 8
        for k8 in range(steps):
            with simt.phase(sync=False) as tid:
                _load_fragments(kb, s, frags, k8, tid)
            with simt.phase(sync=k8 == steps - 1) as tid:
                if simt.flavour == "host":
                    _mma_emulated(kb, t, acc, frags, tid)
                else:
                    _mma(kb, t, acc, frags)

    k_steps(k, s, ops, cols, staged, multiply)

    with simt.phase(sync=False) as tid:
        _, g, tq, row0, col0 = _lane(kb, t, tid)
        for mi in range(t.mt):
            for ni in range(t.nt):
                for r, (dr, dc) in enumerate(C_SLOTS):
                    m = kb.affine([(s.m0, 1), (row0, 1), (g, 1)], mi * 16 + dr)
                    n = kb.affine([(s.n0, 1), (col0, 1), (tq, 2)], ni * 8 + dc)
                    store_inside(kb, s, ops, m, n, acc.load((mi * t.nt + ni) * 4 + r))
