"""ReduceX, ArgMax and ArgMin kernels on the GPU: one segmented fold
(hobbit.backend.gpu.segments) per output.

A thread folds pre(x) over its elements, the segment's threads fold their partials in
shared memory, and the head thread applies post and stores, in the tree's last step.
The reducers (combine, pre, post) are every backend's (hobbit.emit.reduce), so the
arithmetic, the NaN rule of max/min included, is the same on both devices.

ArgMax/ArgMin fold (value, index) pairs. A thread's indices are spread over the
segment, so a tie is decided by the index itself (the smaller, or with
select_last_index the larger), not by the order of the fold."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.backend.gpu.segments import Lane, SegmentThreads, load_element
from hobbit.emit.half import compute_dtype, narrow
from hobbit.emit.reduce import REDUCERS, apply_post, apply_pre
from hobbit.emit.scalar import Emit
from hobbit.ops.reduce import identity
from hobbit.plan.gpu.reduce import axis_segments, reduce_segments

INDEX = np.dtype(np.int64)


def no_epilogue(k: GpuArgs) -> None:
    """These ops have no epilogue view, so fusion gives them no steps; say so if one comes."""
    if k.node.epilogue:
        raise CodegenError(f"fused epilogue steps on {k.node.op} node '{k.node.name}' are not supported on the GPU")


def lower_reduce(k: GpuArgs) -> None:
    no_epilogue(k)
    kb, simt, node = k.kb, k.simt, k.node
    stored, out_dtype = node.inputs[0].dtype, node.outputs[0].dtype
    dtype = compute_dtype(stored)
    e = Emit(kb, dtype, 1)
    r = REDUCERS[node.op]
    seg = reduce_segments(node)
    st = SegmentThreads(k, seg)

    def store(lane: Lane, total: ir.Value) -> None:
        y = apply_post(e, r, total, max(seg.count, 1))
        kb.store(narrow(kb.b, y, out_dtype), k.outputs[0], out_dtype, lane.output)

    partial = simt.shared(dtype, k.plan.threads, "partial") if st.ty > 1 else None
    with simt.phase(sync=partial is not None) as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)

        def element(p: int | None, i: ir.Value) -> ir.Value:
            return apply_pre(e, r, load_element(kb, k.inputs[0], stored, kb.add(base, st.reduced_offset(i))))

        total = st.partial_fold(e, lane, r.combine, element)
        if partial is None:
            with kb.if_then(lane.valid):
                store(lane, total)
        else:
            kb.store(total, partial, dtype, tid)
    if partial is not None:
        st.fold(e, partial, r.combine, last=store)


def lower_arg_reduce(k: GpuArgs) -> None:
    no_epilogue(k)
    kb, simt, node = k.kb, k.simt, k.node
    stored = node.inputs[0].dtype
    dtype = compute_dtype(stored)
    e = Emit(kb, dtype, 1)
    seg = axis_segments(node)
    st = SegmentThreads(k, seg)
    maximum, last = node.op == "ArgMax", bool(node.attrs["select_last_index"])

    def better(v: ir.Value, i: ir.Value, best: ir.Value, where: ir.Value) -> ir.Value:
        """(v, i) is preferred to (best, where): a strictly better value, or a tie at the
        preferred index. NaN is never better (as on the CPU)."""
        b = kb.b
        wins = e.gt(v, best) if maximum else e.lt(v, best)
        tie = b.fcmp_ordered("==", v, best) if e.float else b.icmp_signed("==", v, best)
        return b.or_(wins, b.and_(tie, b.icmp_signed(">" if last else "<", i, where)))

    values = simt.shared(dtype, k.plan.threads, "values") if st.ty > 1 else None
    indices = simt.shared(INDEX, k.plan.threads, "indices") if st.ty > 1 else None

    def store(lane: Lane, where: ir.Value) -> None:
        """An index no element beat (a segment of NaNs) is 0."""
        found = kb.b.icmp_unsigned("<", where, kb.i64(max(seg.count, 1)))
        kb.store(kb.b.select(found, where, kb.i64(0)), k.outputs[0], INDEX, lane.output)

    with simt.phase(sync=values is not None) as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)
        best, where = simt.private(dtype, 1), simt.private(INDEX, 1)
        best.store(kb.const(dtype, identity(dtype, "max" if maximum else "min")), 0)
        where.store(kb.i64(-1 if last else seg.count), 0)
        with kb.if_then(lane.valid):
            def element(p: int | None, r: ir.Value) -> None:
                v = load_element(kb, k.inputs[0], stored, kb.add(base, st.reduced_offset(r)))
                take = better(v, r, best.load(0), where.load(0))
                best.store(kb.b.select(take, v, best.load(0)), 0)
                where.store(kb.b.select(take, r, where.load(0)), 0)
            st.each(lane, element)
        if values is None:
            with kb.if_then(lane.valid):
                store(lane, where.load(0))
        else:
            kb.store(best.load(0), values, dtype, tid)
            kb.store(where.load(0), indices, INDEX, tid)
    if values is None:
        return
    step = st.ty // 2
    while step >= 1:
        with simt.phase(sync=step > 1) as tid:
            lane = st.lane(tid)
            with kb.if_then(kb.b.icmp_unsigned("<", lane.y, kb.i64(step))):
                other = kb.add(tid, step * st.y_stride)
                v, i = kb.load(values, dtype, other), kb.load(indices, INDEX, other)
                mine, at = kb.load(values, dtype, tid), kb.load(indices, INDEX, tid)
                take = better(v, i, mine, at)
                if step > 1:
                    kb.store(kb.b.select(take, v, mine), values, dtype, tid)
                    kb.store(kb.b.select(take, i, at), indices, INDEX, tid)
                else:
                    with kb.if_then(lane.valid):
                        store(lane, kb.b.select(take, i, at))
        step //= 2


for _name in REDUCERS:
    GPU.register(_name, lower=lower_reduce)
GPU.register("ArgMax", lower=lower_arg_reduce)
GPU.register("ArgMin", lower=lower_arg_reduce)
