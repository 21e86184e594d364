"""ReduceX kernels on the GPU: one segmented fold (hobbit.gpu.segments) per output.

A thread folds pre(x) over its elements, the segment's threads fold their partials in
shared memory, and the head thread applies post and stores, in the tree's last step.
The reducers (combine, pre, post) are the CPU backend's (hobbit.lower.reduce), so the
arithmetic, the NaN rule of max/min included, is the same on both devices."""

from __future__ import annotations

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.gpu.kernels import GPU, GpuArgs
from hobbit.gpu.segments import Lane, SegmentThreads, load_element
from hobbit.lower.half import compute_dtype, narrow
from hobbit.lower.reduce import REDUCERS, _post, _pre
from hobbit.lower.scalar import Emit
from hobbit.plan.gpu_reduce import reduce_segments


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
        y = _post(e, r, total, max(seg.count, 1))
        kb.store(narrow(kb.b, y, out_dtype), k.outputs[0], out_dtype, lane.output)

    partial = simt.shared(dtype, k.plan.threads, "partial") if st.ty > 1 else None
    with simt.phase(sync=partial is not None) as tid:
        lane = st.lane(tid)
        base = st.kept_offset(lane.output)

        def element(p: int | None, i: ir.Value) -> ir.Value:
            return _pre(e, r, load_element(kb, k.inputs[0], stored, kb.add(base, st.reduced_offset(i))))

        total = st.partial_fold(e, lane, r.combine, element)
        if partial is None:
            with kb.if_then(lane.valid):
                store(lane, total)
        else:
            kb.store(total, partial, dtype, tid)
    if partial is not None:
        st.fold(e, partial, r.combine, last=store)


for _name in REDUCERS:
    GPU.register(_name, lower=lower_reduce)
