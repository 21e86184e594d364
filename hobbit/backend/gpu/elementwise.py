"""Element-wise kernels on the GPU: each thread computes `per_thread` outputs, strided by
the block's width so that a warp's loads and stores are consecutive (coalesced).

The scalar expression of each op is the one every backend reads (hobbit/emit/scalar_ops.py),
at width 1, and so is the epilogue of fused steps (hobbit.emit.epilogue.Epilogue): the
arithmetic is the same on both devices."""

from __future__ import annotations

from llvmlite import ir

from hobbit.graph.shapes import broadcast_strides
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import Epilogue, collapse, load_broadcast
from hobbit.emit.half import compute_dtype, narrow
from hobbit.ops.registry import get_op
from hobbit.emit.scalar import Emit
from hobbit.emit.scalar_ops import SCALARS


def unflatten(kb: KernelBuilder, flat: ir.Value, shape: tuple[int, ...]) -> list[ir.Value]:
    """A row-major flat index -> its index along each dim of `shape` (constant divisors)."""
    index = []
    for d in reversed(range(len(shape))):
        if d == 0:
            index.append(flat)
            break
        index.append(kb.b.urem(flat, kb.i64(shape[d])))
        flat = kb.b.udiv(flat, kb.i64(shape[d]))
    return index[::-1]


def for_each_output(k: GpuArgs, count: int, body) -> None:
    """Call body(flat) for each output index this thread owns: per_thread of them, at
    block * threads * per_thread + p * threads + tid, those below `count`."""
    kb, simt, plan = k.kb, k.simt, k.plan
    span = plan.threads * plan.per_thread
    with simt.phase(sync=False) as tid:
        start = kb.b.add(kb.b.mul(simt.block(0), kb.i64(span)), tid)
        for p in range(plan.per_thread):
            flat = kb.b.add(start, kb.i64(p * plan.threads))
            with kb.if_then(kb.b.icmp_unsigned("<", flat, kb.i64(count))):
                body(flat)


def lower_elementwise(k: GpuArgs) -> None:
    node, kb = k.node, k.kb
    out = node.outputs[0]
    out_shape = tuple(out.shape)
    strides = [broadcast_strides(v.shape, out_shape) for v in node.operands()]
    shape, collapsed = collapse(out_shape, strides + [broadcast_strides(out_shape, out_shape)])
    in_strides, store_strides = collapsed[: len(node.inputs)], collapsed[-1]
    epilogue = Epilogue(kb, node, k.epilogue, shape)
    scalar = GPU.lookup(get_op(node.op).kernel).scalar

    def body(flat: ir.Value) -> None:
        index = unflatten(kb, flat, shape)
        loaded = [load_broadcast(Emit(kb, compute_dtype(v.dtype), 1), p, s, index, None, stored=v.dtype)
                  for v, p, s in zip(node.inputs, k.inputs, in_strides)]
        x = scalar(Emit(kb, compute_dtype(node.inputs[0].dtype), 1), loaded, node.attrs)
        x = epilogue.apply(Emit(kb, compute_dtype(out.dtype), 1), x, index)
        kb.store(narrow(kb.b, x, out.dtype), k.outputs[0], out.dtype, kb.affine(list(zip(index, store_strides))))

    for_each_output(k, int(out.type.size), body)


for _name, _scalar in SCALARS.items():
    GPU.register(_name, lower=lower_elementwise, scalar=_scalar)
