"""Tensor-core tiles and operand formats for the GEMM kernel: precision "tf32" or "bf16" on
NVIDIA runs Conv and MatMul on mma.sync (m16n8k8 .tf32, m16n8k16 .bf16) with float32
accumulation (hobbit/backend/gpu/mma.py). The plan carries the Format (GemmPlan.format).

A warp computes a WM x WN piece of the block's BM x BN tile as (WM/16) x (WN/8) mma
tiles, its accumulators in registers (four per mma tile and thread); K goes in steps of
BK = 16 staged through shared memory as in the SIMT kernel (two TF32 mma k-steps or one
bf16 per pair of barriers). The rule, from the target:

- Block tiles: 128 x 128 on 8 warps (2 x 4, warps of 64 x 32: 64 accumulators, the
  most that leaves a thread room for its fragments (24), staged tiles (16) and
  addresses under 128 registers, so two blocks of 256 threads share an SM's 64K), 128 x 64
  and 64 x 128 on 8 warps (32 x 32 each), 64 x 64, 64 x 32, 32 x 64 and 32 x 32 on 4.
- Which tile: as for the SIMT tiles, the largest that still gives `sms` blocks, else the
  one with the most blocks (hobbit.plan.gpu.gemm.best_tile).
- Where they pay: TF32 mma runs 8x the FP32 FMA rate on A100/H100/H200 (156 vs 19.5 and
  495 vs 67 dense TFLOPS), so every GEMM with whole mma tiles gains; one with M or N
  under 32 (a batch-1 classifier: M = 1) would compute mostly padding, and stays SIMT.
- Shared tiles: A row-major [BM][BK + 4] and B [BK][BN + 8]: the fragment loads of a
  warp (rows g = lane / 4, columns t = lane % 4) then fall in 32 distinct banks.

TF32 keeps 10 of float32's 23 mantissa bits, bf16 7: operands are rounded to nearest
when they are staged, so each product carries a relative error up to 2**-11 (TF32) or
2**-8 (bf16); that is why they are opt-in precisions, like bf16 on the CPU."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.errors import CodegenError
from hobbit.plan.format import BFLOAT16, FLOAT32, Format
from hobbit.target import GpuTarget

BK = 16
MIN_SIDE = 32  # M and N at least this for tensor cores: see the module docstring
WARP = 32  # mma.sync is a 32-thread warp's instruction


@dataclass(frozen=True)
class MmaFormat(Format):
    """An mma.sync operand format: the GEMM operand Format every backend's plans carry
    (hobbit.plan.format; `micro` is the mma intrinsic, `k_step` the elements per 32-bit
    register) plus the instruction's K and where each fragment element lies (A: (row, k)
    from (g, step * t); B: k from step * t, column g). The emitter (hobbit.backend.gpu.mma)
    rounds operands to the format, by its name, when it stages them."""

    k: int
    a: tuple[tuple[int, int], ...]
    b: tuple[int, ...]
    step: int

    def source(self, offsets: tuple, kk: int, row: int | None = None) -> tuple[int, int]:
        """(t of the lane holding k = kk [at row offset `row`], its fragment element)."""
        for i, slot in enumerate(offsets):
            dr, dk = slot if row is not None else (None, slot)
            t, rest = divmod(kk - dk, self.step)
            if dr == row and rest == 0 and 0 <= t < 4:
                return t, i
        raise CodegenError(f"no {self.name} fragment holds k = {kk}")


FORMATS = {
    "tf32": MmaFormat("tf32", "llvm.nvvm.mma.m16n8k8.row.col.tf32", 1, FLOAT32, FLOAT32, FLOAT32,
                      k=8, a=((0, 0), (8, 0), (0, 4), (8, 4)), b=(0, 4), step=1),
    "bf16": MmaFormat("bf16", "llvm.nvvm.mma.m16n8k16.row.col.bf16", 2, BFLOAT16, BFLOAT16, FLOAT32,
                      k=16, a=((0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)), b=(0, 1, 8, 9), step=2),
}


@dataclass(frozen=True)
class MmaTile:
    bm: int
    bn: int
    bk: int
    wm: int  # warps along M
    wn: int  # warps along N

    @property
    def threads(self) -> int:
        return self.wm * self.wn * WARP

    @property
    def warp_m(self) -> int:
        return self.bm // self.wm

    @property
    def warp_n(self) -> int:
        return self.bn // self.wn

    @property
    def mt(self) -> int:
        """mma tiles along M in a warp's piece."""
        return self.warp_m // 16

    @property
    def nt(self) -> int:
        return self.warp_n // 8

    @property
    def lda(self) -> int:
        return self.bk + 4

    @property
    def ldb(self) -> int:
        return self.bn + 8

    @property
    def blocks_per_sm(self) -> int:
        """The blocks per SM the kernel asks registers for (GpuPlan.min_blocks): two of 8
        warps (128 registers a thread), three of 4 (170). Given only its block size, ptxas
        capped a 64 x 64 tile's 7x7 stem conv at 80 registers and spilled (sm_90); asked
        for four blocks of 4 warps (128 registers) it still spilled 8 bytes on
        SqueezeNet's stem (K = 27, sm_80); three leave it room."""
        return 2 if self.wm * self.wn == 8 else 3

    @property
    def accumulators(self) -> int:
        return self.mt * self.nt * 4

    def shared_bytes(self) -> int:
        return 4 * (self.bm * self.lda + self.bk * self.ldb)


TILES = (MmaTile(128, 128, BK, 2, 4), MmaTile(128, 64, BK, 4, 2), MmaTile(64, 128, BK, 2, 4),
         MmaTile(64, 64, BK, 2, 2), MmaTile(64, 32, BK, 2, 2), MmaTile(32, 64, BK, 2, 2), MmaTile(32, 32, BK, 2, 2))


def mma_pays(m: int, n: int, target: GpuTarget) -> bool:
    return target.vendor == "cuda" and target.warp == WARP and m >= MIN_SIDE and n >= MIN_SIDE


def mma_tiles(m: int, n: int, target: GpuTarget) -> list[MmaTile]:
    """The tensor-core tiles the target can run for an M x N output, none more than twice
    as long as the output on a side (a power of two at least M, as for the SIMT tiles)."""
    def fits(side: int, extent: int) -> bool:
        return side <= max(MIN_SIDE, 1 << max(0, extent - 1).bit_length())

    return [t for t in TILES if fits(t.bm, m) and fits(t.bn, n)
            and t.shared_bytes() <= target.shared_bytes and t.threads <= target.max_block]
