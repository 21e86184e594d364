"""The CPU's reductions: one kernel for every ReduceX op (its reducers are
hobbit.emit.reduce's), plus the vector row helpers (horizontal combine,
contiguous-row accumulation, the walk over rows of run-time dims) that softmax and
layer normalisation reuse.

The input's dims are merged into alternating runs of kept and reduced dims.
When the innermost run is reduced, it is contiguous: each output element gets a
vector accumulator (kept in a register) that is folded horizontally at the end.
When the innermost run is kept, the output row itself is the accumulator and
every reduced index adds one contiguous vector pass over it. Either way the
innermost loop walks memory with stride 1 and accumulation stays in the input
dtype (float32 for float32 models).

Run-time dims (hobbit.graph.extents): every tensor keeps its bound shape and strides,
and a run-time dim starts a run of its own, whose trip count is its extent times the
static dims merged inside it; loops stop at the extents, a contiguous row's ragged
tail is a mask of run-time length, and ReduceMean divides by the run-time count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I32, I64, KernelBuilder, llvm_type
from hobbit.backend.cpu.elementwise import emit_loop_nest
from hobbit.emit.epilogue import collapse_extents
from hobbit.graph.ir import Node, Value
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
                   base: int | ir.Value, length: int | ir.Value, how: str,
                   pre: Callable[[Emit, ir.Value], ir.Value] | None = None) -> None:
    """acc (a vector alloca) = combine(acc, pre(src[base : base + length])) lane-wise;
    the ragged tail is a masked load whose off lanes become the identity. `length` may
    be a run-time i64: the tail's mask is then computed, and nothing past it is read."""
    def step(e: Emit, index, mask) -> None:
        x = kb.vload(src, dtype, kb.add(base, index), e.width, mask)
        if pre is not None:
            x = pre(e, x)
        if mask is not None:
            x = e.select(mask, x, e.c(identity(dtype, how)))
        kb.b.store(combine(e, how, kb.b.load(acc), x), acc)

    if not isinstance(length, int):
        b, e = kb.b, Emit(kb, dtype, width)
        full = b.mul(b.udiv(length, kb.i64(width)), kb.i64(width))
        with kb.loop(0, full, width, name="r") as i:
            step(e, i, None)
        if width > 1:
            rest = b.sub(length, full)
            with kb.if_then(b.icmp_unsigned("!=", rest, kb.i64(0))):
                step(e, full, kb.runtime_prefix_mask(width, rest))
        return
    full = length - length % width
    e = Emit(kb, dtype, width)
    if full:
        with kb.loop(0, full, width, name="r") as i:
            step(e, i, None)
    if length % width:
        step(e, full, kb.prefix_mask(width, length % width))


def reduce_row(kb: KernelBuilder, dtype: np.dtype, lanes: int, src: ir.Value, base: int | ir.Value,
               length: int | ir.Value, how: str, pre: Callable[[Emit, ir.Value], ir.Value] | None = None,
               bound: int | None = None) -> ir.Value:
    """The scalar combine of pre(src[base : base + length]); a run-time `length` needs its
    `bound` (the most it can be), which picks the vector width."""
    width = row_width(lanes, length if bound is None else bound)
    acc = kb.alloca(vector_type(dtype, width))
    kb.b.store(kb.const(dtype, identity(dtype, how), width), acc)
    accumulate_row(kb, dtype, acc, width, src, base, length, how, pre)
    return hreduce(kb, dtype, kb.b.load(acc), how)


def row_walk(kb: KernelBuilder, shape: tuple[int, ...], extents: tuple[int | ir.Value, ...],
             stride_sets: list[list[int]]) -> tuple[int | ir.Value, Callable]:
    """Rows over the dims `shape` (some of them run-time: `extents` gives each one's length
    in this inference), one row per index of those dims, at offsets `stride_sets` (one list
    of per-dim strides per tensor). Returns (the number of rows in this inference, walk):
    walk(lo, hi, body) calls body(offsets) for rows lo .. hi-1 in row-major order, offsets
    one per stride set. Dims merge as in collapse_extents; with several merged dims the
    index is divided out of `lo` once and then stepped like an odometer, so a row costs
    no division."""
    _, strides, lengths = collapse_extents(kb, shape, stride_sets, extents)
    rows = run_time_count(kb, lengths)

    def walk(lo: int | ir.Value, hi: int | ir.Value, body: Callable[[list[int | ir.Value]], None]) -> None:
        if len(lengths) == 1:
            with kb.loop(lo, hi, name="row") as row:
                body([kb.mul(row, s[0]) for s in strides])
            return
        b = kb.b
        start: list[int | ir.Value] = [0] * len(lengths)
        rest = lo
        for d in range(len(lengths) - 1, 0, -1):
            if isinstance(rest, int) and rest == 0:
                break
            n = lengths[d]
            if not isinstance(n, int):  # the row count is then 0 and lo too: no division by 0
                n = b.select(b.icmp_unsigned("==", n, kb.i64(0)), kb.i64(1), n)
            quotient = b.udiv(kb.idx(rest), kb.idx(n))
            start[d] = b.sub(kb.idx(rest), b.mul(quotient, kb.idx(n)))
            rest = quotient
        start[0] = rest
        index = [kb.alloca(I64) for _ in lengths]
        offset = [kb.alloca(I64) for _ in strides]
        for var, value in zip(index, start):
            b.store(kb.idx(value), var)
        for var, s in zip(offset, strides):
            b.store(kb.idx(kb.affine(list(zip(start, s)))), var)

        def step(d: int) -> None:
            """The odometer: dim d one on, carrying into dim d - 1 at its length."""
            i = b.add(b.load(index[d], typ=I64), kb.i64(1))
            b.store(i, index[d])
            for var, s in zip(offset, strides):
                if s[d]:
                    b.store(b.add(b.load(var, typ=I64), kb.i64(s[d])), var)
            if d == 0:
                return
            with kb.if_then(b.icmp_unsigned("==", i, kb.idx(lengths[d]))):
                b.store(kb.i64(0), index[d])
                for var, s in zip(offset, strides):
                    if s[d]:
                        b.store(b.sub(b.load(var, typ=I64), kb.idx(kb.mul(lengths[d], s[d]))), var)
                step(d - 1)

        with kb.loop(lo, hi, name="row"):
            body([b.load(var, typ=I64) for var in offset])
            step(len(lengths) - 1)

    return rows, walk


def row_strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major strides, in elements."""
    return [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]


def elements_from(kb: KernelBuilder, shape: tuple[int, ...], extents: tuple[int | ir.Value, ...],
                  first: int) -> int | ir.Value:
    """The elements of dims `first`.. in this inference, where at most dim `first` is run-time
    (columns_reason): one contiguous range."""
    if first == len(shape):
        return 1
    return kb.mul(extents[first], int(np.prod(shape[first + 1:], dtype=np.int64)))


def columns_reason(x: Value, axis: int) -> str | None:
    """Why the dims after `axis` are not one contiguous range in every inference (a run-time
    dim among them that does not lead them), or None."""
    if x.extents is not None and any(e is not None for e in x.extents[axis + 2:]):
        return f"a run-time dim after axis {axis} that is not the one right after it"
    return None


def run_time_count(kb: KernelBuilder, lengths: list[int | ir.Value]) -> int | ir.Value:
    """The product of some dims' lengths in this inference."""
    count: int | ir.Value = 1
    for n in lengths:
        count = kb.mul(count, n)
    return count


def reciprocal(e: Emit, count: int | ir.Value) -> ir.Value:
    """1 / count in e's float dtype, a constant where the count is static."""
    if isinstance(count, int):
        return e.c(1.0 / count)
    return e.div(e.c(1.0), e.kb.splat(e.b.uitofp(count, llvm_type(e.dtype)), e.width))


@dataclass(frozen=True)
class Run:
    """Consecutive input dims merged into one loop: extent, input stride, reduced or kept;
    `length`, where a run-time dim leads the run, its trip count in this inference."""

    extent: int
    stride: int
    reduced: bool
    length: int | ir.Value | None = None

    @property
    def trips(self) -> int | ir.Value:
        return self.extent if self.length is None else self.length


def reduce_runs(shape: tuple[int, ...], axes: tuple[int, ...], kb: KernelBuilder | None = None,
                extents: tuple[int | ir.Value, ...] | None = None) -> list[Run]:
    """Alternating kept/reduced runs of a row-major `shape`; size-1 dims vanish. With
    `extents` (each dim's length in this inference, KernelArgs.extents; `kb` emits their
    products), a run-time dim starts a run, which then has a run-time `length`."""
    dynamic = [extents is not None and not isinstance(extents[d], int) for d in range(len(shape))]
    runs: list[Run] = []
    stride = 1
    dims = []
    for d in range(len(shape) - 1, -1, -1):
        dims.append((d, stride))
        stride *= shape[d]
    for d, st in reversed(dims):
        if shape[d] == 1 and not dynamic[d]:
            continue
        red = d in axes
        if runs and runs[-1].reduced == red and not dynamic[d]:
            last = runs[-1]
            length = None if last.length is None else kb.mul(last.length, shape[d])
            runs[-1] = Run(last.extent * shape[d], st, red, length)
        else:
            runs.append(Run(shape[d], st, red, extents[d] if dynamic[d] else None))
    return runs


def _nest(kb: KernelBuilder, extents: list[int | ir.Value], body: Callable[[list[ir.Value]], None],
          name: str) -> None:
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
    if x.extents is None:
        runs = reduce_runs(tuple(x.shape), axes)
        count: int | ir.Value = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    else:
        extents = k.extents(x)
        runs = reduce_runs(tuple(x.shape), axes, k.kb, extents)
        count = run_time_count(k.kb, [extents[a] for a in axes])
        if r.post == "mean" and not isinstance(count, int):  # 1 / count, once
            count = reciprocal(Emit(k.kb, dtype, 1), count)
    kept = [run for run in runs if not run.reduced]
    reds = [run for run in runs if run.reduced]
    out_strides = [int(np.prod([k2.extent for k2 in kept[j + 1:]], dtype=np.int64)) for j in range(len(kept))]
    if not runs or runs[-1].reduced:
        _reduce_inner(k, r, dtype, kept, out_strides, reds or [Run(1, 1, True)], count)
    else:
        _reduce_outer(k, r, dtype, kept, out_strides, reds, count)


def _post(e: Emit, r: Reducer, x: ir.Value, count: int | ir.Value) -> ir.Value:
    """apply_post; a mean over run-time dims gets the reciprocal of its count as a scalar value."""
    if r.post == "mean" and not isinstance(count, int):
        return e.mul(x, e.kb.splat(count, e.width))
    return apply_post(e, r, x, count)


def _reduce_inner(k: KernelArgs, r: Reducer, dtype: np.dtype, kept: list[Run], out_strides: list[int],
                  reds: list[Run], count: int | ir.Value) -> None:
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
            accumulate_row(kb, dtype, acc, width, k.inputs[0], base, inner.trips, r.combine, pre)

        _nest(kb, [run.trips for run in reds[:-1]], per_row, "r")
        total = hreduce(kb, dtype, kb.b.load(acc), r.combine)
        out = _post(Emit(kb, dtype, 1), r, total, count)
        kb.store(out, k.outputs[0], dtype, kb.affine(list(zip(kidx, out_strides))))

    _nest(kb, [run.trips for run in kept], per_output, "k")


def _reduce_outer(k: KernelArgs, r: Reducer, dtype: np.dtype, kept: list[Run], out_strides: list[int],
                  reds: list[Run], count: int | ir.Value) -> None:
    """Innermost run kept: the output row is the accumulator, updated a vector at a time."""
    kb = k.kb
    x_ptr, y_ptr = k.inputs[0], k.outputs[0]
    row = kept[-1].extent
    lengths = [kept[-1].trips]
    width = row_width(k.width(dtype), row)

    def per_row(kidx: list[ir.Value]) -> None:
        x_base = kb.affine([(i, run.stride) for i, run in zip(kidx, kept)])
        y_base = kb.affine(list(zip(kidx, out_strides)))

        def init(index, w, mask):
            kb.vstore(kb.const(dtype, identity(dtype, r.combine), w), y_ptr, dtype, kb.add(y_base, index[0]), mask)

        emit_loop_nest(kb, (row,), width, init, lengths=lengths)

        def per_reduced(ridx: list[ir.Value]) -> None:
            base = kb.add(x_base, kb.affine([(i, run.stride) for i, run in zip(ridx, reds)]))

            def update(index, w, mask):
                e = Emit(kb, dtype, w)
                v = apply_pre(e, r, kb.vload(x_ptr, dtype, kb.add(base, index[0]), w, mask))
                at = kb.add(y_base, index[0])
                kb.vstore(combine(e, r.combine, kb.vload(y_ptr, dtype, at, w, mask), v), y_ptr, dtype, at, mask)

            emit_loop_nest(kb, (row,), width, update, lengths=lengths)

        _nest(kb, [run.trips for run in reds], per_reduced, "r")
        if r.post:
            def finish(index, w, mask):
                at = kb.add(y_base, index[0])
                v = _post(Emit(kb, dtype, w), r, kb.vload(y_ptr, dtype, at, w, mask), count)
                kb.vstore(v, y_ptr, dtype, at, mask)

            emit_loop_nest(kb, (row,), width, finish, lengths=lengths)

    _nest(kb, [run.trips for run in kept[:-1]], per_row, "k")


def reduce_dynamic(node: Node) -> str | None:
    """A reduction follows run-time dims kept or reduced; a mean over run-time dims needs a
    float dtype (its count is converted at run time)."""
    x = node.inputs[0]
    if REDUCERS[node.op].post == "mean" and np.dtype(x.dtype).kind != "f" and x.extents is not None \
            and any(x.extents[a] is not None for a in node.attrs["axes"]):
        return f"an integer mean over a run-time dim ({np.dtype(x.dtype).name})"
    return None


def lower_arg_reduce(k: KernelArgs) -> None:
    """ArgMax/ArgMin over one axis of the view [outer, L, inner]: a running best value
    and its index per lane; strict comparison keeps the first index, non-strict the last.
    16-bit floats compare in float32 (exact). With run-time dims, the outer rows are
    walked inside their extents (row_walk), and L and the columns stop at theirs."""
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
    width = row_width(k.width(dtype), inner)

    def row(x_row: Callable[[], int | ir.Value], y_row: Callable[[], int | ir.Value],
            length_now: int | ir.Value, inner_now: int | ir.Value) -> None:
        """One outer row: x_row() and y_row() give its offsets (emitted where they are used)."""
        def columns(index, w, mask):
            e = Emit(kb, compute, w)
            best = kb.alloca(vector_type(compute, w))
            where = kb.alloca(vector_type(index_dtype, w))
            col = kb.add(x_row(), index[0])
            kb.b.store(widen(kb.b, kb.vload(x_ptr, dtype, col, w, mask), dtype), best)
            kb.b.store(kb.const(index_dtype, 0, w), where)
            with kb.loop(1, length_now, name="l") as l:
                v = widen(kb.b, kb.vload(x_ptr, dtype, kb.add(col, kb.mul(l, inner)), w, mask), dtype)
                b = kb.b.load(best)
                better = e.gt(v, b) if node.op == "ArgMax" else e.lt(v, b)
                if last:
                    better = kb.b.or_(better,
                                      kb.b.fcmp_ordered("==", v, b) if e.float else kb.b.icmp_signed("==", v, b))
                kb.b.store(e.select(better, v, b), best)
                kb.b.store(e.select(better, kb.splat(l, w), kb.b.load(where)), where)
            kb.vstore(kb.b.load(where), y_ptr, index_dtype, kb.add(y_row(), index[0]), mask)

        emit_loop_nest(kb, (inner,), width, columns, lengths=[inner_now])

    x = node.inputs[0]
    if x.extents is None:
        with kb.loop(0, outer, name="o") as o:
            row(lambda: kb.mul(o, length * inner), lambda: kb.mul(o, inner), length, inner)
        return
    extents = k.extents(x)
    strides = row_strides(shape)[:axis]
    rows, walk = row_walk(kb, shape[:axis], extents[:axis], [strides, [s // length for s in strides]])
    inner_now = elements_from(kb, shape, extents, axis + 1)
    walk(0, rows, lambda offsets: row(lambda: offsets[0], lambda: offsets[1], extents[axis], inner_now))


def arg_reduce_dynamic(node: Node) -> str | None:
    """Run-time dims before the axis and on it are followed; after it, only the first dim
    may be one (the columns are then one contiguous range)."""
    return columns_reason(node.inputs[0], node.attrs["axis"])


for _name in REDUCERS:
    CPU.register(_name, lower=lower_reduce, dynamic=reduce_dynamic)
CPU.register("ArgMax", lower=lower_arg_reduce, dynamic=arg_reduce_dynamic)
CPU.register("ArgMin", lower=lower_arg_reduce, dynamic=arg_reduce_dynamic)
