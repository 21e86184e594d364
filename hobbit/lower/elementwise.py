"""The shared element-wise loop emitter and fused epilogues.

A fused group is a producer (an element-wise op, or a kernel such as Conv or
Gemm) followed by a chain of element-wise steps. The producer hands each output
vector to `Epilogue.apply` with its index in the producer's *view* of the output
(e.g. Conv's [N, C, H*W]); every step operand is broadcast into that view by
strides computed here, so a bias is a scalar broadcast and a residual is a
vector load: one pass over memory."""

from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from hobbit.graph.ir import EpilogueStep, Node
from hobbit.ops.registry import get_op
from hobbit.graph.shapes import broadcast_strides, view_strides
from hobbit.lower.builder import KernelBuilder
from hobbit.lower.half import compute_dtype, narrow, widen
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.kernels import CPU
from hobbit.lower.parallel import Threads
from hobbit.lower.scalar import Emit


def scalar_expr(op: str) -> Callable[..., Any]:
    """The CPU scalar expression of element-wise op `op` (registered in hobbit/lower/scalar_ops.py)."""
    return CPU.lookup(get_op(op).kernel).scalar


class Epilogue:
    """Applies a node's fused element-wise steps to values the kernel computed."""

    def __init__(self, kb: KernelBuilder, node: Node, operand_ptrs: list[ir.Value | None],
                 view: tuple[int, ...]):
        self.kb = kb
        self.steps: list[tuple[EpilogueStep, ir.Value | None, list[int] | None]] = []
        out_shape = node.outputs[0].shape
        for step, ptr in zip(node.epilogue, operand_ptrs):
            strides = None
            if step.operand is not None:
                strides = view_strides(step.operand.shape, out_shape, view)
                assert strides is not None, "fusion admitted an operand the view cannot index"
            self.steps.append((step, ptr, strides))

    def apply(self, e: Emit, x: ir.Value, index: list[int | ir.Value], mask: ir.Value | None = None,
              axis: int = -1) -> ir.Value:
        """Run the steps on `x`, whose lanes lie along view dim `axis` starting at `index`."""
        for step, ptr, strides in self.steps:
            scalar = scalar_expr(step.op)
            if ptr is None:
                x = scalar(e, [x], step.attrs)
                continue
            y = load_broadcast(e, ptr, strides, index, mask, axis, stored=step.operand.dtype)
            args = [y, x] if step.swap else [x, y]
            x = scalar(e, args, step.attrs)
        return x


    def prefetch(self, index: list[int | ir.Value], axis: int = -1) -> None:
        """Start fetching the operand vectors `apply` will read at `index` (a residual
        produced kernels ago is rarely still in cache)."""
        for step, ptr, strides in self.steps:
            if ptr is not None and strides[axis] == 1:
                self.kb.prefetch(ptr, step.operand.dtype, self.kb.affine(list(zip(index, strides))))


def load_broadcast(e: Emit, ptr: ir.Value, strides: list[int], index: list[int | ir.Value],
                   mask: ir.Value | None, axis: int = -1, stored=None) -> ir.Value:
    """Load e.width elements along view dim `axis`: a vector if contiguous, a splat if
    broadcast, element loads otherwise. `stored` is the dtype in memory when it differs
    from e.dtype (float16/bfloat16); the value comes back widened to e.dtype."""
    kb = e.kb
    stored = e.dtype if stored is None else stored
    offset = kb.affine(list(zip(index, strides)))
    if e.width == 1 or strides[axis] == 0:
        return kb.splat(widen(kb.b, kb.load(ptr, stored, offset), stored), e.width)
    return widen(kb.b, kb.vload_strided(ptr, stored, offset, strides[axis], e.width, mask), stored)


def collapse(shape: tuple[int, ...], stride_sets: list[list[int]]) -> tuple[tuple[int, ...], list[list[int]]]:
    """Merge adjacent dims that every operand walks contiguously, so loops are few and long."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    if not dims:
        return (1,), [[0] for _ in stride_sets]
    new_shape = [shape[dims[0]]]
    new_strides = [[s[dims[0]]] for s in stride_sets]
    for d in dims[1:]:
        if all(ns[-1] == s[d] * shape[d] for ns, s in zip(new_strides, stride_sets)):
            new_shape[-1] *= shape[d]
            for ns, s in zip(new_strides, stride_sets):
                ns[-1] = s[d]
        else:
            new_shape.append(shape[d])
            for ns, s in zip(new_strides, stride_sets):
                ns.append(s[d])
    return tuple(new_shape), new_strides


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
    16-bit floats are widened on load and rounded once at the store (hobbit.lower.half)."""
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
