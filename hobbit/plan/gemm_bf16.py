"""The compile-time layouts of bf16 GEMM operands (hobbit.backend.cpu.gemm_bf16 reads them).

vdpbf16ps takes k two at a time, so both operands keep consecutive k side by side:
a broadcast operand (conv weights, rows of the GEMM's A) as [M, K/2, 2], a vector
operand (panels of fully-connected or "KO" conv weights) as [panels, K/2, NR, 2],
K padded to even with zeros. Values round to nearest even (ml_dtypes' conversion,
the same rounding as vcvtneps2bf16 for the activations)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def pairs(count: int) -> int:
    """Pairs of k that hold `count` consecutive k, the last padded with a zero."""
    return -(-count // 2)


def pair_rows(matrix: np.ndarray) -> np.ndarray:
    """[M, K] float32 -> [M, K/2, 2] bf16: row m's pair j is (A[m, 2j], A[m, 2j+1])."""
    m, k = matrix.shape
    out = np.zeros((m, 2 * pairs(k)), dtype=BFLOAT16)
    out[:, :k] = matrix.astype(BFLOAT16)
    return out.reshape(m, pairs(k), 2)


def pair_panels(panels: np.ndarray) -> np.ndarray:
    """[P, K, NR] float32 panels (hobbit.plan.gemm.pack_panels) -> [P, K/2, NR, 2] bf16."""
    p, k, nr = panels.shape
    out = np.zeros((p, 2 * pairs(k), nr), dtype=BFLOAT16)
    out[:, :k] = panels.astype(BFLOAT16)
    return np.ascontiguousarray(out.reshape(p, pairs(k), 2, nr).transpose(0, 1, 3, 2))
