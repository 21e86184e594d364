"""A 2-D convolution's shape, as every conv decision reads it, and the plan of a Conv node.

The passes that choose a conv's form (winograd, expand-depthwise) and the emitters
of each variant (hobbit.backend.cpu.conv, depthwise, direct_conv, winograd) all start
from the one shape record, so it lives below both. `conv_plan` decides, once per
node, which variant a Conv runs as and how big its blocks, bands, planes and
packing buffers are: memory planning reserves the plan's scratch_bytes and the
emitter lays out that scratch from the same plan.

Variants, by shape:

* depthwise (groups == channels): vectorised rows (backend/cpu/depthwise.py);
* gemm: a 1x1, stride-1, unpadded conv is one GEMM straight on the input ([C, H*W]
  is B; not where it packs its rows: packs_rows); so is any conv whose
  weights the layout pass stored "KO" (after an im2col of the whole image);
* direct: at most four input channels (RGB stems), the GEMM reading B straight
  from padded input rows (backend/cpu/direct_conv.py);
* im2col: everything else, L2-sized blocks of rows lowered into each thread's
  own scratch, then the GEMM.

The plan carries the GEMMs' operand Format (hobbit.plan.format), read from the precision
the passes gave the node. A Conv the bf16 pass gave bf16 weights runs as one of two
variants, with the float32 blocking and K counted in pairs:

* gemm: a 1x1 conv as one GEMM on the input, whose B (the float32 input) each thread
  converts into pairs in its packing buffer; or, with "KO" weights, an im2col of the
  whole image (none for 1x1) converted into shared [K/2, OH*OW] pairs (`words`), the
  GEMM's A;
* im2col: L2-sized blocks of rows lowered into each thread's scratch in float32, then
  converted into pairs by the GEMM's packing step (also for the RGB stems that run as
  direct convs in float32).

Every bf16 GEMM packs its float32 B, since packing is where it is converted."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from hobbit.graph.extents import is_dynamic
from hobbit.graph.ir import Node
from hobbit.plan.bands import band_heights
from hobbit.plan.format import Format, node_format
from hobbit.plan.gemm import GemmSchedule, gemm_schedule, pack_elems
from hobbit.target import Target


@dataclass(frozen=True)
class ConvShape:
    n: int
    c: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    oh: int
    ow: int
    group: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def ocg(self) -> int:
        return self.oc // self.group

    @property
    def depthwise(self) -> bool:
        return self.group == self.c and self.group > 1 and self.cg == 1

    @property
    def pointwise(self) -> bool:
        return (self.kh, self.kw, self.stride, self.pad) == (1, 1, (1, 1), (0, 0, 0, 0))

    @property
    def padded_hw(self) -> tuple[int, int]:
        return self.h + self.pad[0] + self.pad[2], self.w + self.pad[1] + self.pad[3]


def conv_shape(node: Node) -> ConvShape:
    x = node.inputs[0]
    n, c, h, wd = x.shape
    # A Winograd conv carries transformed weights; its attrs keep the original shape.
    oc, _, kh, kw = node.attrs.get("weight_shape") or node.inputs[1].shape
    _, _, oh, ow = node.outputs[0].shape
    a = node.attrs
    pool = a.get("pool", 1)  # a Winograd conv with a fused pool stores pooled outputs
    oh, ow = oh * pool, ow * pool
    return ConvShape(n, c, h, wd, oc, kh, kw, oh, ow, a["group"], tuple(a["strides"]),
                     tuple(a["dilations"]), tuple(a["pads"]))


def input_rows(s: ConvShape, out_rows: int) -> int:
    """Input rows that `out_rows` consecutive output rows read (padding rows included)."""
    return (out_rows - 1) * s.stride[0] + (s.kh - 1) * s.dilation[0] + 1


SLACK = 64  # elements past the last plane that a strided tail vector may read
MAX_DIRECT_CHANNELS = 4  # wider inputs have enough multiply-adds per column to amortise im2col


def reads_input(s: ConvShape) -> bool:
    """Whether a depthwise conv's taps load straight from the input, masked at the borders
    (stride 2: two vectors, even lanes kept). Copying each plane into a padded one first
    cost two thirds of the time of a 7x7 depthwise conv: the taps reloaded rows just
    stored, at other offsets, which stalls on store forwarding. For stride 2 it was also
    slower at every size measured (MobileNetV2's 14x14x576: 0.021 -> 0.015 ms)."""
    return s.stride[1] in (1, 2)


def runs_in_bf16(s: ConvShape) -> bool:
    """Whether a conv of this shape has a bf16 variant: depthwise convs (one multiply-add
    per loaded weight, bound by memory) stay float32. RGB stems, direct convs in float32,
    run as bf16 im2col: faster than the float32 direct conv (ResNet-18's 7x7: 1.56 ms
    against 2.28 at one thread; MobileNetV2's 3x3: 0.18 against 0.42)."""
    return not s.depthwise


def is_direct(s: ConvShape) -> bool:
    """Whether a conv reads B straight from padded input rows instead of an im2col buffer."""
    return s.group == 1 and s.c <= MAX_DIRECT_CHANNELS and s.stride[1] in (1, 2) and not s.pointwise


def block_rows(s: ConvShape, target: Target) -> int:
    """Most output rows per im2col block: the block's columns fit in half of L2."""
    k = s.cg * s.kh * s.kw
    return max(1, min(s.oh, (target.l2_bytes // 2) // (k * s.ow * 4)))


def block_positions(s: ConvShape, target: Target) -> int:
    """Most output positions per im2col block of a conv with run-time dims, whose rows are
    cut into blocks at run time: as many as fill half of L2 (block_rows' budget), at least
    one row of the bound's width, at most the bound's image."""
    k = s.cg * s.kh * s.kw
    return min(s.oh * s.ow, max(s.ow, (target.l2_bytes // 2) // (k * 4)))


def direct_band_rows(s: ConvShape, target: Target, threads: int) -> int:
    """Output rows per band of a direct conv: the band's planes take at most a quarter of
    L2, and every thread gets at least one band."""
    wp = s.padded_hw[1]
    rows = 1
    while rows < -(-s.oh // threads) and s.c * input_rows(s, rows + 1) * wp * 4 <= target.l2_bytes // 4:
        rows += 1
    return rows


@dataclass(frozen=True)
class ConvPlan:
    """How one Conv node runs. Element counts (of the input's dtype; a bf16 pair counts as one
    32-bit element); per thread unless said otherwise."""
    variant: str  # "depthwise", "gemm", "direct" or "im2col"
    shape: ConvShape
    threads: int
    itemsize: int
    format: Format  # the GEMM's operands (K counted in its steps)
    by_channel: bool = False  # gemm on "KO" weights: rows are positions, vectors run along channels
    rows: int = 0  # output rows per band (direct) or per im2col block (im2col)
    # im2col columns: of the whole image, shared (gemm), or of one block (im2col; with run-time
    # dims, of block_positions, the rows of a block counted at run time)
    col: int = 0
    words: int = 0  # gemm by channel, in a converting format: the shared [K steps, OH*OW] A
    partial: int = 0  # gemm by channel: the shared [OH*OW, OC/group] buffer of partial sums
    pack: int = 0  # the GEMM's B packing buffer (0: B is read in place)
    plane: int = 0  # zero-padded input plane(s): depthwise with stride > 2, direct
    gemm: GemmSchedule | None = None  # the one GEMM schedule of gemm and direct convs

    @property
    def scratch_elems(self) -> int:
        """Scratch elements: shared regions first, then every thread's slices."""
        if self.by_channel:
            return self.col + self.words + self.partial
        return self.threads * (self.col + self.pack + self.plane)

    @property
    def scratch_bytes(self) -> int:
        return self.scratch_elems * self.itemsize


def conv_plan(node: Node, target: Target, threads: int) -> ConvPlan:
    s = conv_shape(node)
    itemsize = np.dtype(node.inputs[0].dtype).itemsize
    fmt = node_format(node)
    plan = ConvPlan("depthwise", s, threads, itemsize, fmt)
    if s.depthwise:
        return dataclasses.replace(plan, plane=0 if reads_input(s) else depthwise_plane_elems(s))
    k, positions = s.cg * s.kh * s.kw, s.oh * s.ow
    steps = fmt.steps(k)
    packed = packs_rows(node)
    if (s.pointwise and not packed) or node.attrs.get("weight_layout") == "KO":
        by_channel = node.attrs.get("weight_layout") == "KO"
        rows, cols = (positions, s.ocg) if by_channel else (s.ocg, positions)
        col = 0 if s.pointwise and not packed else k * positions
        gemm = gemm_schedule(rows, cols, steps, target, itemsize)
        if by_channel:
            return dataclasses.replace(plan, variant="gemm", by_channel=True, col=col,
                                       words=steps * positions if fmt.converts else 0,
                                       partial=positions * s.ocg, gemm=gemm)
        return dataclasses.replace(plan, variant="gemm", col=col, pack=b_pack(fmt, s.ocg, positions, steps, target),
                                   gemm=gemm)
    if is_direct(s) and not fmt.converts:
        rows = direct_band_rows(s, target, threads)
        gemm = dataclasses.replace(gemm_schedule(s.oc, s.ow, k, target, itemsize), kc=k)  # a channel's taps together
        return dataclasses.replace(plan, variant="direct", rows=rows, gemm=gemm,
                                   plane=s.c * input_rows(s, rows) * s.padded_hw[1] + SLACK)
    rows = block_rows(s, target)
    if is_dynamic(node):  # blocks of a run-time height (hobbit.backend.cpu.conv): sized in positions
        positions = block_positions(s, target)
        return dataclasses.replace(plan, variant="im2col", rows=rows, col=k * positions,  # (a 1x1 conv: its rows' tails)
                                   pack=b_pack(fmt, s.ocg, positions, steps, target))
    pack = max(b_pack(fmt, s.ocg, r * s.ow, steps, target) for r in band_heights(s.oh, rows, threads))
    return dataclasses.replace(plan, variant="im2col", rows=rows, col=k * rows * s.ow, pack=pack)


def packs_rows(node: Node) -> bool:
    """Whether a conv's input width is a run-time dim (hobbit.graph.extents) and its output has
    more than one row. Its GEMMs then run on positions packed row by row, the columns past
    the run-time width left out (hobbit.backend.cpu.conv_dims), and a 1x1 conv runs as the
    im2col variant's blocks of rows (with no im2col: one GEMM on the input per block, or per
    row where the rows are much narrower than the bound's), or with "KO" weights over the
    whole image packed by an im2col. A single row (a 1-D conv) is its own packing."""
    x, y = node.inputs[0], node.outputs[0]
    return x.extents is not None and len(x.extents) == 4 and x.extents[3] is not None and y.shape[2] > 1


# A 1x1 conv with a run-time width (packs_rows) packs rows much narrower than the bound's
# when its input and output channels are both at least this many, else it runs a GEMM per row:
# packing copies its inputs (1/OC of the GEMM's work) and moves its outputs (1/K). Measured at
# 56 of 80 columns, packed against by row: 64 -> 16 1.30x against 1.15x the static time,
# 64 -> 64 1.18x against 1.15x; at 13 of 19 columns, 512 -> 1000 by row 1.20x.
PACKED_POINTWISE_CHANNELS = 128


def packs_pointwise(s: ConvShape) -> bool:
    """Whether a 1x1 conv with a run-time width packs its narrow rows (PACKED_POINTWISE_CHANNELS)."""
    return min(s.cg, s.ocg) >= PACKED_POINTWISE_CHANNELS


def depthwise_plane_elems(s: ConvShape) -> int:
    """A zero-padded input plane of a depthwise conv, with room for a strided tail vector."""
    hp, wp = s.padded_hw
    return hp * wp + SLACK


def b_pack(fmt: Format, rows: int, cols: int, k: int, target: Target) -> int:
    """Elements of a thread's B packing buffer for a conv GEMM (K in `fmt`'s steps), or 0 to
    read B in place. A converting format always packs: packing is where B is converted."""
    sched = gemm_schedule(rows, cols, k, target)
    return sched.kc * sched.nr if fmt.converts else pack_elems(sched, rows)
