"""The CPU's element-wise loop emitter, and its element-wise kernels.

`emit_loop_nest` walks a shape in vectors of the target's width with one masked tail,
optionally sharing the outermost loop among the thread team; `emit_elementwise` runs a
standalone element-wise group through it: broadcasting loads, the op's scalar
expression, the fused epilogue (hobbit.emit.epilogue) and a store. Every scalar
expression of hobbit/emit/scalar_ops.py is registered here as a CPU kernel."""

from __future__ import annotations

from llvmlite import ir

from hobbit.graph.ir import Node, Value
from hobbit.graph.shapes import broadcast_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import Epilogue, collapse, collapse_extents, load_broadcast, scalar_expr
from hobbit.emit.half import compute_dtype, narrow
from hobbit.emit.scalar import Emit
from hobbit.emit.scalar_ops import SCALARS
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.parallel import Threads


def emit_loop_nest(kb: KernelBuilder, shape: tuple[int, ...], width: int, body,
                   threads: Threads | None = None, lengths: list[int | ir.Value] | None = None) -> None:
    """Loops over `shape`; the last dim in vectors of `width` with one masked tail.
    `body(index, width, mask)` emits the work for one vector. With `threads`, the
    outermost loop (or the vectors of a 1-D nest) is shared among the team. `lengths`
    (a shape with run-time dims: collapse_extents) gives the trip count of each dim."""
    lengths = list(shape) if lengths is None else lengths

    def level(d: int, index: list) -> None:
        if d == len(shape) - 1:
            _vectors(kb, lengths[d], width, lambda i, mask: body(index + [i], width, mask),
                     threads if d == 0 else None, f"d{d}")
            return
        lo, hi = threads.split(lengths[d]) if threads is not None and d == 0 else (0, lengths[d])
        with kb.loop(lo, hi, name=f"d{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def _vectors(kb: KernelBuilder, inner: int | ir.Value, width: int, body, threads: Threads | None,
             name: str) -> None:
    """body(start, mask) over [0, inner) in vectors of `width`, the ragged tail masked."""
    if isinstance(inner, int):
        full = inner - inner % width
        lo, hi = threads.split(full // width) if threads is not None else (0, full // width)
        if full:
            with kb.loop(kb.mul(lo, width), kb.mul(hi, width), width, name=name) as i:
                body(i, None)
        if inner % width:
            mask = kb.prefix_mask(width, inner % width)
            if isinstance(hi, int):
                body(full, mask)
            else:  # shared loop: the last thread takes the ragged tail
                with kb.if_then(threads.is_last()):
                    body(full, mask)
        return
    b = kb.b
    vectors = b.udiv(inner, kb.i64(width))
    full = b.mul(vectors, kb.i64(width))
    lo, hi = threads.split(vectors) if threads is not None else (0, vectors)
    with kb.loop(kb.mul(lo, width), kb.mul(hi, width), width, name=name) as i:
        body(i, None)
    if width == 1:
        return
    rest = b.sub(inner, full)
    tail = b.icmp_unsigned("!=", rest, kb.i64(0))
    if threads is not None:
        tail = b.and_(tail, threads.is_last())
    with kb.if_then(tail):
        body(full, kb.runtime_prefix_mask(width, rest))


def emit_elementwise(kb: KernelBuilder, node: Node, input_ptrs: list[ir.Value], epilogue_ptrs: list,
                     out_ptr: ir.Value, width: int, threads: Threads | None = None,
                     extents: tuple[int | ir.Value, ...] | None = None) -> None:
    """A standalone element-wise group: broadcasting loads, the op, its epilogue, a store.
    16-bit floats are widened on load and rounded once at the store (hobbit.emit.half).
    `extents`: the output dims' lengths in this inference, for run-time dims (KernelArgs.extents)."""
    out = node.outputs[0]
    out_shape = tuple(out.shape)
    strides = [broadcast_strides(v.shape, out_shape) for v in node.operands()]
    stride_sets = strides + [broadcast_strides(out_shape, out_shape)]
    lengths = None
    if extents is None:
        shape, collapsed = collapse(out_shape, stride_sets)
    else:
        shape, collapsed, lengths = collapse_extents(kb, out_shape, stride_sets, extents)
    in_strides, store_strides = collapsed[: len(node.inputs)], collapsed[-1]
    epilogue = Epilogue(kb, node, epilogue_ptrs, shape)
    scalar = scalar_expr(node.op)
    in_dtype = node.inputs[0].dtype

    def body(index, w, mask):
        loaded = [load_broadcast(Emit(kb, compute_dtype(v.dtype), w), p, s, index, mask, stored=v.dtype)
                  for v, p, s in zip(node.inputs, input_ptrs, in_strides)]
        x = scalar(Emit(kb, compute_dtype(in_dtype), w), loaded, node.attrs)
        x = epilogue.apply(Emit(kb, compute_dtype(out.dtype), w), x, index, mask)
        kb.vstore(narrow(kb.b, x, out.dtype), out_ptr, out.dtype, kb.affine(list(zip(index, store_strides))), mask)

    emit_loop_nest(kb, shape, width, body, threads, lengths)


def lower_elementwise(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    width = k.width(max((compute_dtype(v.dtype) for v in k.node.inputs + [out]), key=lambda d: d.itemsize))
    # Below ~16K elements a parallel region costs more than it saves.
    team = k.threads if out.type.size >= 16384 else None
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], width, team, dynamic_extents(k, out))


def dynamic_extents(k: KernelArgs, value: Value) -> tuple[int | ir.Value, ...] | None:
    """A value's dims' lengths in this inference where it has run-time dims, else None."""
    return None if value.extents is None else k.extents(value)


def elementwise_dynamic(node: Node) -> str | None:
    """An element-wise group runs inside its output's extents when every operand's run-time dims
    are the output's (a broadcast of one run-time dim against another would need run-time strides)."""
    out = node.outputs[0]
    rank = len(out.shape)
    for v in node.operands():
        offset = rank - len(v.shape)
        for axis, extent in enumerate(v.extents or ()):
            if extent is not None and (out.extents is None or out.extents[offset + axis] != extent):
                return f"operand '{v.name}' has a run-time dim {axis} the output does not share"
    return None


# Copy's kernel is its own (hobbit/backend/cpu/tensor.py): the same loop, on one thread.
for _name, _scalar in SCALARS.items():
    if _name != "Copy":
        CPU.register(_name, lower=lower_elementwise, scalar=_scalar, dynamic=elementwise_dynamic)
