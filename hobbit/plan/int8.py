"""How int8 convolutions run on a target: the dot-product instruction, the packed layouts it
reads, and the plan of one QConv node.

The int8 GEMM keeps int32 accumulators in vector registers, like the float GEMM (rows are
output channels, vectors run along output positions), but each 32-bit lane sums `group`
consecutive products of the reduction dim in one instruction:

* vpdpbusd (AVX-512 VNNI; AVX-VNNI or AVX512-VL for 256-bit vectors): 4 unsigned bytes of
  activations times 4 signed bytes of weights, added to the lane in int32. The products
  are summed in 32 bits without saturation, so the accumulation is exact for any
  K < 2**31 / (255 * 128) = 65793: no 7-bit trick is needed.
* vpmaddwd (AVX2 without VNNI): 2 int16 activations (the bytes zero-extended) times
  2 int16 weights, summed in int32 and added. Exact as well: the pair sum is at most
  2 * 255 * 128. (vpmaddubsw would take bytes directly but saturates its pair sums to
  int16, which 255 * 127 * 2 exceeds.)

Activations are packed per panel of NR positions as [K/group, NR, group] (a lane's group
of k side by side); the weights are stored in panels of MR output channels, [K/group, MR,
group] each with K padded to the group (a depthwise conv's: [OC, KH, KW padded to 4]), so that one
32-bit load broadcasts a row's group of k and a micro-block reads one contiguous stream.
Activations of dtype int8 are flipped to uint8 (x + 128) while they are packed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.errors import TargetError
from hobbit.plan.bands import cut
from hobbit.plan.conv import ConvShape, conv_shape
from hobbit.plan.format import Format
from hobbit.plan.gemm import GemmSchedule, gemm_schedule
from hobbit.target import Target


@dataclass(frozen=True)
class DotProduct:
    """The integer dot-product instruction the int8 kernels are built on."""
    name: str  # "vpdpbusd" or "vpmaddwd"
    group: int  # consecutive k per 32-bit lane
    lanes: int  # int32 lanes per vector
    packed: np.dtype  # activations as packed: uint8, or int16 for vpmaddwd
    weights: np.dtype  # weights as stored: int8, or int16 for vpmaddwd

    @property
    def format(self) -> Format:
        """The GEMM operand format of this dot product: `group` k per 32-bit word, int32 sums."""
        return Format("int8", self.name, self.group, self.packed, self.weights, np.dtype(np.int32))


def dot_product(target: Target) -> DotProduct | None:
    """The best int8 dot product of the target, or None for a CPU without one (the int8
    pass then keeps the float path)."""
    features = target.enabled
    lanes = target.lanes(4)
    if target.arch != "x86_64":
        return None
    if lanes == 16 and "avx512vnni" in features:
        return DotProduct("vpdpbusd", 4, 16, np.dtype(np.uint8), np.dtype(np.int8))
    if lanes == 8 and ("avxvnni" in features or {"avx512vnni", "avx512vl"} <= features):
        return DotProduct("vpdpbusd", 4, 8, np.dtype(np.uint8), np.dtype(np.int8))
    if lanes >= 8 and "avx2" in features:
        return DotProduct("vpmaddwd", 2, 8, np.dtype(np.int16), np.dtype(np.int16))
    return None


def padded_k(k: int, group: int) -> int:
    return -(-k // group) * group


def packed_matrix(matrix: np.ndarray, nr: int, dot: DotProduct) -> np.ndarray:
    """[K, N] weights -> [N/NR panels, Kp/group, NR, group] in dot.weights, zero-padded: each
    panel a contiguous stream, one vector load per group of k (QMatMul's B)."""
    k, n = matrix.shape
    kp, panels = padded_k(k, dot.group), -(-n // nr)
    padded = np.zeros((kp, panels * nr), dot.weights)
    padded[:k, :n] = matrix
    return np.ascontiguousarray(padded.reshape(kp // dot.group, dot.group, panels, nr).transpose(2, 0, 3, 1))


# A depthwise QConv's stored weights: each kernel row's taps padded to a multiple of this, so
# the taps one int32 lane of vpdpbusd multiplies (hobbit.backend.cpu.int8_depthwise) are one
# aligned 32-bit word.
DEPTHWISE_WINDOW = 4


def is_depthwise(cg: int, group: int) -> bool:
    """Whether a conv of `cg` input channels per group is depthwise: its own kernel and
    weight layout (depthwise_filters)."""
    return cg == 1 and group > 1


def depthwise_row_taps(kw: int) -> int:
    """Stored taps per kernel row of a depthwise QConv."""
    return padded_k(kw, DEPTHWISE_WINDOW)


def depthwise_filters(centred: np.ndarray, dot: DotProduct) -> np.ndarray:
    """[OC, 1, KH, KW] centred filters -> [OC, KH * depthwise_row_taps(KW)] in dot.weights, each
    kernel row zero-padded."""
    oc, _, kh, kw = centred.shape
    stored = np.zeros((oc, kh, depthwise_row_taps(kw)), dot.weights)
    stored[:, :, :kw] = centred[:, 0]
    return stored.reshape(oc, -1)


def depthwise_unpacked(stored: np.ndarray, weight_shape: tuple[int, ...]) -> np.ndarray:
    """depthwise_filters' inverse: the [OC, 1, KH, KW] filters in its stored rows."""
    oc, _, kh, kw = weight_shape
    return stored.reshape(oc, kh, -1)[:, :, :kw].reshape(weight_shape)


def weight_panel_rows(conv_weights: tuple[int, ...], group: int, positions: int, target: Target) -> int:
    """Rows (output channels) per panel of a (not depthwise) QConv's stored weights, the MR of
    its GEMM. `conv_weights`: [OC, C/group, KH, KW]."""
    oc, cg, kh, kw = conv_weights
    return gemm_schedule(oc // group, positions, cg * kh * kw, target, 4).mr


def panel_filters(rows: np.ndarray, group: int, mr: int, dot: DotProduct) -> np.ndarray:
    """[OC, Kp] weights (Kp a multiple of dot.group) -> per group of the conv, panels of `mr`
    output channels, each [Kp/dot.group, mr, dot.group], the last one zero-padded: one
    micro-block's broadcasts are then one contiguous stream, and the whole layer's weights
    one sequential read (a row of a 1x1 conv at 7x7 is a few cache lines, too short a
    stream for the hardware prefetcher: ResNet-50's last 1x1 convs ran at 58% of the VNNI
    peak, nearly all of it in the k loop)."""
    oc, kp = rows.shape
    ocg = oc // group
    panels = -(-ocg // mr)
    out = np.zeros((group, panels * mr, kp), rows.dtype)
    out[:, :ocg] = rows.reshape(group, ocg, kp)
    out = out.reshape(group, panels, mr, kp // dot.group, dot.group).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(out).reshape(group * panels * mr, kp)


@dataclass(frozen=True)
class Int8ConvPlan:
    """How one QConv node runs. Sizes in bytes, per thread."""
    variant: str  # "gemm" (the dot-product GEMM) or "depthwise" (int32 lanes, one tap at a time)
    shape: ConvShape
    dot: DotProduct
    threads: int
    gemm: GemmSchedule  # mr rows x nv vectors of int32 accumulators
    rows: int  # output rows per band
    col: int  # this thread's im2col buffer: [K, rows*OW] bytes ("image": the threads' one, [K, OH*OW]; 0: none)
    pack: int  # this thread's packed panel: [Kp/group, NR, group] in dot.packed
    narrow: tuple[int, ...] = ()  # lane counts below dot.lanes a panel's last vector may use
    # "rows": each thread takes bands of output rows (its own im2col); "image": one im2col of
    # the whole image shared by the threads, then one GEMM the driver splits (see split_of)
    split: str = "rows"

    @property
    def format(self) -> Format:
        return self.dot.format

    def vector_lanes(self, width: int) -> list[int]:
        """Lanes of each accumulator vector of a panel `width` positions wide: whole vectors,
        then a narrower one for a rest that fits it. On Zen 4 a ymm vpdpbusd issues twice per
        cycle where a zmm one issues once (measured: 450 and 462 GOP/s), so a panel of 49
        positions (ResNet's 7x7 layers) on 3 zmm + 1 ymm costs 7/8 of 4 zmm: the 3x3 QConv
        of 512 channels at 7x7 ran 0.67 -> 0.59 ms at one thread (75% -> 85% of the peak)."""
        full, rest = divmod(width, self.dot.lanes)
        if not rest:
            return [self.dot.lanes] * full
        return [self.dot.lanes] * full + [min((n for n in self.narrow if n >= rest), default=self.dot.lanes)]

    @property
    def weight_row(self) -> int:
        """Elements of one output channel's stored weights: K padded to the group, or for a
        depthwise conv each kernel row padded (depthwise_filters)."""
        if self.variant == "depthwise":
            return self.shape.kh * depthwise_row_taps(self.shape.kw)
        return padded_k(self.k, self.dot.group)

    @property
    def k(self) -> int:
        return self.shape.cg * self.shape.kh * self.shape.kw

    @property
    def pack_offset(self) -> int:
        """Where the threads' packed panels start in scratch: after the im2col buffers."""
        return self.col if self.split == "image" else self.col * self.threads

    @property
    def scratch_bytes(self) -> int:
        return self.pack_offset + self.threads * self.pack


def int8_conv_plan(node: Node, target: Target, threads: int) -> Int8ConvPlan:
    s = conv_shape(node)
    dot = dot_product(target)
    if dot is None:
        raise TargetError(f"QConv '{node.name}': target '{target.cpu}' has no integer dot product")
    k = s.cg * s.kh * s.kw
    panel = node.attrs.get("weight_panel", 0)  # the int8 pass's panels fix MR
    gemm = gemm_schedule(s.ocg, s.oh * s.ow, k, target, 4, mr=panel or None)
    if is_depthwise(s.cg, s.group):
        return Int8ConvPlan("depthwise", s, dot, threads, gemm, 0, 0, 0)
    direct = s.pointwise
    rows = band_rows(s, k, target)
    narrow = narrow_lanes(dot, target)
    split = split_of(s, gemm, dot, narrow, rows, threads)
    col = 0 if direct else k * (s.oh if split == "image" else rows) * s.ow
    pack = padded_k(k, dot.group) * gemm.nr * dot.packed.itemsize
    return Int8ConvPlan("gemm", s, dot, threads, gemm, rows, col, pack, narrow, split)


def split_of(s: ConvShape, gemm: GemmSchedule, dot: DotProduct, narrow: tuple[int, ...], rows: int,
             threads: int) -> str:
    """How several threads share a QConv: bands of output rows ("rows") unless one GEMM over
    the whole image, its row blocks (output channels) split among the threads, costs the
    busiest thread less ("image"). Rows of few positions split badly: ResNet's 7x7 layers
    cut 4 + 3 rows, 28 and 21 positions, two vectors against one and a half, where one
    thread alone runs the image's 49 on three and a half; and every band streams all the
    layer's weights (megabytes at 7x7), where a split of the channels streams each thread's
    share once. Cost: vector instructions of the busiest thread, ymm ones at half a zmm's
    (Int8ConvPlan.vector_lanes)."""
    if threads == 1 or s.n * s.group > 1:
        return "rows"

    def vectors(width: int) -> float:
        full, rest = divmod(width, dot.lanes)
        last = min((n for n in narrow if n >= rest), default=dot.lanes) if rest else 0
        return full + last / dot.lanes

    blocks = -(-s.ocg // gemm.mr)
    banded = 0.0
    for share in (-(-s.oh // threads),):  # the taller share: the busiest thread's
        count, small, big = cut(share, rows)
        banded = max(banded, blocks * (big * vectors((small + 1) * s.ow) + (count - big) * vectors(small * s.ow)))
    image = -(-blocks // threads) * vectors(s.oh * s.ow)
    return "image" if image < IMAGE_SPLIT_GAIN * banded else "rows"


# The whole-image split is taken where it saves at least this share of the busiest thread's
# vector work: it repacks every panel in each thread and waits for the shared im2col.
IMAGE_SPLIT_GAIN = 0.95


def narrow_lanes(dot: DotProduct, target: Target) -> tuple[int, ...]:
    """The narrower vector vpdpbusd has beside 512-bit ones: 256 bits with AVX512-VL (128 bits
    would gain nothing: an xmm vpdpbusd issues at the ymm rate, 233 GOP/s measured). The AVX2
    vpmaddwd path keeps its one width."""
    if dot.name == "vpdpbusd" and dot.lanes == 16 and "avx512vl" in target.enabled:
        return (8,)
    return ()


def band_rows(s: ConvShape, k: int, target: Target) -> int:
    """Output rows per band: the band's columns of B (k bytes per position) take at most
    half of L2, so a panel packed from them is still in cache."""
    return max(1, min(s.oh, (target.l2_bytes // 2) // max(1, k * s.ow)))

