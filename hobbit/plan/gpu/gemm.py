"""GPU plans for the tiled GEMM kernel (hobbit/backend/gpu/gemm.py): Conv as an implicit GEMM and
MatMul, each a set of independent GEMMs C[M, N] = A[M, K] B[K, N] (grid z: a conv's groups,
a matmul's batch).

A block computes a BM x BN tile of C, K in steps of BK staged through shared memory; each
thread keeps a TM x TN micro-tile of accumulators in registers. The rule, all of it read
from the target:

- Threads per block: 256 (8 warps of 32, 4 wavefronts of 64: a multiple of the warp) so
  that a block has enough warps to hide a K step's loads while several blocks share an SM.
- Micro-tile: BM*BN/threads outputs per thread, split TM x TN near square (8x8 for the
  128x128 tile); its accumulators plus one column of A and row of B must stay under a
  third of `registers_per_thread` (64 + 16 of 255 on NVIDIA), which leaves room for the
  next K step's staged tiles ((BM + BN) * BK / threads, 16 at most), the addresses and
  the loop state without ptxas spilling (125 registers for 128 x 128 on sm_90: two
  blocks of 256 threads fit an SM's 64K registers).
- Tile: the largest BM x BN (area, then least padded work) that still gives at least
  `sms` blocks, since a bigger tile reads fewer bytes per multiply-add (its arithmetic
  intensity grows with the tile) but a grid smaller than the SM count leaves SMs idle
  for the whole kernel. When no tile fills the SMs (batch-1 7x7 layers: N = 49) the
  tile with the most blocks wins. Tiles stop at 32 x 32 (BN: a warp's 128-byte row of
  B, coalesced) and BM at M rounded up to a power of two: a 1-row MatMul gets BM = 1
  instead of computing 31 rows of zeros.
- A tile with fewer outputs than threads (small M) splits K inside the block: KS groups
  of threads each take every KS-th k of the staged tile and the groups' partial sums
  are added through shared memory at the end; so [1, 512] x [512, 1000] runs 256
  threads on each 1 x 32 tile (32 blocks) instead of 32 threads.
- A grid that still has fewer blocks than SMs gets more K groups per block, up to
  `max_block` threads (see _widened): 1024 threads on each 32 x 32 tile of a 7x7 layer.
- BK: 16 with one K group (two barriers per 16 rank-1 updates), 8 per group with KS;
  the staged tiles, A padded by one column so that its transposed stores do not
  collide in one bank, must fit `shared_bytes`.

Splitting K over blocks (more blocks for the 7x7 layers) needs a second pass or atomics
and the epilogue after them; it is not done.

Nodes a tensor-core pass marked (precision "tf32" or "bf16") get tensor-core tiles instead
where they pay (hobbit/plan/gpu/mma.py), picked by the same best_tile rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.errors import CodegenError
from hobbit.graph.ir import Node
from hobbit.graph.shapes import broadcast
from hobbit.plan.gpu.launch import GpuPlan, gpu_planner
from hobbit.plan.format import FP32, Format
from hobbit.plan.gpu.mma import FORMATS, MmaTile, mma_pays, mma_tiles
from hobbit.target import GpuTarget

THREADS = 256
MAX_YZ = 65535  # CUDA's grid y and z extents


@dataclass(frozen=True)
class GemmDims:
    """The node as `z` independent GEMMs of M x N x K."""

    m: int
    n: int
    k: int
    z: int


def gemm_dims(node: Node) -> GemmDims:
    if node.op == "Conv":
        oc, cg, kh, kw = node.attrs.get("weight_shape") or node.inputs[1].shape  # OIHW
        batch, _, oh, ow = node.outputs[0].shape
        group = node.attrs["group"]
        return GemmDims(oc // group, batch * oh * ow, cg * kh * kw, group)
    a = node.inputs[0].shape
    b = node.inputs[1].shape  # [..., K, N]: the GPU pipeline packs no panels
    batch = broadcast(tuple(a[:-2]), tuple(b[:-2]))
    return GemmDims(a[-2], b[-1], a[-1], int(np.prod(batch, dtype=np.int64)))


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    ks: int  # K groups inside the block

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn) * self.ks

    def shared_bytes(self) -> int:
        return 4 * (self.bk * (self.bm + 1) + self.bk * self.bn + (self.ks - 1) * self.bm * self.bn)


@dataclass(frozen=True)
class GemmPlan(GpuPlan):
    """The GEMM kernel's launch and its choices: the tile, and the operand format: a tensor-core
    one (hobbit.plan.gpu.mma.MmaFormat: tf32 or bf16 mma.sync) with an MmaTile, or FP32 (FMA)
    for the SIMT kernel with a Tile."""

    tile: Tile | MmaTile | None = None
    format: Format = FP32

    def __hash__(self) -> int:
        return hash((super().__hash__(), self.tile, self.format))


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _tile(bm: int, bn: int) -> Tile:
    outputs = bm * bn
    if outputs < THREADS:
        ks = THREADS // outputs
        return Tile(bm, bn, 8 * ks, 1, 1, ks)
    per_thread = outputs // THREADS
    tm = min(bm, _pow2_at_least(int(np.ceil(np.sqrt(per_thread)))))
    return Tile(bm, bn, 16, tm, per_thread // tm, 1)


def candidate_tiles(dims: GemmDims, target: GpuTarget) -> list[Tile]:
    """The tiles the target can run for this problem (registers, shared memory, warp)."""
    top_m = min(128, _pow2_at_least(dims.m))
    tiles = []
    for bm in (128, 64, 32, 16, 8, 4, 2, 1):
        if bm > top_m or bm < min(32, top_m):
            continue
        for bn in (128, 64, 32):
            if bn > max(32, _pow2_at_least(dims.n)):
                continue
            t = _tile(bm, bn)
            fits = (t.tm * t.tn + t.tm + t.tn <= target.registers_per_thread // 3
                    and t.shared_bytes() <= target.shared_bytes
                    and t.threads % target.warp == 0 and t.threads <= target.max_block
                    and t.threads % t.bn == 0 and t.ks <= 8)
            if fits:
                tiles.append(t)
    return tiles


def blocks(t: Tile | MmaTile, dims: GemmDims) -> int:
    return -(-dims.m // t.bm) * -(-dims.n // t.bn) * dims.z


def best_tile(tiles: list, dims: GemmDims, target: GpuTarget) -> Tile | MmaTile:
    """The largest tile (area, then least padded work) that gives at least `sms` blocks,
    else the one with the most blocks."""
    def padded(t: Tile | MmaTile) -> int:
        return -(-dims.m // t.bm) * t.bm * -(-dims.n // t.bn) * t.bn

    if not tiles:
        raise CodegenError(f"no GEMM tile fits {target.arch} for {dims}")
    filling = [t for t in tiles if blocks(t, dims) >= target.sms]
    if filling:
        return max(filling, key=lambda t: (t.bm * t.bn, -padded(t)))
    return max(tiles, key=lambda t: (blocks(t, dims), -padded(t)))


def choose_tile(dims: GemmDims, target: GpuTarget) -> Tile:
    """The module docstring's rule."""
    t = best_tile(candidate_tiles(dims, target), dims, target)
    return t if blocks(t, dims) >= target.sms else _widened(t, dims, target)


def _registers(t: Tile) -> int:
    """A bound on a thread's registers: twice its accumulators and operands, plus 32 for
    addresses and loop state (the 8x8 micro-tile measured 125 of its 192 on sm_90)."""
    return 2 * (t.tm * t.tn + t.tm + t.tn) + 32


def _widened(t: Tile, dims: GemmDims, target: GpuTarget) -> Tile:
    """A grid with fewer blocks than SMs puts at most one block on each: doubling its K
    groups (up to `max_block` threads, the SM's registers and shared memory, at least two
    K steps) gives that SM more warps to hide latency with, where SMs would otherwise
    be idle anyway."""
    while True:
        wider = Tile(t.bm, t.bn, 8 * 2 * t.ks, t.tm, t.tn, 2 * t.ks)
        if (wider.threads > target.max_block or 2 * wider.bk > dims.k
                or wider.threads * _registers(wider) > target.registers_per_sm
                or wider.shared_bytes() > target.shared_bytes):
            return t
        t = wider


@gpu_planner("MatMul")
def gemm_plan(node: Node, target: GpuTarget) -> GpuPlan:
    """Tensor-core tiles for a node a tensor-core pass marked, where they pay
    (hobbit.plan.gpu.mma), else the SIMT tiles."""
    dims = gemm_dims(node)
    name = node.attrs.get("tensor_cores")
    if name and mma_pays(dims.m, dims.n, target):
        t: Tile | MmaTile = best_tile(mma_tiles(dims.m, dims.n, target), dims, target)
        per_thread = t.accumulators
        fmt: Format = FORMATS[name]
        min_blocks = t.blocks_per_sm
    else:
        t = choose_tile(dims, target)
        per_thread = t.tm * t.tn
        fmt = FP32
        min_blocks = 0
    grid = (-(-dims.n // t.bn), -(-dims.m // t.bm), dims.z)
    if max(grid[1:]) > MAX_YZ:
        raise CodegenError(f"{node.op} '{node.name}' needs a grid of {grid} blocks ({dims.z} GEMMs of {dims.m} rows); "
                           f"the grid's y and z extents stop at {MAX_YZ}")
    return GemmPlan(grid, t.threads, per_thread, min_blocks=min_blocks, tile=t, format=fmt)
