"""The CPU's reductions: one kernel for every ReduceX op (its reducers are
hobbit.emit.reduce's), plus the vector row helpers (horizontal combine,
contiguous-row accumulation) that softmax and layer normalisation reuse.

The input's dims are merged into alternating runs of kept and reduced dims.
When the innermost run is reduced, it is contiguous: each output element gets a
vector accumulator (kept in a register) that is folded horizontally at the end.
When the innermost run is kept, the output row itself is the accumulator and
every reduced index adds one contiguous vector pass over it. Either way the
innermost loop walks memory with stride 1 and accumulation stays in the input
dtype (float32 for float32 models)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I32, KernelBuilder, llvm_type
from hobbit.backend.cpu.elementwise import emit_loop_nest
from hobbit.emit.half import compute_dtype, widen
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.reduce import REDUCERS, Reducer, apply_post, apply_pre, combine
from hobbit.emit.scalar import Emit
from hobbit.ops.reduce import identity


def row_width(lanes: int, length: int) -> int:
    """Vector width for a row of `length`: the target's lanes, or the largest
    power of two that fits, so short rows are not mostly masked-off lanes."""
    width = 1
    while width * 2 <= min(lanes, length):
        width *= 2
    return width


def hreduce(kb: KernelBuilder, dtype: np.dtype, vec: ir.Value, how: str) -> ir.Value:
    """Fold a vector's lanes into one scalar by halving (log2(width) steps)."""
    if not isinstance(vec.type, ir.VectorType):
        return vec
    width = vec.type.count
    while width > 2:
        half = width // 2
        lo = kb.b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, half), list(range(half))))
        hi = kb.b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, half), list(range(half, width))))
        vec = combine(Emit(kb, dtype, half), how, lo, hi)
        width = half
    a = kb.b.extract_element(vec, ir.Constant(I32, 0))
    b = kb.b.extract_element(vec, ir.Constant(I32, 1))
    return combine(Emit(kb, dtype, 1), how, a, b)


def vector_type(dtype: np.dtype, width: int) -> ir.Type:
    ty = llvm_type(dtype)
    return ty if width == 1 else ir.VectorType(ty, width)


def accumulate_row(kb: KernelBuilder, dtype: np.dtype, acc: ir.Value, width: int, src: ir.Value,
                   base: int | ir.Value, length: int, how: str,
                   pre: Callable[[Emit, ir.Value], ir.Value] | None = None) -> None:
    """acc (a vector alloca) = combine(acc, pre(src[base : base + length])) lane-wise;
    the ragged tail is a masked load whose off lanes become the identity."""
    def step(e: Emit, index, mask) -> None:
        x = kb.vload(src, dtype, kb.add(base, index), e.width, mask)
        if pre is not None:
            x = pre(e, x)
        if mask is not None:
            x = e.select(mask, x, e.c(identity(dtype, how)))
        kb.b.store(combine(e, how, kb.b.load(acc), x), acc)

    full = length - length % width
    e = Emit(kb, dtype, width)
    if full:
        with kb.loop(0, full, width, name="r") as i:
            step(e, i, None)
    if length % width:
        step(e, full, kb.prefix_mask(width, length % width))


def reduce_row(kb: KernelBuilder, dtype: np.dtype, lanes: int, src: ir.Value, base: int | ir.Value,
               length: int, how: str, pre: Callable[[Emit, ir.Value], ir.Value] | None = None) -> ir.Value:
    """The scalar combine of pre(src[base : base + length])."""
    width = row_width(lanes, length)
    acc = kb.alloca(vector_type(dtype, width))
    kb.b.store(kb.const(dtype, identity(dtype, how), width), acc)
    accumulate_row(kb, dtype, acc, width, src, base, length, how, pre)
    return hreduce(kb, dtype, kb.b.load(acc), how)


@dataclass(frozen=True)
class Run:
    """Consecutive input dims merged into one loop: extent, input stride, reduced or kept."""

    extent: int
    stride: int
    reduced: bool


def reduce_runs(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[Run]:
    """Alternating kept/reduced runs of a row-major `shape`; size-1 dims vanish."""
    runs: list[Run] = []
    stride = 1
    dims = []
    for d in range(len(shape) - 1, -1, -1):
        dims.append((d, stride))
        stride *= shape[d]
    for d, st in reversed(dims):
        if shape[d] == 1:
            continue
        red = d in axes
        if runs and runs[-1].reduced == red:
            runs[-1] = Run(runs[-1].extent * shape[d], st, red)
        else:
            runs.append(Run(shape[d], st, red))
    return runs


def _nest(kb: KernelBuilder, extents: list[int], body: Callable[[list[ir.Value]], None], name: str) -> None:
    def level(d: int, index: list) -> None:
        if d == len(extents):
            body(index)
            return
        with kb.loop(0, extents[d], name=f"{name}{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def lower_reduce(k: KernelArgs) -> None:
    node = k.node
    x = node.inputs[0]
    dtype = np.dtype(x.dtype)
    r = REDUCERS[node.op]
    axes = tuple(node.attrs["axes"])
    runs = reduce_runs(tuple(x.shape), axes)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    kept = [run for run in runs if not run.reduced]
    reds = [run for run in runs if run.reduced]
    out_strides = [int(np.prod([k2.extent for k2 in kept[j + 1:]], dtype=np.int64)) for j in range(len(kept))]
    if not runs or runs[-1].reduced:
        _reduce_inner(k, r, dtype, kept, out_strides, reds or [Run(1, 1, True)], count)
    else:
        _reduce_outer(k, r, dtype, kept, out_strides, reds, count)


def _reduce_inner(k: KernelArgs, r: Reducer, dtype: np.dtype, kept: list[Run], out_strides: list[int],
                  reds: list[Run], count: int) -> None:
    """Innermost run reduced: one register accumulator per output element."""
    kb = k.kb
    inner = reds[-1]
    width = row_width(k.width(dtype), inner.extent)
    acc = kb.alloca(vector_type(dtype, width))
    pre = (lambda e, v: apply_pre(e, r, v)) if r.pre else None

    def per_output(kidx: list[ir.Value]) -> None:
        x_base = kb.affine([(i, run.stride) for i, run in zip(kidx, kept)])
        kb.b.store(kb.const(dtype, identity(dtype, r.combine), width), acc)

        def per_row(ridx: list[ir.Value]) -> None:
            base = kb.add(x_base, kb.affine([(i, run.stride) for i, run in zip(ridx, reds)]))
            accumulate_row(kb, dtype, acc, width, k.inputs[0], base, inner.extent, r.combine, pre)

        _nest(kb, [run.extent for run in reds[:-1]], per_row, "r")
        total = hreduce(kb, dtype, kb.b.load(acc), r.combine)
        out = apply_post(Emit(kb, dtype, 1), r, total, count)
        kb.store(out, k.outputs[0], dtype, kb.affine(list(zip(kidx, out_strides))))

    _nest(kb, [run.extent for run in kept], per_output, "k")


def _reduce_outer(k: KernelArgs, r: Reducer, dtype: np.dtype, kept: list[Run], out_strides: list[int],
                  reds: list[Run], count: int) -> None:
    """Innermost run kept: the output row is the accumulator, updated a vector at a time."""
    kb = k.kb
    x_ptr, y_ptr = k.inputs[0], k.outputs[0]
    row = kept[-1].extent
    width = row_width(k.width(dtype), row)

    def per_row(kidx: list[ir.Value]) -> None:
        x_base = kb.affine([(i, run.stride) for i, run in zip(kidx, kept)])
        y_base = kb.affine(list(zip(kidx, out_strides)))

        def init(index, w, mask):
            kb.vstore(kb.const(dtype, identity(dtype, r.combine), w), y_ptr, dtype, kb.add(y_base, index[0]), mask)

        emit_loop_nest(kb, (row,), width, init)

        def per_reduced(ridx: list[ir.Value]) -> None:
            base = kb.add(x_base, kb.affine([(i, run.stride) for i, run in zip(ridx, reds)]))

            def update(index, w, mask):
                e = Emit(kb, dtype, w)
                v = apply_pre(e, r, kb.vload(x_ptr, dtype, kb.add(base, index[0]), w, mask))
                at = kb.add(y_base, index[0])
                kb.vstore(combine(e, r.combine, kb.vload(y_ptr, dtype, at, w, mask), v), y_ptr, dtype, at, mask)

            emit_loop_nest(kb, (row,), width, update)

        _nest(kb, [run.extent for run in reds], per_reduced, "r")
        if r.post:
            def finish(index, w, mask):
                at = kb.add(y_base, index[0])
                v = apply_post(Emit(kb, dtype, w), r, kb.vload(y_ptr, dtype, at, w, mask), count)
                kb.vstore(v, y_ptr, dtype, at, mask)

            emit_loop_nest(kb, (row,), width, finish)

    _nest(kb, [run.extent for run in kept[:-1]], per_row, "k")


def lower_arg_reduce(k: KernelArgs) -> None:
    """ArgMax/ArgMin over one axis of the view [outer, L, inner]: a running best value
    and its index per lane; strict comparison keeps the first index, non-strict the last.
    16-bit floats compare in float32 (exact)."""
    kb, node = k.kb, k.node
    x_ptr, y_ptr = k.inputs[0], k.outputs[0]
    dtype = np.dtype(node.inputs[0].dtype)
    shape = tuple(node.inputs[0].shape)
    axis = node.attrs["axis"]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    length, inner = shape[axis], int(np.prod(shape[axis + 1:], dtype=np.int64))
    last = bool(node.attrs["select_last_index"])
    index_dtype = np.dtype(np.int64)
    compute = compute_dtype(dtype)

    def columns(index, w, mask):
        e = Emit(kb, compute, w)
        best = kb.alloca(vector_type(compute, w))
        where = kb.alloca(vector_type(index_dtype, w))
        col = kb.add(kb.mul(o, length * inner), index[0])
        kb.b.store(widen(kb.b, kb.vload(x_ptr, dtype, col, w, mask), dtype), best)
        kb.b.store(kb.const(index_dtype, 0, w), where)
        with kb.loop(1, length, name="l") as l:
            v = widen(kb.b, kb.vload(x_ptr, dtype, kb.add(col, kb.mul(l, inner)), w, mask), dtype)
            b = kb.b.load(best)
            better = e.gt(v, b) if node.op == "ArgMax" else e.lt(v, b)
            if last:
                better = kb.b.or_(better, kb.b.fcmp_ordered("==", v, b) if e.float else kb.b.icmp_signed("==", v, b))
            kb.b.store(e.select(better, v, b), best)
            kb.b.store(e.select(better, kb.splat(l, w), kb.b.load(where)), where)
        kb.vstore(kb.b.load(where), y_ptr, index_dtype, kb.add(kb.mul(o, inner), index[0]), mask)

    with kb.loop(0, outer, name="o") as o:
        emit_loop_nest(kb, (inner,), row_width(k.width(dtype), inner), columns)


for _name in REDUCERS:
    CPU.register(_name, lower=lower_reduce)
CPU.register("ArgMax", lower=lower_arg_reduce)
CPU.register("ArgMin", lower=lower_arg_reduce)
