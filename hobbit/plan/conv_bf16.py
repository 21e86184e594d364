"""The plan of a Conv that the bf16 pass (hobbit.passes.bf16) gave bf16 weights.

Two of the float32 variants (hobbit.plan.conv) run in bf16, with the same blocking:

* gemm: a 1x1 conv as one GEMM on the input, whose B (the float32 input) each thread
  converts into pairs in its packing buffer; or, with "KO" weights, an im2col of the
  whole image (none for 1x1) converted into shared [K/2, OH*OW] pairs, the GEMM's A;
* im2col: L2-sized blocks of rows lowered into each thread's scratch in float32, then
  converted into pairs by the GEMM's packing step (also for the RGB stems that run as
  direct convs in float32).

Every bf16 GEMM packs its float32 B, since packing is where it is converted; the
schedules count K in pairs (hobbit.backend.cpu.gemm_bf16)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hobbit.graph.ir import Node
from hobbit.plan.bands import band_heights
from hobbit.plan.conv import ConvShape, block_rows, conv_shape
from hobbit.plan.gemm import GemmSchedule, gemm_schedule
from hobbit.plan.gemm_bf16 import pairs
from hobbit.target import Target

WORD_BYTES = 4  # scratch is counted in 32-bit elements: float32 columns, bf16 pairs


@dataclass(frozen=True)
class ConvBf16Plan:
    """How one bf16 Conv runs. Element counts (32-bit); per thread unless said otherwise."""
    variant: str  # "gemm" or "im2col"
    shape: ConvShape
    threads: int
    by_channel: bool = False  # "KO" weights: rows are positions, vectors run along channels
    rows: int = 0  # output rows per im2col block
    col: int = 0  # float32 im2col columns: of the whole image, shared (gemm), or of one block (im2col)
    words: int = 0  # gemm by channel: the shared [K/2, OH*OW] pairs of A
    partial: int = 0  # gemm by channel: the shared [OH*OW, OC] buffer of partial sums
    pack: int = 0  # the GEMM's B packing buffer, in pairs
    gemm: GemmSchedule | None = None  # the one GEMM schedule of a gemm conv (kc in pairs)

    @property
    def scratch_elems(self) -> int:
        if self.by_channel:
            return self.col + self.words + self.partial
        return self.threads * (self.col + self.pack)

    @property
    def scratch_bytes(self) -> int:
        return self.scratch_elems * WORD_BYTES


def is_bf16(node: Node) -> bool:
    return node.attrs.get("precision") == "bf16"


def runs_in_bf16(s: ConvShape) -> bool:
    """Whether a conv of this shape has a bf16 variant: depthwise convs (one multiply-add
    per loaded weight, bound by memory) stay float32. RGB stems, direct convs in float32,
    run as bf16 im2col: faster than the float32 direct conv (ResNet-18's 7x7: 1.56 ms
    against 2.28 at one thread; MobileNetV2's 3x3: 0.18 against 0.42)."""
    return not s.depthwise


def conv_bf16_plan(node: Node, target: Target, threads: int) -> ConvBf16Plan:
    s = conv_shape(node)
    k, positions = pairs(s.cg * s.kh * s.kw), s.oh * s.ow
    plan = ConvBf16Plan("gemm", s, threads)
    if node.attrs.get("weight_layout") == "KO":
        col = 0 if s.pointwise else s.cg * s.kh * s.kw * positions
        return dataclasses.replace(plan, by_channel=True, col=col, words=k * positions,
                                   partial=positions * s.ocg, gemm=gemm_schedule(positions, s.ocg, k, target))
    if s.pointwise:
        sched = gemm_schedule(s.ocg, positions, k, target)
        return dataclasses.replace(plan, pack=sched.kc * sched.nr, gemm=sched)
    rows = block_rows(s, target)
    schedules = [gemm_schedule(s.ocg, r * s.ow, k, target) for r in band_heights(s.oh, rows, threads)]
    return dataclasses.replace(plan, variant="im2col", rows=rows, col=s.cg * s.kh * s.kw * rows * s.ow,
                               pack=max(g.kc * g.nr for g in schedules))
