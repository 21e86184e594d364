"""MatMul with numpy semantics (batched, broadcast batch dims) on the GEMM driver, in its
plan's operand format (hobbit.plan.matmul).

In bf16 the constant B is the bf16 pass's panels of pairs ([panels, K/2, NR, 2]) and A stays
float32, its rows converted pair by pair as they are broadcast (dpbf16.FloatRowsA), so a
fully-connected layer at batch 1 (a GEMV) needs no scratch and no extra pass.

With run-time dims (hobbit.graph.extents; float32: matmul_dynamic says which) the operands
keep their bound layout and the GEMM its schedule for the bound, while M, N, K and the
batch dims take their lengths at run time (hobbit.backend.cpu.gemm.emit_gemm_runtime): a
linear layer's rows (a constant B: threads share its panels, as at a static M), and an
attention product's rows, columns and reduction. A product of two activations is shared
among the threads by its (batch, M block) pairs, in claimed runs, so the heads of a short
sequence keep every thread busy."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.graph.extents import is_dynamic
from hobbit.graph.ir import Node
from hobbit.graph.shapes import broadcast_strides
from hobbit.ops.nn import matmul_b_shape
from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.dpbf16 import FloatRowsA
from hobbit.backend.cpu.gemm import (MatB, MatC, ceil_units, emit_gemm, emit_gemm_runtime, row_major_a,
                                     runtime_gemm)
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.plan.format import FLOAT32, node_format
from hobbit.plan.matmul import MatMulPlan


def lower_matmul(k: KernelArgs) -> None:
    if is_dynamic(k.node):
        _lower_runtime(k)
        return
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


Index = int | ir.Value


def _lower_runtime(k: KernelArgs) -> None:
    """lower_matmul for a node with run-time dims (see matmul_dynamic)."""
    plan: MatMulPlan = k.plan
    kb, node, fmt, sched = k.kb, k.node, plan.format, plan.gemm
    a_val, b_val = node.inputs
    out = node.outputs[0]
    out_shape = tuple(out.shape)
    M, K = a_val.shape[-2:]  # the bound's, as every stride
    N = out_shape[-1]
    extents = k.extents(out)
    m_len, n_len, k_len = extents[-2], extents[-1], k.extent(a_val, len(a_val.shape) - 1)
    packed = node.attrs.get("b_layout") == "panels"
    batch, batch_len = out_shape[:-2], extents[:-2]
    a_strides = broadcast_strides(tuple(a_val.shape[:-2]), batch)
    b_strides = [0] * len(batch) if packed else broadcast_strides(tuple(b_val.shape[:-2]), batch)
    c_strides = broadcast_strides(batch, batch)
    epilogue = Epilogue(kb, node, k.epilogue, out_shape)

    def operands(index: list[Index]) -> tuple:
        a = row_major_a(k.inputs[0], kb.affine(list(zip(index, [s * M * K for s in a_strides]))), K, sched.mr)
        if packed:
            b = MatB(k.inputs[1], 0, k=sched.nr, panel=sched.nr * K)
        else:
            b = MatB(k.inputs[1], kb.affine(list(zip(index, [s * K * N for s in b_strides]))), k=N)
        c = MatC(k.outputs[0], kb.affine(list(zip(index, [s * M * N for s in c_strides]))), m=N)

        def epi(e: Emit, v, m, n, mask):
            return epilogue.apply(e, v, index + [m, n], mask)
        return a, b, c, fmt, epi

    if packed or k.threads.max_threads == 1:
        def level(d: int, index: list[Index]) -> None:
            if d < len(batch):
                with kb.loop(0, batch_len[d], name=f"b{d}") as i:
                    level(d + 1, index + [i])
                return
            emit_gemm_runtime(kb, sched, m_len, n_len, k_len, *operands(index), k.threads, (M, N, K))
        level(0, [])
        return

    # Two activations: threads share the (batch, M block) pairs, in claimed runs of their run-time count.
    b = kb.b
    blocks = ceil_units(kb, m_len, sched.mr)
    count: Index = 1
    for n in batch_len:
        count = kb.mul(count, n)
    per = _imax(kb, kb.idx(blocks), kb.i64(1))  # (no rows: no units, and no division by zero)

    def run(lo: Index, hi: Index) -> None:
        first = b.udiv(kb.idx(lo), per)
        end = b.udiv(b.add(kb.idx(hi), b.sub(per, kb.i64(1))), per)
        with kb.loop(first, end, name="bm") as flat:
            start = b.mul(flat, per)
            m_lo = _imax(kb, b.sub(kb.idx(lo), start), kb.i64(0))
            m_hi = kb.imin(b.sub(kb.idx(hi), start), per)
            index: list[Index] = []
            rest: ir.Value = flat
            for n in reversed(batch_len):
                index.insert(0, _opaque(kb, b.urem(rest, kb.idx(n))))
                rest = b.udiv(rest, kb.idx(n))
            gemm = runtime_gemm(kb, sched, m_len, n_len, k_len, *operands(index), K)
            gemm.chunks((0, ceil_units(kb, n_len, sched.nr)), (m_lo, m_hi))

    k.threads.runs(kb.mul(count, blocks), run)


def _opaque(kb, value: ir.Value) -> ir.Value:
    """`value`, hidden from LLVM's analyses (an empty inline asm): loop strength reduction
    otherwise relates every address of the microkernels to the remainders that locate a
    batch in a claimed run, and took 2 s to compile Q K^T at 12 heads and 2 threads (0.5 s so)."""
    return kb.b.asm(ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), "", "=r,0", [value], side_effect=False)


def _imax(kb, a: ir.Value, b: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed(">", a, b), a, b)


def matmul_dynamic(node: Node) -> str | None:
    """None where the kernel follows this node's run-time dims: float32 products (a constant B of
    any layout, or two activations), run-time M, N, K and batch dims, each the same extent in
    every operand that has it (a broadcast operand's dim is a static 1), and fused epilogue
    operands whose run-time dims are the output's. bf16 and other formats: not yet."""
    out = node.outputs[0]
    a, b = node.inputs
    fmt = node_format(node, out.dtype)
    if fmt.micro != "fma" or np.dtype(out.dtype) != FLOAT32:
        return f"its {fmt.name} GEMM runs at static shapes only (run-time dims: float32)"
    rank = len(out.shape)
    ext = out.extents or (None,) * rank
    a_ext = a.extents or (None,) * len(a.shape)
    b_shape = matmul_b_shape(node)
    b_ext = (b.extents if node.attrs.get("b_layout") != "panels" else None) or (None,) * len(b_shape)
    if a_ext[-2] != ext[-2] or b_ext[-1] != ext[-1] or a_ext[-1] != b_ext[-2]:
        return "its operands' run-time dims are not the output's"
    for operand, extents, shape in ((a, a_ext, tuple(a.shape)), (b, b_ext, b_shape)):
        offset = rank - len(shape)
        for axis in range(len(shape) - 2):
            mine, theirs = extents[axis], ext[offset + axis]
            if mine != theirs and not (mine is None and shape[axis] == 1):
                return f"operand '{operand.name}' broadcasts batch dim {axis} against a run-time dim"
    for step in node.epilogue:
        v = step.operand
        if v is None:
            continue
        offset = rank - len(v.shape)
        for axis, extent in enumerate(v.extents or ()):
            if extent is not None and ext[offset + axis] != extent:
                return f"epilogue operand '{v.name}' has a run-time dim {axis} the output does not share"
    return None


CPU.register("MatMul", lower=lower_matmul, dynamic=matmul_dynamic)
