"""MatMul in bf16: a float32 A times constant B panels the bf16 pass stored as pairs
([panels, K/2, NR, 2]); A's rows are converted pair by pair as they are broadcast, so
a fully-connected layer at batch 1 (a GEMV) needs no scratch and no extra pass."""

from __future__ import annotations

from hobbit.errors import CodegenError
from hobbit.graph.shapes import broadcast_strides
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatB, MatC
from hobbit.backend.cpu.gemm_bf16 import FloatRowsA, emit_gemm_bf16
from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.gemm_bf16 import pairs


def lower_matmul_bf16(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    a_val, b_val = node.inputs
    out_shape = tuple(node.outputs[0].shape)
    M, K = a_val.shape[-2:]
    N = out_shape[-1]
    batch = out_shape[:-2]
    a_strides = broadcast_strides(tuple(a_val.shape[:-2]), batch)
    c_strides = broadcast_strides(batch, batch)
    sched = gemm_schedule(M, N, pairs(K), k.target)
    if tuple(b_val.shape[1:3]) != (pairs(K), sched.nr):
        raise CodegenError(f"MatMul {node.name!r}: bf16 weight panels {tuple(b_val.shape)} do not match the "
                           f"schedule's K/2 = {pairs(K)}, NR = {sched.nr}")
    epilogue = Epilogue(kb, node, k.epilogue, out_shape)

    def level(d: int, index: list) -> None:
        if d < len(batch):
            with kb.loop(0, batch[d], name=f"b{d}") as i:
                level(d + 1, index + [i])
            return
        a = FloatRowsA(k.inputs[0], kb.affine(list(zip(index, [s * M * K for s in a_strides]))),
                       panel=sched.mr * K, m=K)
        b = MatB(k.inputs[1], 0, k=sched.nr, panel=pairs(K) * sched.nr)
        c = MatC(k.outputs[0], kb.affine(list(zip(index, [s * M * N for s in c_strides]))), m=N)

        def epi(e: Emit, v, m, n, mask, index=index):
            return epilogue.apply(e, v, index + [m, n], mask)

        emit_gemm_bf16(kb, sched, M, N, K, a, b, c, epi, k.threads)

    level(0, [])
