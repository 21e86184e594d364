"""The tile-wise GEMMs of a bf16 Winograd conv (hobbit.plan.winograd_bf16), on vdpbf16ps.

The transforms are the float32 ones (hobbit.backend.cpu.winograd); these GEMMs read U as the
bf16 pass's pairs of channels and V as float32, converted where the GEMM packs it
(U broadcast, M = U V) or, transposed (V broadcast, M^T = V^T U^T), by one pass over the
GEMM's own V rows into pairs in place, read then by every output-channel panel."""

from __future__ import annotations

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.gemm import MatA, MatB, MatC
from hobbit.backend.cpu.gemm_bf16 import emit_gemm_bf16, rows_to_pairs
from hobbit.backend.cpu.parallel import Threads
from hobbit.plan.conv import ConvShape
from hobbit.plan.gemm import GemmSchedule
from hobbit.plan.gemm_bf16 import pairs
from hobbit.plan.winograd import tile_gemm
from hobbit.target import Target


class Bf16TileGemms:
    """The calls of hobbit.backend.cpu.winograd.TileGemms, in bf16: U is [a*a, panels, C/2, rows]
    pairs (rows: MR, or NR with tiles as rows), K counts pairs."""

    def __init__(self, dtype):
        self.dtype = dtype

    def schedule(self, s: ConvShape, m: int, t: int, target: Target) -> GemmSchedule:
        return tile_gemm(s, m, t, target, pairs(s.c))

    def by_channel(self, kb: KernelBuilder, sched: GemmSchedule, s: ConvShape, u, xi, v, v_at, mm, m_at, t: int,
                   threads: Threads, pack) -> None:
        kp, rows = pairs(s.c), sched.mr
        a = MatA(u, kb.mul(xi, -(-s.oc // rows) * kp * rows), panel=kp * rows, k=rows, m=1)
        emit_gemm_bf16(kb, sched, s.oc, t, s.c, a, MatB(v, v_at, k=t), MatC(mm, m_at, m=t), None, threads, pack)

    def by_tile(self, kb: KernelBuilder, sched: GemmSchedule, s: ConvShape, u, xi, scratch, v_at, m_at, t: int,
                threads: Threads) -> None:
        kp = pairs(s.c)
        rows_to_pairs(kb, scratch, v_at, s.c, t, kb.gep(scratch, self.dtype, v_at), threads)
        a = MatA(scratch, v_at, panel=sched.mr, k=t, m=1)
        b = MatB(u, kb.mul(xi, kp * s.oc), k=sched.nr, panel=kp * sched.nr)
        emit_gemm_bf16(kb, sched, t, s.oc, s.c, a, b, MatC(scratch, m_at, m=1, n=t), None, threads)
