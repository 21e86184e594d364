"""MatMul with numpy semantics (batched, broadcast batch dims) on the GEMM driver, in its
plan's operand format (hobbit.plan.matmul).

In bf16 the constant B is the bf16 pass's panels of pairs ([panels, K/2, NR, 2]) and A stays
float32, its rows converted pair by pair as they are broadcast (dpbf16.FloatRowsA), so a
fully-connected layer at batch 1 (a GEMV) needs no scratch and no extra pass."""

from __future__ import annotations

from hobbit.errors import CodegenError
from hobbit.graph.shapes import broadcast_strides
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.dpbf16 import FloatRowsA
from hobbit.backend.cpu.gemm import MatB, MatC, emit_gemm, row_major_a
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.plan.matmul import MatMulPlan


def lower_matmul(k: KernelArgs) -> None:
    plan: MatMulPlan = k.plan
    kb, node, fmt, sched = k.kb, k.node, plan.format, plan.gemm
    a_val, b_val = node.inputs
    out_shape = tuple(node.outputs[0].shape)
    M, K = a_val.shape[-2:]
    N = out_shape[-1]
    steps = fmt.steps(K)
    packed = node.attrs.get("b_layout") == "panels"  # (always so in bf16: the pass converts only panels)
    batch = out_shape[:-2]
    a_strides = broadcast_strides(tuple(a_val.shape[:-2]), batch)
    b_strides = [0] * len(batch) if packed else broadcast_strides(tuple(b_val.shape[:-2]), batch)
    c_strides = broadcast_strides(batch, batch)
    if fmt.converts and tuple(b_val.shape[1:3]) != (steps, sched.nr):
        raise CodegenError(f"MatMul {node.name!r}: {fmt.name} weight panels {tuple(b_val.shape)} do not match the "
                           f"schedule's K/{fmt.k_step} = {steps}, NR = {sched.nr}")
    epilogue = Epilogue(kb, node, k.epilogue, out_shape)

    def level(d: int, index: list) -> None:
        if d < len(batch):
            with kb.loop(0, batch[d], name=f"b{d}") as i:
                level(d + 1, index + [i])
            return
        a_off = kb.affine(list(zip(index, [s * M * K for s in a_strides])))
        a = FloatRowsA(k.inputs[0], a_off, panel=sched.mr * K, m=K) if fmt.converts \
            else row_major_a(k.inputs[0], a_off, K, sched.mr)
        if packed:
            b = MatB(k.inputs[1], 0, k=sched.nr, panel=steps * sched.nr)
        else:
            b = MatB(k.inputs[1], kb.affine(list(zip(index, [s * K * N for s in b_strides]))), k=N)
        c = MatC(k.outputs[0], kb.affine(list(zip(index, [s * M * N for s in c_strides]))), m=N)

        def epi(e: Emit, v, m, n, mask, index=index):
            return epilogue.apply(e, v, index + [m, n], mask)

        emit_gemm(kb, sched, M, N, K, a, b, c, fmt, epi, k.threads)

    level(0, [])


CPU.register("MatMul", lower=lower_matmul)
