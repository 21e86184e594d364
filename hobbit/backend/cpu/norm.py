"""Softmax, LogSoftmax and LayerNormalization: per-row statistics, then one
element-wise pass.

Softmax views its input as [outer, L, inner] around the axis. With inner == 1
each row is contiguous: vector passes for the max, for exp(x - max) (stored)
and its sum, and a final scale. With inner > 1 the kernel walks vectors of
`inner` columns at once and keeps per-lane max and sum in registers, so every
load is still contiguous. LayerNormalization views its input as [outer, L]
and uses two passes for the statistics (mean, then squared deviations).

Run-time dims (hobbit.graph.extents): tensors keep their bound shapes and strides.
The outer dims are walked as rows inside their extents (hobbit.backend.cpu.reduce.row_walk),
the threads sharing the run-time row count; a run-time L (attention scores softmaxed
over a run-time sequence) stops each row pass at the extent, its ragged tail under a
mask of run-time length, so nothing past an extent is read or written. Only the first
of the dims after the axis may be run-time (the columns, or LayerNormalization's
normalised elements, are then one contiguous range)."""

from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I32, KernelBuilder, llvm_type
from hobbit.backend.cpu.elementwise import emit_loop_nest
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.reduce import combine
from hobbit.backend.cpu.reduce import (columns_reason, elements_from, hreduce, reciprocal, reduce_row, row_strides,
                                       row_walk, row_width, vector_type)
from hobbit.emit.scalar import Emit
from hobbit.graph.ir import Node
from hobbit.ops.reduce import identity


def softmax_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


Rows = Callable[[Callable[[int | ir.Value], None], bool], None]  # rows(body(offset), shared)


def lower_softmax(k: KernelArgs) -> None:
    node = k.node
    x = node.inputs[0]
    dtype = np.dtype(x.dtype)
    shape, axis = tuple(x.shape), node.attrs["axis"]
    outer, length, inner = softmax_view(shape, axis)
    log = node.op == "LogSoftmax"
    if x.extents is None:
        if inner == 1:
            _softmax_rows(k, dtype, outer, length, log)
        else:
            _softmax_columns(k, dtype, outer, length, inner, log)
        return
    kb = k.kb
    extents = k.extents(x)
    rows, walk = row_walk(kb, shape[:axis], extents[:axis], [row_strides(shape)[:axis]])
    length_now = extents[axis]
    inner_now = elements_from(kb, shape, extents, axis + 1)

    def each_row(body: Callable[[int | ir.Value], None], shared: bool) -> None:
        lo, hi = k.threads.split(rows) if shared else (0, rows)
        walk(lo, hi, lambda offsets: body(offsets[0]))

    if inner == 1:
        _softmax_rows(k, dtype, outer, length, log, each_row, length_now)
    else:
        _softmax_columns(k, dtype, outer, length, inner, log, each_row, length_now, inner_now)


def _softmax_rows(k: KernelArgs, dtype: np.dtype, outer: int, length: int, log: bool,
                  each_row: Rows | None = None, length_now: int | ir.Value | None = None) -> None:
    """Contiguous rows of `length` (`length_now` in this inference); `each_row` walks the
    rows of run-time dims (lower_softmax), else row r starts at r * length."""
    kb, x, y = k.kb, k.inputs[0], k.outputs[0]
    lanes = k.width(dtype)
    width = row_width(lanes, length)
    acc = kb.alloca(vector_type(dtype, width))
    now = length if length_now is None else length_now

    def one_row(base: int | ir.Value) -> None:
        if not isinstance(now, int):
            _prefetch_next_row(kb, x, dtype, base, length, now)
        peak = reduce_row(kb, dtype, lanes, x, base, now, "max", bound=length)
        kb.b.store(kb.const(dtype, 0, width), acc)

        def exp_pass(index, w, mask):
            e = Emit(kb, dtype, w)
            t = e.exp(e.sub(kb.vload(x, dtype, kb.add(base, index[0]), w, mask), kb.splat(peak, w)))
            if mask is not None:
                t = e.select(mask, t, e.c(0))
            if not log:
                kb.vstore(t, y, dtype, kb.add(base, index[0]), mask)
            kb.b.store(e.add(kb.b.load(acc), t), acc)

        emit_loop_nest(kb, (length,), width, exp_pass, lengths=[now])
        total = hreduce(kb, dtype, kb.b.load(acc), "add")
        e1 = Emit(kb, dtype, 1)
        factor = e1.add(peak, e1.log(total)) if log else e1.div(e1.c(1.0), total)

        def finish(index, w, mask):
            e = Emit(kb, dtype, w)
            at = kb.add(base, index[0])
            if log:
                v = e.sub(kb.vload(x, dtype, at, w, mask), kb.splat(factor, w))
            else:
                v = e.mul(kb.vload(y, dtype, at, w, mask), kb.splat(factor, w))
            kb.vstore(v, y, dtype, at, mask)

        emit_loop_nest(kb, (length,), width, finish, lengths=[now])

    if each_row is not None:
        each_row(one_row, True)
        return
    with kb.loop(*k.threads.split(outer), name="row") as row:
        one_row(kb.mul(row, length))


def _prefetch_next_row(kb: KernelBuilder, x: ir.Value, dtype: np.dtype, base: int | ir.Value, stride: int,
                       length: ir.Value) -> None:
    """Fetch the `length` elements at base + stride into L1 (a hint: never faults). A run-time
    row is a prefix of its bound-length slot, so rows are short runs at a long stride, which
    the hardware prefetcher follows badly: [1, 12, S, S] scores in a bound of 512 took 1.2x a
    static compile's time at S = 64..256 on Zen 4, 1.1x with the next row fetched ahead."""
    with kb.if_then(kb.b.icmp_unsigned("<", length, kb.i64(stride))):  # at the bound, rows are one stream
        with kb.loop(0, length, 64 // dtype.itemsize, name="ahead") as i:
            at = kb.b.gep(x, [kb.idx(kb.add(kb.add(base, stride), i))], source_etype=llvm_type(dtype))
            kb.call_intrinsic("llvm.prefetch.p0", ir.VoidType(), [at, ir.Constant(I32, 0), ir.Constant(I32, 3),
                                                                  ir.Constant(I32, 1)])


def _softmax_columns(k: KernelArgs, dtype: np.dtype, outer: int, length: int, inner: int, log: bool,
                     each_row: Rows | None = None, length_now: int | ir.Value | None = None,
                     inner_now: int | ir.Value | None = None) -> None:
    """Rows of `inner` columns, `length` apart (`length_now` rows of `inner_now` columns in
    this inference); `each_row` as in _softmax_rows."""
    kb, x, y = k.kb, k.inputs[0], k.outputs[0]
    width = row_width(k.width(dtype), inner)
    l_now = length if length_now is None else length_now
    columns_now = [inner] if inner_now is None else [inner_now]
    # Threads share the outer slices when there are enough, else each slice's columns.
    by_outer = outer >= 2 * k.threads.max_threads

    def one_slice(base: int | ir.Value) -> None:
        def columns(index, w, mask):
            e = Emit(kb, dtype, w)
            col = kb.add(base, index[0])
            peak = _column_fold(kb, e, x, col, l_now, inner, mask, "max")
            total = kb.alloca(vector_type(dtype, w))
            kb.b.store(e.c(0), total)
            with kb.loop(0, l_now, name="l") as l:
                at = kb.add(col, kb.mul(l, inner))
                t = e.exp(e.sub(kb.vload(x, dtype, at, w, mask), peak))
                if not log:
                    kb.vstore(t, y, dtype, at, mask)
                kb.b.store(e.add(kb.b.load(total), t), total)
            s = kb.b.load(total)
            factor = e.add(peak, e.log(s)) if log else e.div(e.c(1.0), s)
            with kb.loop(0, l_now, name="l") as l:
                at = kb.add(col, kb.mul(l, inner))
                if log:
                    v = e.sub(kb.vload(x, dtype, at, w, mask), factor)
                else:
                    v = e.mul(kb.vload(y, dtype, at, w, mask), factor)
                kb.vstore(v, y, dtype, at, mask)

        emit_loop_nest(kb, (inner,), width, columns, None if by_outer else k.threads, columns_now)

    if each_row is not None:
        each_row(one_slice, by_outer)
        return
    with kb.loop(*(k.threads.split(outer) if by_outer else (0, outer)), name="o") as o:
        one_slice(kb.mul(o, length * inner))


def _column_fold(kb: KernelBuilder, e: Emit, src: ir.Value, col: int | ir.Value, length: int | ir.Value,
                 stride: int, mask: ir.Value | None, how: str) -> ir.Value:
    """Lane-wise combine of src[col + l * stride] over l (a vector of columns); a run-time
    `length` starts from the identity, so not even row 0 is read when it is 0."""
    acc = kb.alloca(vector_type(e.dtype, e.width))
    first = 1
    if isinstance(length, int):
        kb.b.store(kb.vload(src, e.dtype, col, e.width, mask), acc)
    else:
        kb.b.store(e.c(identity(e.dtype, how)), acc)
        first = 0
    with kb.loop(first, length, name="l") as l:
        v = kb.vload(src, e.dtype, kb.add(col, kb.mul(l, stride)), e.width, mask)
        kb.b.store(combine(e, how, kb.b.load(acc), v), acc)
    return kb.b.load(acc)


def softmax_dynamic(node: Node) -> str | None:
    """Run-time dims before the axis and on it are followed; after it, only the first dim
    may be one (the columns are then one contiguous range)."""
    x, y = node.inputs[0], node.outputs[0]
    if x.extents != y.extents:
        return "its output's run-time dims are not its input's"
    return columns_reason(x, node.attrs["axis"])


def lower_layernorm(k: KernelArgs) -> None:
    """y = (x - mean) / sqrt(var + epsilon) * scale (+ bias), statistics per row of L."""
    kb, node = k.kb, k.node
    dtype = np.dtype(node.inputs[0].dtype)
    shape = tuple(node.inputs[0].shape)
    axis = node.attrs["axis"]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    length = int(np.prod(shape[axis:], dtype=np.int64))
    x, scale, y = k.inputs[0], k.inputs[1], k.outputs[0]
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    lanes = k.width(dtype)
    width = row_width(lanes, length)
    e1 = Emit(kb, dtype, 1)

    def one_row(base: int | ir.Value, stat: int | ir.Value, now: int | ir.Value, inv_length: ir.Value) -> None:
        """The row at `base` of `now` elements (its statistics at `stat`)."""
        mean = e1.mul(reduce_row(kb, dtype, lanes, x, base, now, "add", bound=length), inv_length)

        def squared_deviation(e: Emit, v):
            d = e.sub(v, kb.splat(mean, e.width))
            return e.mul(d, d)

        var = e1.mul(reduce_row(kb, dtype, lanes, x, base, now, "add", squared_deviation, bound=length), inv_length)
        inv = e1.div(e1.c(1.0), e1.sqrt(e1.add(var, e1.c(node.attrs["epsilon"]))))
        if len(k.outputs) == 3:  # the optional Mean and InvStdDev outputs, one value per row
            kb.store(mean, k.outputs[1], dtype, stat)
            kb.store(inv, k.outputs[2], dtype, stat)

        def normalise(index, w, mask):
            e = Emit(kb, dtype, w)
            at = kb.add(base, index[0])
            v = e.mul(e.sub(kb.vload(x, dtype, at, w, mask), kb.splat(mean, w)), kb.splat(inv, w))
            v = e.mul(v, kb.vload(scale, dtype, index[0], w, mask))
            if bias is not None:
                v = e.add(v, kb.vload(bias, dtype, index[0], w, mask))
            kb.vstore(v, y, dtype, at, mask)

        emit_loop_nest(kb, (length,), width, normalise, lengths=[now])

    value = node.inputs[0]
    if value.extents is None:
        with kb.loop(*k.threads.split(outer), name="row") as row:
            one_row(kb.mul(row, length), row, length, e1.c(1.0 / length))
        return
    extents = k.extents(value)
    now = elements_from(kb, shape, extents, axis)
    inv_length = reciprocal(e1, now)
    strides = row_strides(shape)[:axis]
    rows, walk = row_walk(kb, shape[:axis], extents[:axis], [strides, row_strides(shape[:axis])])
    walk(*k.threads.split(rows), lambda offsets: one_row(offsets[0], offsets[1], now, inv_length))


def layernorm_dynamic(node: Node) -> str | None:
    """Run-time dims of the rows are followed, and one leading the normalised dims (axis)
    with the scale and bias, which have the normalised shape, following it too."""
    x, axis = node.inputs[0], node.attrs["axis"]
    if x.extents is None:
        return "only its outputs have run-time dims"
    if node.outputs[0].extents != x.extents:
        return "its output's run-time dims are not its input's"
    if any(e is not None for e in x.extents[axis + 1:]):
        return f"a run-time dim among the normalised dims that does not lead them (axis {axis})"
    for v in node.inputs[1:]:
        if v is not None and v.extents is not None and v.extents != x.extents[axis:]:
            return f"'{v.name}' has run-time dims other than the normalised dims'"
    return None


CPU.register("Softmax", lower=lower_softmax, dynamic=softmax_dynamic)
CPU.register("LogSoftmax", lower=lower_softmax, dynamic=softmax_dynamic)
CPU.register("LayerNormalization", lower=lower_layernorm, dynamic=layernorm_dynamic)
