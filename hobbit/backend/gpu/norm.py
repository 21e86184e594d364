"""Softmax, LogSoftmax and LayerNormalization on the GPU: two segment statistics, then
one element-wise pass, all in one block per group of segments (hobbit.backend.gpu.segments).

Softmax folds the max, then the sum of exp(x - max); LayerNormalization the sum, then
the sum of squared deviations from the mean (two passes, as on the CPU). Each fold is
a thread's partial in a register, then a shared-memory tree whose head slot every
thread of the segment reads in the next phase. A thread's elements are loaded once and
kept in registers (a private array) when they are few enough to unroll; otherwise each
pass reads them again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.backend.gpu.reduce import no_epilogue
from hobbit.backend.gpu.segments import Lane, SegmentThreads, load_element
from hobbit.emit.half import compute_dtype, narrow
from hobbit.emit.scalar import Emit
from hobbit.plan.gpu.reduce import Segments, layernorm_segments, axis_segments

Value = ir.Value


@dataclass(frozen=True)
class RowKernel:
    """What a two-statistics kernel computes: s1 = fold(first) over the segment,
    s2 = fold(second(x, s1)), then out(lane, r, x, s1, s2) at each element; `done(lane,
    s1, s2)` is what the segment's head thread does once (statistics outputs)."""

    first: tuple[str, Callable[[Emit, Value], Value]]
    second: tuple[str, Callable[[Emit, Value, Value], Value]]
    out: Callable[[Emit, Value, Value, Value, Value], Value]
    done: Callable[[Emit, Lane, Value, Value], None] | None = None


def lower_rows(k: GpuArgs, seg: Segments, rk: RowKernel) -> None:
    kb, simt = k.kb, k.simt
    stored = k.node.inputs[0].dtype
    dtype = compute_dtype(stored)
    e = Emit(kb, dtype, 1)
    st = SegmentThreads(k, seg)
    cache = simt.private(dtype, st.per_thread) if st.unrolled else None
    stats = [simt.shared(dtype, k.plan.threads, "first"), simt.shared(dtype, k.plan.threads, "second")]

    def element(base: Value, p: int | None, r: Value) -> Value:
        if cache is not None and p is not None:
            return cache.load(p)
        return load_element(kb, k.inputs[0], stored, kb.add(base, st.reduced_offset(r)))

    with simt.phase() as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)

        def first(p: int | None, r: Value) -> Value:
            x = load_element(kb, k.inputs[0], stored, kb.add(base, st.reduced_offset(r)))
            if cache is not None:
                cache.store(x, p)
            return rk.first[1](e, x)

        kb.store(st.partial_fold(e, lane, rk.first[0], first), stats[0], dtype, tid)
    st.fold(e, stats[0], rk.first[0])
    with simt.phase() as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)
        s1 = kb.load(stats[0], dtype, lane.head)
        total = st.partial_fold(e, lane, rk.second[0], lambda p, r: rk.second[1](e, element(base, p, r), s1))
        kb.store(total, stats[1], dtype, tid)
    st.fold(e, stats[1], rk.second[0])
    out_dtype = k.node.outputs[0].dtype
    with simt.phase(sync=False) as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)
        s1, s2 = kb.load(stats[0], dtype, lane.head), kb.load(stats[1], dtype, lane.head)
        with kb.if_then(lane.valid):
            def write(p: int | None, r: Value) -> None:
                y = rk.out(e, r, element(base, p, r), s1, s2)
                kb.store(narrow(kb.b, y, out_dtype), k.outputs[0], out_dtype, kb.add(base, st.reduced_offset(r)))

            st.each(lane, write)
            if rk.done is not None:
                with kb.if_then(kb.b.icmp_unsigned("==", lane.y, kb.i64(0))):
                    rk.done(e, lane, s1, s2)


def lower_softmax(k: GpuArgs) -> None:
    no_epilogue(k)
    log = k.node.op == "LogSoftmax"

    def out(e: Emit, r: Value, x: Value, peak: Value, total: Value) -> Value:
        shifted = e.sub(x, peak)
        return e.sub(shifted, e.log(total)) if log else e.div(e.exp(shifted), total)

    lower_rows(k, axis_segments(k.node), RowKernel(
        first=("max", lambda e, x: x),
        second=("add", lambda e, x, peak: e.exp(e.sub(x, peak))),
        out=out))


def lower_layernorm(k: GpuArgs) -> None:
    """y = (x - mean) / sqrt(var + epsilon) * scale (+ bias); Mean and InvStdDev per row
    when the node has those outputs."""
    no_epilogue(k)
    node, kb = k.node, k.kb
    seg = layernorm_segments(node)
    if any(v is not None and v.dtype != node.inputs[0].dtype for v in node.inputs[1:]):
        raise CodegenError(f"LayerNormalization node '{node.name}': scale and bias must have the input's dtype")
    inv_n = 1.0 / max(seg.count, 1)
    epsilon = node.attrs["epsilon"]
    scale = k.inputs[1]
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    stored = node.inputs[0].dtype

    def moments(e: Emit, total: Value, squares: Value) -> tuple[Value, Value]:
        return e.mul(total, e.c(inv_n)), e.div(e.c(1.0), e.sqrt(e.add(e.mul(squares, e.c(inv_n)), e.c(epsilon))))

    def deviation(e: Emit, x: Value, total: Value) -> Value:
        d = e.sub(x, e.mul(total, e.c(inv_n)))
        return e.mul(d, d)

    def out(e: Emit, r: Value, x: Value, total: Value, squares: Value) -> Value:
        mean, inv = moments(e, total, squares)
        y = e.mul(e.mul(e.sub(x, mean), inv), load_element(kb, scale, stored, r))
        return e.add(y, load_element(kb, bias, stored, r)) if bias is not None else y

    def done(e: Emit, lane: Lane, total: Value, squares: Value) -> None:
        mean, inv = moments(e, total, squares)
        for value, ptr, v in zip((mean, inv), k.outputs[1:], node.outputs[1:]):
            kb.store(narrow(kb.b, value, v.dtype), ptr, v.dtype, lane.output)

    lower_rows(k, seg, RowKernel(first=("add", lambda e, x: x), second=("add", deviation), out=out,
                                 done=done if len(k.outputs) == 3 else None))


GPU.register("Softmax", lower=lower_softmax)
GPU.register("LogSoftmax", lower=lower_softmax)
GPU.register("LayerNormalization", lower=lower_layernorm)
