"""GEMM schedules chosen from shapes and the target description, never per model, and
the panel layout of a B matrix packed at compile time for them (the layout pass packs
constants, the microkernel in hobbit.backend.cpu.gemm reads them).

The GEMM microkernel keeps an MR x NR block of C in vector registers
(NR = nv vectors): MR*nv accumulators + nv B vectors + one broadcast must fit
the register file. K is split into chunks whose B panel stays in L2 while
every MR-row block of A streams past it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.target import Target


@dataclass(frozen=True)
class GemmSchedule:
    mr: int  # rows of C per microkernel
    nv: int  # vectors of C per row per microkernel
    vw: int  # lanes per vector
    kc: int  # K chunk

    @property
    def nr(self) -> int:
        return self.nv * self.vw


def gemm_schedule(m: int, n: int, k: int, target: Target, itemsize: int = 4,
                  mr: int | None = None) -> GemmSchedule:
    """`mr` fixes the rows per microkernel (for an A packed in panels of that many rows at
    compile time); the vectors per row then shrink until the block fits the registers."""
    vw = target.lanes(itemsize)
    regs = target.vector_registers
    nv = max(1, min(4, -(-n // vw)))
    if mr is None:
        mr = max(1, min(m, (regs - nv - 1) // nv, 8))
    else:
        nv = max(1, min(nv, (regs - 1) // (mr + 1)))
    # B panel (kc x NR) plus A block (mr x kc) should sit well inside L2, for the next
    # block to reuse. With a single block of rows (a GEMV: fully-connected layers at batch 1)
    # nothing reuses the panel, and one K chunk streams it front to back (VGG-16's first FC
    # layer: 13.6 -> 13.2 ms at one thread).
    kc_limit = max(64, target.l2_bytes // (4 * itemsize * nv * vw))
    kc = k if k <= kc_limit or m <= mr else _even_split(k, kc_limit)
    return GemmSchedule(mr=mr, nv=nv, vw=vw, kc=kc)


# Below this K a B panel is copied for too little work: the k loop of each block is short,
# and MobileNetV2's stem (K = 27) and first projection (K = 32) ran 13% and 40% faster
# reading B in place.
MIN_PACKED_K = 64


def pack_elems(s: GemmSchedule, M: int) -> int:
    """Size of one thread's B packing buffer (one K chunk of one NR-column panel), or 0
    when too few MR-row blocks or k steps would use a packed panel to pay for the copy."""
    return s.kc * s.nr if M > 2 * s.mr and s.kc >= MIN_PACKED_K else 0


def _even_split(k: int, limit: int) -> int:
    """The chunk size that splits k into the fewest near-equal chunks <= limit."""
    chunks = -(-k // limit)
    return -(-k // chunks)


def pack_panels(matrix: np.ndarray, nr: int) -> np.ndarray:
    """[K, N] -> [ceil(N/NR), K, NR], the last panel zero-padded: the compile-time layout a
    MatB with panel = K*NR reads. Written straight into the result: a padded copy first held
    VGG-16's 411 MB fc1 weight a third time at the layout pass's memory peak."""
    k, n = matrix.shape
    panels, full = -(-n // nr), n // nr
    packed = np.zeros((panels, k, nr), dtype=matrix.dtype)
    packed[:full] = matrix[:, :full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    if full < panels:
        packed[full, :, :n - full * nr] = matrix[:, full * nr:]
    return packed


def unpack_panels(packed: np.ndarray, n: int) -> np.ndarray:
    """[P, K, NR] panels back to the [K, N] matrix they were cut from."""
    panels, k, nr = packed.shape
    return packed.transpose(1, 0, 2).reshape(k, panels * nr)[:, :n]
