"""The operand format of a GEMM: what its microkernel multiplies, how many k one operand
word holds, and what it sums into; and the compile-time layouts of weights in that format.

Every GEMM-shaped kernel (conv, matmul, Winograd's tile products) runs on one driver per
backend (hobbit.backend.cpu.gemm) whose microkernel steps over k one 32-bit operand word at
a time. The kernel's plan carries its Format, decided once from the precision the passes
gave the node (node_format); the schedules count K in the format's steps, the passes lay
the weights out with word_rows and word_panels, and the backend builds the microkernel the
format names (`micro`).

* float (FP32; float64 nodes too, the format takes the node's dtype): one k per word, a
  vector FMA per step.
* BF16 (vdpbf16ps, AVX512-BF16): two k per word. The instruction multiplies 32 bf16 pairs
  and adds each pair's two products to one float32 lane, so both operands keep consecutive
  k side by side: a broadcast operand (conv weights, rows of the GEMM's A) as [M, K/2, 2],
  a vector operand (panels of fully-connected or "KO" conv weights) as [panels, K/2, NR, 2],
  K padded to even with zeros. Values round to nearest even (ml_dtypes' conversion, the
  same rounding as vcvtneps2bf16 for the activations). Activations stay float32 until the
  GEMM packs (or, as A, broadcasts) them.
* integer dot products fit the same fields: k_step consecutive bytes (vpdpbusd: 4) or
  int16s (vpmaddwd: 2) per 32-bit word, activations and weights of different types,
  int32 accumulators (hobbit.plan.int8.DotProduct.format; hobbit.backend.cpu.gemm_dot)."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from hobbit.graph.ir import Node

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Format:
    """A GEMM's operand format."""
    name: str  # "fp32", "fp64", "bf16", "int8"
    micro: str  # the micro-instruction the backend's microkernel is built on: "fma", "vdpbf16ps", "vpdpbusd"...
    k_step: int  # consecutive k side by side in one 32-bit operand word (1: one element a word)
    activations: np.dtype  # the activation operand as the microkernel reads it (after packing)
    weights: np.dtype  # the weight operand as stored
    accumulator: np.dtype  # the sums, and C

    def steps(self, k: int) -> int:
        """Operand words that hold `k` consecutive k, the last padded with zeros."""
        return -(-k // self.k_step)

    @property
    def converts(self) -> bool:
        """Whether activations reach the microkernel only through a conversion into operand
        words: a B of activations is then always packed (packing is where it converts), an A
        of them converted before the GEMM or as it is broadcast."""
        return self.k_step > 1

    def word_rows(self, matrix: np.ndarray) -> np.ndarray:
        """[M, K] -> [M, K/k_step, k_step] weights: row m's word j holds A[m, k_step*j ...]."""
        m, k = matrix.shape
        out = np.zeros((m, self.k_step * self.steps(k)), dtype=self.weights)
        out[:, :k] = matrix.astype(self.weights)
        return out.reshape(m, self.steps(k), self.k_step)

    def word_panels(self, panels: np.ndarray) -> np.ndarray:
        """[P, K, NR] panels (hobbit.plan.gemm.pack_panels) -> [P, K/k_step, NR, k_step] weights."""
        p, k, nr = panels.shape
        out = np.zeros((p, self.k_step * self.steps(k), nr), dtype=self.weights)
        out[:, :k] = panels.astype(self.weights)
        return np.ascontiguousarray(out.reshape(p, self.steps(k), self.k_step, nr).transpose(0, 1, 3, 2))


def float_format(dtype: np.dtype) -> Format:
    """The format of a GEMM computed in the node's own float type, on vector FMAs."""
    dtype = np.dtype(dtype)
    name = f"fp{8 * dtype.itemsize}" if dtype.kind == "f" else dtype.name
    return Format(name, "fma", 1, dtype, dtype, dtype)


FP32 = float_format(FLOAT32)
BF16 = Format("bf16", "vdpbf16ps", 2, BFLOAT16, BFLOAT16, FLOAT32)

# The precisions a pass can give a node (node.attrs["precision"]) and their formats.
PRECISIONS: dict[str, Format] = {"bf16": BF16}


def node_format(node: Node, dtype: np.dtype | None = None) -> Format:
    """The format a node's GEMMs run in: the one its precision attribute names (the bf16 pass
    sets it), else its own float type (`dtype`, by default its first input's)."""
    named = PRECISIONS.get(node.attrs.get("precision"))
    if named is not None:
        return named
    return float_format(node.inputs[0].dtype if dtype is None else dtype)
