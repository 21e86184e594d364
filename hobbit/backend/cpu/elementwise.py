"""The CPU's element-wise loop emitter, and its element-wise kernels.

`emit_loop_nest` walks a shape in vectors of the target's width with one masked tail,
optionally sharing the outermost loop among the thread team; `emit_elementwise` runs a
standalone element-wise group through it: broadcasting loads, the op's scalar
expression, the fused epilogue (hobbit.emit.epilogue) and a store. Every scalar
expression of hobbit/emit/scalar_ops.py is registered here as a CPU kernel."""

from __future__ import annotations

from llvmlite import ir

from hobbit.graph.ir import Node
from hobbit.graph.shapes import broadcast_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import Epilogue, collapse, load_broadcast, scalar_expr
from hobbit.emit.half import compute_dtype, narrow
from hobbit.emit.scalar import Emit
from hobbit.emit.scalar_ops import SCALARS
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.parallel import Threads


def emit_loop_nest(kb: KernelBuilder, shape: tuple[int, ...], width: int, body,
                   threads: Threads | None = None) -> None:
    """Loops over `shape`; the last dim in vectors of `width` with one masked tail.
    `body(index, width, mask)` emits the work for one vector. With `threads`, the
    outermost loop (or the vectors of a 1-D nest) is shared among the team."""

    def level(d: int, index: list) -> None:
        if d == len(shape) - 1:
            inner = shape[d]
            full = inner - inner % width
            lo, hi = threads.split(full // width) if threads is not None and d == 0 else (0, full // width)
            if full:
                with kb.loop(kb.mul(lo, width), kb.mul(hi, width), width, name=f"d{d}") as i:
                    body(index + [i], width, None)
            if inner % width:
                mask = kb.prefix_mask(width, inner % width)
                if isinstance(hi, int):
                    body(index + [full], width, mask)
                else:  # shared loop: the last thread takes the ragged tail
                    with kb.if_then(threads.is_last()):
                        body(index + [full], width, mask)
            return
        lo, hi = threads.split(shape[d]) if threads is not None and d == 0 else (0, shape[d])
        with kb.loop(lo, hi, name=f"d{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def emit_elementwise(kb: KernelBuilder, node: Node, input_ptrs: list[ir.Value], epilogue_ptrs: list,
                     out_ptr: ir.Value, width: int, threads: Threads | None = None) -> None:
    """A standalone element-wise group: broadcasting loads, the op, its epilogue, a store.
    16-bit floats are widened on load and rounded once at the store (hobbit.emit.half)."""
    out = node.outputs[0]
    out_shape = tuple(out.shape)
    strides = [broadcast_strides(v.shape, out_shape) for v in node.operands()]
    shape, collapsed = collapse(out_shape, strides + [broadcast_strides(out_shape, out_shape)])
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

    emit_loop_nest(kb, shape, width, body, threads)


def lower_elementwise(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    width = k.width(max((compute_dtype(v.dtype) for v in k.node.inputs + [out]), key=lambda d: d.itemsize))
    # Below ~16K elements a parallel region costs more than it saves.
    team = k.threads if out.type.size >= 16384 else None
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], width, team)


# Copy's kernel is its own (hobbit/backend/cpu/tensor.py): the same loop, on one thread.
for _name, _scalar in SCALARS.items():
    if _name != "Copy":
        CPU.register(_name, lower=lower_elementwise, scalar=_scalar)
