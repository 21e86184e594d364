"""QMatMul: int8 activations [M, K] times constant int8 weights [K, N] (fully-connected
layers), on the target's dot product, requantized per column.

A client of the int8 GEMM (hobbit.backend.cpu.gemm_dot): vectors run along N, over weights
packed at compile time in NR-column panels of the dot product's layout
(hobbit.plan.int8.packed_matrix), so each panel is one contiguous stream; each row's group
of k activations is one broadcast 32-bit word. At batch 1 this is a matrix-vector product
bound by reading the weights: a quarter of the float32 bytes. Threads share the panels.
QMatMulInteger (MatMulInteger) is the same product with an int32 epilogue."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.gemm import Index, MatA, MatB, MatC
from hobbit.backend.cpu.gemm_dot import DotGemm
from hobbit.backend.cpu.int8_vector import requantize, zero_byte, zero_read
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.int8 import dot_product, padded_k

I32_DTYPE = np.dtype(np.int32)
F32_DTYPE = np.dtype(np.float32)


def lower_qmatmul(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    a = node.attrs
    x = node.inputs[0]
    rows = int(np.prod(x.shape[:-1]))
    dot = dot_product(k.target)
    sched = gemm_schedule(rows, a["n"], a["k"], k.target, 4)  # the pass packed the weights for its NR
    x_ptr, w = k.inputs[:2]
    groups = padded_k(a["k"], dot.group) // dot.group
    integer = node.op == "QMatMulInteger"
    gemm = DotGemm(kb, sched, dot, rows, a["n"], a["k"],
                   MatA(x_ptr, 0, panel=sched.mr * a["k"], k=dot.group, m=a["k"]),
                   MatB(w, 0, k=sched.nr * dot.group, panel=groups * sched.nr * dot.group),
                   MatC(k.outputs[0], 0, m=a["n"]), I32_DTYPE if integer else np.dtype(a["to"]),
                   _Epilogue(kb, node, k.inputs, integer), None, "a", np.dtype(x.dtype) == np.int8)
    panels, blocks = -(-a["n"] // sched.nr), -(-rows // sched.mr)
    if k.threads.max_threads == 1:
        gemm.chunks((0, panels), (0, blocks))
    else:
        k.threads.shares(panels, lambda lo, hi: gemm.chunks((lo, hi), (0, blocks)))


class _Epilogue:
    """C's int32 sums at row m, columns n.. to what QMatMul stores: requantized per column
    (offset, multiplier), or for QMatMulInteger less the run-time zero point times the
    column sums of the weights."""

    def __init__(self, kb: KernelBuilder, node, inputs, integer: bool):
        self.kb, self.attrs, self.integer = kb, node.attrs, integer
        if integer:
            self.sums, self.zero = inputs[2], zero_read(kb, node, zero_byte(kb, inputs[3]))
        else:
            self.offset, self.multiplier = inputs[2:4]

    def __call__(self, acc: ir.Value, m: Index, n: Index, at: Index, mask: ir.Value | None) -> ir.Value:
        kb, lanes = self.kb, acc.type.count
        if self.integer:
            return kb.b.sub(acc, kb.b.mul(kb.splat(self.zero, lanes), kb.vload(self.sums, I32_DTYPE, n, lanes, mask)))
        return requantize(kb, self.attrs, acc, kb.vload(self.offset, I32_DTYPE, n, lanes, mask),
                          kb.vload(self.multiplier, F32_DTYPE, n, lanes, mask))


CPU.register("QMatMul", lower=lower_qmatmul)
CPU.register("QMatMulInteger", lower=lower_qmatmul)
