"""MatMul with numpy semantics (batched, broadcast batch dims) on the GEMM microkernel."""

from __future__ import annotations

import numpy as np

from hobbit.graph.shapes import broadcast_strides
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatB, MatC, emit_gemm, row_major_a
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.matmul_bf16 import lower_matmul_bf16
from hobbit.emit.scalar import Emit
from hobbit.plan.conv_bf16 import is_bf16
from hobbit.plan.gemm import gemm_schedule


def lower_matmul(k: KernelArgs) -> None:
    if is_bf16(k.node):
        lower_matmul_bf16(k)
        return
    kb, node = k.kb, k.node
    a_val, b_val = node.inputs
    out_shape = tuple(node.outputs[0].shape)
    dtype = node.outputs[0].dtype
    M, K = a_val.shape[-2:]
    N = out_shape[-1]
    packed = node.attrs.get("b_layout") == "panels"
    batch = out_shape[:-2]
    a_strides = broadcast_strides(tuple(a_val.shape[:-2]), batch)
    b_strides = [0] * len(batch) if packed else broadcast_strides(tuple(b_val.shape[:-2]), batch)
    c_strides = broadcast_strides(batch, batch)
    sched = gemm_schedule(M, N, K, k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, out_shape)

    def level(d: int, index: list) -> None:
        if d < len(batch):
            with kb.loop(0, batch[d], name=f"b{d}") as i:
                level(d + 1, index + [i])
            return
        a = row_major_a(k.inputs[0], kb.affine(list(zip(index, [s * M * K for s in a_strides]))), K, sched.mr)
        if packed:
            b = MatB(k.inputs[1], 0, k=sched.nr, panel=K * sched.nr)
        else:
            b = MatB(k.inputs[1], kb.affine(list(zip(index, [s * K * N for s in b_strides]))), k=N)
        c = MatC(k.outputs[0], kb.affine(list(zip(index, [s * M * N for s in c_strides]))), m=N)

        def epi(e: Emit, v, m, n, mask, index=index):
            return epilogue.apply(e, v, index + [m, n], mask)

        emit_gemm(kb, sched, M, N, K, a, b, c, dtype, epi, k.threads)

    level(0, [])


CPU.register("MatMul", lower=lower_matmul)
