"""Softmax, LogSoftmax and LayerNormalization: per-row statistics, then one
element-wise pass.

Softmax views its input as [outer, L, inner] around the axis. With inner == 1
each row is contiguous: vector passes for the max, for exp(x - max) (stored)
and its sum, and a final scale. With inner > 1 the kernel walks vectors of
`inner` columns at once and keeps per-lane max and sum in registers, so every
load is still contiguous. LayerNormalization views its input as [outer, L]
and uses two passes for the statistics (mean, then squared deviations)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.elementwise import emit_loop_nest
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.reduce import combine
from hobbit.backend.cpu.reduce import hreduce, reduce_row, row_width, vector_type
from hobbit.emit.scalar import Emit


def softmax_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def lower_softmax(k: KernelArgs) -> None:
    node = k.node
    dtype = np.dtype(node.inputs[0].dtype)
    outer, length, inner = softmax_view(tuple(node.inputs[0].shape), node.attrs["axis"])
    log = node.op == "LogSoftmax"
    if inner == 1:
        _softmax_rows(k, dtype, outer, length, log)
    else:
        _softmax_columns(k, dtype, outer, length, inner, log)


def _softmax_rows(k: KernelArgs, dtype: np.dtype, outer: int, length: int, log: bool) -> None:
    kb, x, y = k.kb, k.inputs[0], k.outputs[0]
    lanes = k.width(dtype)
    width = row_width(lanes, length)
    acc = kb.alloca(vector_type(dtype, width))
    with kb.loop(*k.threads.split(outer), name="row") as row:
        base = kb.mul(row, length)
        peak = reduce_row(kb, dtype, lanes, x, base, length, "max")
        kb.b.store(kb.const(dtype, 0, width), acc)

        def exp_pass(index, w, mask):
            e = Emit(kb, dtype, w)
            t = e.exp(e.sub(kb.vload(x, dtype, kb.add(base, index[0]), w, mask), kb.splat(peak, w)))
            if mask is not None:
                t = e.select(mask, t, e.c(0))
            if not log:
                kb.vstore(t, y, dtype, kb.add(base, index[0]), mask)
            kb.b.store(e.add(kb.b.load(acc), t), acc)

        emit_loop_nest(kb, (length,), width, exp_pass)
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

        emit_loop_nest(kb, (length,), width, finish)


def _softmax_columns(k: KernelArgs, dtype: np.dtype, outer: int, length: int, inner: int, log: bool) -> None:
    kb, x, y = k.kb, k.inputs[0], k.outputs[0]
    width = row_width(k.width(dtype), inner)
    # Threads share the outer slices when there are enough, else each slice's columns.
    by_outer = outer >= 2 * k.threads.max_threads
    with kb.loop(*(k.threads.split(outer) if by_outer else (0, outer)), name="o") as o:
        base = kb.mul(o, length * inner)

        def columns(index, w, mask):
            e = Emit(kb, dtype, w)
            col = kb.add(base, index[0])
            peak = _column_fold(kb, e, x, col, length, inner, mask, "max")
            total = kb.alloca(vector_type(dtype, w))
            kb.b.store(e.c(0), total)
            with kb.loop(0, length, name="l") as l:
                at = kb.add(col, kb.mul(l, inner))
                t = e.exp(e.sub(kb.vload(x, dtype, at, w, mask), peak))
                if not log:
                    kb.vstore(t, y, dtype, at, mask)
                kb.b.store(e.add(kb.b.load(total), t), total)
            s = kb.b.load(total)
            factor = e.add(peak, e.log(s)) if log else e.div(e.c(1.0), s)
            with kb.loop(0, length, name="l") as l:
                at = kb.add(col, kb.mul(l, inner))
                if log:
                    v = e.sub(kb.vload(x, dtype, at, w, mask), factor)
                else:
                    v = e.mul(kb.vload(y, dtype, at, w, mask), factor)
                kb.vstore(v, y, dtype, at, mask)

        emit_loop_nest(kb, (inner,), width, columns, None if by_outer else k.threads)


def _column_fold(kb: KernelBuilder, e: Emit, src: ir.Value, col: int | ir.Value, length: int, stride: int,
                 mask: ir.Value | None, how: str) -> ir.Value:
    """Lane-wise combine of src[col + l * stride] over l (a vector of columns)."""
    acc = kb.alloca(vector_type(e.dtype, e.width))
    kb.b.store(kb.vload(src, e.dtype, col, e.width, mask), acc)
    with kb.loop(1, length, name="l") as l:
        v = kb.vload(src, e.dtype, kb.add(col, kb.mul(l, stride)), e.width, mask)
        kb.b.store(combine(e, how, kb.b.load(acc), v), acc)
    return kb.b.load(acc)


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
    with kb.loop(*k.threads.split(outer), name="row") as row:
        base = kb.mul(row, length)
        mean = e1.mul(reduce_row(kb, dtype, lanes, x, base, length, "add"), e1.c(1.0 / length))

        def squared_deviation(e: Emit, v):
            d = e.sub(v, kb.splat(mean, e.width))
            return e.mul(d, d)

        var = e1.mul(reduce_row(kb, dtype, lanes, x, base, length, "add", squared_deviation), e1.c(1.0 / length))
        inv = e1.div(e1.c(1.0), e1.sqrt(e1.add(var, e1.c(node.attrs["epsilon"]))))
        if len(k.outputs) == 3:  # the optional Mean and InvStdDev outputs, one value per row
            kb.store(mean, k.outputs[1], dtype, row)
            kb.store(inv, k.outputs[2], dtype, row)

        def normalise(index, w, mask):
            e = Emit(kb, dtype, w)
            at = kb.add(base, index[0])
            v = e.mul(e.sub(kb.vload(x, dtype, at, w, mask), kb.splat(mean, w)), kb.splat(inv, w))
            v = e.mul(v, kb.vload(scale, dtype, index[0], w, mask))
            if bias is not None:
                v = e.add(v, kb.vload(bias, dtype, index[0], w, mask))
            kb.vstore(v, y, dtype, at, mask)

        emit_loop_nest(kb, (length,), width, normalise)


CPU.register("Softmax", lower=lower_softmax)
CPU.register("LogSoftmax", lower=lower_softmax)
CPU.register("LayerNormalization", lower=lower_layernorm)
