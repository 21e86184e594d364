"""Winograd F(m x m, 3x3): the transform matrices, the weight transform and the panel
layout of the transformed weights.

The winograd pass transforms and packs the weights at compile time and the emitter
(hobbit.lower.winograd) reads them back in that layout; both take it from here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.plan.conv import ConvShape
from hobbit.plan.gemm import gemm_schedule, pack_panels, unpack_panels
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
    """[OC, C, 3, 3] -> U[a*a, OC, C] with U[i*a + j] = (G g G^T)[i, j]."""
    g = VARIANTS[m].G
    u = np.einsum("ik,ockl,jl->ijoc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(-1, w.shape[0], w.shape[1])).astype(w.dtype)


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
