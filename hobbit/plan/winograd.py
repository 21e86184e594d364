"""Winograd F(m x m, 3x3): the transform matrices, the weight transform and the panel
layout of the transformed weights, and the plan of a ConvWinograd node.

The winograd pass transforms and packs the weights at compile time and the emitter
(hobbit.backend.cpu.winograd) reads them back in that layout; both take it from here, and
memory planning and the emitter read one WinogradPlan for the bands and the scratch.

The plan carries the a*a GEMMs' operand Format (hobbit.plan.format). A ConvWinograd the
bf16 pass gave bf16 weights keeps float32 transforms (their adds are cheap, and rounding
the input patch before B^T d B would put bf16's error on every tap): only the GEMMs run on
vdpbf16ps, at twice the float32 rate. The layout of the phases is the float32 one; what
changes is the GEMMs' K, counted in pairs of channels, and B's packing buffer, which every
tile-wise GEMM then needs, since packing is where V is converted to pairs. Transposed
GEMMs (tiles as rows) convert V in place instead: its [C, T] float32 rows become [C/2, T]
pairs in the first half of the same space."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.extents import is_dynamic
from hobbit.graph.ir import Node
from hobbit.plan.bands import band_heights
from hobbit.plan.conv import ConvShape, conv_shape
from hobbit.plan.format import Format, node_format
from hobbit.plan.gemm import GemmSchedule, gemm_schedule, pack_elems, pack_panels, unpack_panels
from hobbit.target import Target


@dataclass(frozen=True)
class Variant:
    """The transform matrices of F(m x m, 3 x 3) (Lavin & Gray's construction)."""
    m: int
    BT: np.ndarray
    G: np.ndarray
    AT: np.ndarray

    @property
    def alpha(self) -> int:
        return self.m + 2


VARIANTS = {
    2: Variant(2,
               np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
               np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64),
               np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)),
    4: Variant(4,
               np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                         [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=np.float64),
               np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                         [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64),
               np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                         [0, 1, -1, 8, -8, 1]], dtype=np.float64)),
}


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """[OC, C, 3, 3] -> U[a*a, OC, C] with U[i*a + j] = (G g G^T)[i, j].

    One GEMM in float64: (G kron G)[i*a + j, k*3 + l] = G[i, k] G[j, l] applied to the 9 taps
    of every filter at once. numpy's einsum of the same product took 0.15 s for one
    512x512 bank's F(4x4) and 0.07 s for its F(2x2) (VGG-16 has ten such banks of 256-512
    channels); the GEMM takes 0.024 and 0.01 s."""
    oc, c = w.shape[:2]
    g = VARIANTS[m].G
    taps = w.astype(np.float64).transpose(2, 3, 0, 1).reshape(9, oc * c)
    return (np.kron(g, g) @ taps).reshape(-1, oc, c).astype(w.dtype)


def tiles_as_rows(s: ConvShape, m: int, target: Target) -> bool:
    """Whether the GEMMs run transposed, M^T = V^T U^T: rows are tiles and vectors run
    along output channels. With few tiles (at most four vectors of them: 7x7 to 28x28
    images) a tile-wise block is one to four vectors wide and U, several MB, streams
    through scalar broadcasts that each feed as few FMAs; transposed, U streams as
    vectors that each feed a block's MR rows (ResNet-50's 512-channel 7x7 conv: 2.2 ->
    1.85 ms at one thread, 1.3 -> 1.0 ms at two). A single K chunk keeps M^T's strided
    stores to the last chunk."""
    th, tw = tiles(s, m)
    sched = gemm_schedule(th * tw, s.oc, s.c, target)
    return th * tw <= 4 * target.lanes(4) and s.oc % sched.nr == 0 and s.c <= sched.kc


def weight_panel(s: ConvShape, m: int, target: Target) -> int:
    """Output channels per packed panel of U: the GEMM microkernel's NR when tiles are
    rows, else its MR (as many rows as fit the registers beside a block three vectors wide)."""
    if tiles_as_rows(s, m, target):
        th, tw = tiles(s, m)
        return gemm_schedule(th * tw, s.oc, s.c, target).nr
    return max(1, min(8, (target.vector_registers - 4) // 3))


def pack_weights(u: np.ndarray, rows: int) -> np.ndarray:
    """U[a*a, OC, C] -> [a*a, ceil(OC/rows), C, rows]: each U[xi]^T cut into panels of
    `rows` output channels, so one layout serves as a packed A (panels of MR rows) and
    as a packed B (tiles as rows: panels of NR columns)."""
    return np.stack([pack_panels(ux.T, rows) for ux in u])


def unpack_weights(packed: np.ndarray, oc: int) -> np.ndarray:
    """The inverse of pack_weights."""
    return np.stack([unpack_panels(px, oc).T for px in packed])


def tiles(s: ConvShape, m: int) -> tuple[int, int]:
    return -(-s.oh // m), -(-s.ow // m)


def plane_hw(s: ConvShape, m: int) -> tuple[int, int]:
    """Padded plane big enough that every tile's input patch is in bounds."""
    th, tw = tiles(s, m)
    return m * th + 2, m * tw + 2


def phase_len(s: ConvShape, m: int) -> int:
    """Elements per phase of a padded plane row stored by phase: columns m*j + p for
    j = 0 .. tw (tile tw - 1 reads two columns past its own m)."""
    return tiles(s, m)[1] + 1


def plane_row(s: ConvShape, m: int) -> int:
    """Elements per padded plane row stored by phase (backend/cpu/copy.emit_deinterleaved_row_copy):
    m phases, so column m*j + p of consecutive tiles j is one contiguous load."""
    return m * phase_len(s, m)


def tile_gemm(s: ConvShape, m: int, t: int, target: Target, fmt: Format) -> GemmSchedule:
    """The schedule of the tile-wise GEMMs M[xi] = U[xi] @ V[xi] over t tiles: MR is U's panel,
    K the C channels in `fmt`'s steps."""
    return gemm_schedule(s.oc, t, fmt.steps(s.c), target, mr=weight_panel(s, m, target))


MAX_BANDED_WEIGHTS = 8 << 20  # U is re-read once per band: keep it L3-sized
MIN_BAND_VECTORS = 3  # tiles per band, in vectors: narrower GEMMs lose more than L2 saves


def band_rows(s: ConvShape, m: int, target: Target, threads: int) -> int:
    """Tile rows per band when the whole image's V and M would overflow L2 (0: no bands).

    A band's V and M take about half of L2 but hold at least three vectors of tiles (narrower
    GEMMs lose more than L2 saves); the transformed weights, read again for every band, must
    stay small. With vectorised transforms bands won on one thread too (VGG-16's
    224x224x64 conv: 19 ms whole-image, 15 ms in bands)."""
    th, tw = tiles(s, m)
    aa = (m + 2) ** 2
    if tiles_as_rows(s, m, target) or aa * (s.c + s.oc) * th * tw * 4 <= target.l2_bytes \
            or aa * s.oc * s.c * 4 > MAX_BANDED_WEIGHTS:
        return 0
    rows = band_height(s, m, target, threads, th, tw)
    return rows if rows < th else 0


def band_budget(s: ConvShape, m: int, target: Target) -> tuple[int, int]:
    """(most, least): a band holds about `most` tiles (its V and M take half of L2), and at
    least `least` (MIN_BAND_VECTORS vectors of them)."""
    return (target.l2_bytes // 2) // ((m + 2) ** 2 * (s.c + s.oc) * 4), MIN_BAND_VECTORS * target.lanes(4)


def band_height(s: ConvShape, m: int, target: Target, threads: int, th: int, tw: int) -> int:
    """Tile rows per band of th x tw tiles (band_budget's, and no more than a thread's share).
    A banded conv with run-time lengths computes the same at run time
    (hobbit.backend.cpu.winograd), within band_capacity."""
    most, least = band_budget(s, m, target)
    rows = max(1, most // tw, -(-least // tw))
    return min(rows, -(-th // threads))  # several threads share bands, not one whole image


def band_capacity(s: ConvShape, m: int, target: Target, threads: int) -> tuple[int, int]:
    """(rows, tiles): the most tile rows, and tiles, a band of band_height holds at any run-time
    length up to s's (a band's scratch is sized by them)."""
    th, tw = tiles(s, m)
    heights = [(band_height(s, m, target, threads, th, w), w) for w in range(1, tw + 1)]
    return max(rows for rows, _ in heights), max(rows * w for rows, w in heights)


@dataclass(frozen=True)
class WinogradPlan:
    """How one ConvWinograd node runs: all tiles at once, or in bands of tile rows.

    Scratch, in elements. Whole image: every thread's padded plane from 0, then V and M
    (shared), then every thread's packing buffer. Banded: every thread's band plane, V
    and M of its band, and packing buffer, region by region."""
    shape: ConvShape
    m: int
    threads: int
    itemsize: int
    format: Format  # the GEMMs' operands (K counted in its steps)
    by_tile: bool  # the GEMMs run transposed (tiles_as_rows)
    band: int  # tile rows per band (0: the whole image at once)
    plane: int  # a thread's padded plane (of the image, or of a band of input rows)
    v: int  # V: of the image (shared), or of a thread's band
    mm: int  # M, likewise
    pack: int  # a thread's B packing buffer (0: B is read in place)
    gemm: GemmSchedule | None  # the whole image's GEMM schedule (banded: tile_gemm per band height)
    # Tiles between consecutive rows of V and M: the image's, or a band's (static bands: the
    # tallest band's; each band lays out its own); with run-time lengths padded (run_time_stride).
    stride: int

    @property
    def v_off(self) -> int:
        return self.threads * self.plane

    @property
    def m_off(self) -> int:
        return self.v_off + self.v

    @property
    def pack_off(self) -> int:
        return self.m_off + self.mm

    @property
    def scratch_elems(self) -> int:
        if self.band:
            return self.threads * (self.plane + self.v + self.mm + self.pack)
        return self.pack_off + self.threads * self.pack

    @property
    def scratch_bytes(self) -> int:
        return self.scratch_elems * self.itemsize


def winograd_plan(node: Node, target: Target, threads: int) -> WinogradPlan:
    s, m = conv_shape(node), node.attrs["tile"]
    itemsize = np.dtype(node.inputs[0].dtype).itemsize
    fmt = node_format(node)
    th, tw = tiles(s, m)
    aa = (m + 2) ** 2
    by_tile = tiles_as_rows(s, m, target)
    band = band_rows(s, m, target, threads)
    if band and is_dynamic(node):  # bands of band_height at the run-time lengths: one schedule, at the most tiles
        rows, t = band_capacity(s, m, target, threads)
        stride = run_time_stride(t)
        return WinogradPlan(s, m, threads, itemsize, fmt, by_tile, band, (rows * m + 2) * plane_row(s, m),
                            aa * s.c * stride, aa * s.oc * stride, _pack_size(s, m, t, target, fmt), None, stride)
    if band:
        pack = max(_pack_size(s, m, r * tw, target, fmt) for r in band_heights(th, band, threads))
        return WinogradPlan(s, m, threads, itemsize, fmt, by_tile, band, (band * m + 2) * plane_row(s, m),
                            aa * s.c * band * tw, aa * s.oc * band * tw, pack, None, band * tw)
    t = th * tw
    stride = run_time_stride(t) if is_dynamic(node) else t
    gemm = gemm_schedule(t, s.oc, fmt.steps(s.c), target) if by_tile else tile_gemm(s, m, t, target, fmt)
    return WinogradPlan(s, m, threads, itemsize, fmt, by_tile, 0, plane_hw(s, m)[0] * plane_row(s, m),
                        aa * s.c * stride, aa * s.oc * stride, _pack_size(s, m, t, target, fmt), gemm, stride)


def run_time_stride(tiles: int) -> int:
    """The rows' stride of V and M holding up to `tiles` tiles for run-time lengths: an odd
    count. Measured, not derived: rows a multiple of 32 bytes apart ran a 128-channel 28x28
    conv (tiles as the GEMMs' rows) on a 30x30 bound (64 tiles) at 1.34x a static compile at
    28x28 (49 tiles a row), at 1.07x with 65; a 64-channel conv in bands of up to 60 tiles
    at 56x56 on a 64x64 bound 0.99x a static compile with 60, 0.94x with 61 (80: 1.25x)."""
    return tiles + 1 - tiles % 2


def _pack_size(s: ConvShape, m: int, t: int, target: Target, fmt: Format) -> int:
    """A thread's B packing buffer (of V) for the tile-wise GEMMs over t tiles. A converting
    format always packs (packing converts V), except with tiles as rows (V is A)."""
    if tiles_as_rows(s, m, target):
        return 0
    sched = tile_gemm(s, m, t, target, fmt)
    return sched.kc * sched.nr if fmt.converts else pack_elems(sched, s.oc)
