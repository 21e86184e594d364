"""MaxPool and AveragePool (NCHW) on the GPU: one thread per output, `per_thread` of
them strided by the block's width, so that a warp writes consecutive outputs of a row
and reads its input rows `stride` apart (hobbit.backend.gpu.elementwise.for_each_output).

Borders are exact (hobbit.backend.gpu.window): a tap outside the input is the identity (-inf,
or the integer minimum, for max; 0 for the sum), and an average divides by its window's
count, the valid taps or, with count_include_pad, those inside the explicit pads (never
the ceil_mode overhang), as onnxruntime counts them. Global pools are ReduceMean /
ReduceMax over the spatial dims by the time they get here (the frontend's choice)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.backend.gpu.elementwise import for_each_output, unflatten
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.backend.gpu.window import fold, inside, tap_position, taps_below, valid_taps
from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.emit.reduce import combine
from hobbit.emit.scalar import Emit
from hobbit.ops.reduce import identity


def _unrolled_window(kb: KernelBuilder, e: Emit, how: str, x: ir.Value, plane: ir.Value,
                     rows: ir.Value, cols: ir.Value, a: dict, w: int, h: int) -> ir.Value:
    (kh, kw), (dh, dw) = a["kernel_shape"], a["dilations"]
    empty = e.c(identity(e.dtype, how))
    row_at = [tap_position(kb, rows, i, dh) for i in range(kh)]
    col_at = [tap_position(kb, cols, j, dw) for j in range(kw)]
    row_ok = [inside(kb, r, h) for r in row_at]
    col_ok = [inside(kb, c, w) for c in col_at]
    acc = empty
    for r, r_ok in zip(row_at, row_ok):
        row = kb.b.add(plane, kb.b.mul(r, kb.i64(w)))
        for c, c_ok in zip(col_at, col_ok):
            ok = kb.b.and_(r_ok, c_ok)
            v = kb.load(x, e.dtype, kb.b.select(ok, kb.b.add(row, c), plane))
            acc = combine(e, how, acc, e.select(ok, v, empty))
    return acc


def _looped_window(kb: KernelBuilder, e: Emit, how: str, x: ir.Value, plane: ir.Value,
                   rows: ir.Value, cols: ir.Value, a: dict, w: int, h: int) -> ir.Value:
    (kh, kw), (dh, dw) = a["kernel_shape"], a["dilations"]
    r_lo, r_hi = valid_taps(kb, rows, h, kh, dh)
    c_lo, c_hi = valid_taps(kb, cols, w, kw, dw)

    def row_step(i: ir.Value, acc: ir.Value) -> ir.Value:
        row = kb.b.add(plane, kb.b.mul(kb.b.add(rows, kb.b.mul(i, kb.i64(dh))), kb.i64(w)))

        def col_step(j: ir.Value, acc: ir.Value) -> ir.Value:
            v = kb.load(x, e.dtype, kb.b.add(row, kb.b.add(cols, kb.b.mul(j, kb.i64(dw)))))
            return combine(e, how, acc, v)
        return fold(kb, c_lo, c_hi, acc, col_step, "kw")
    return fold(kb, r_lo, r_hi, e.c(identity(e.dtype, how)), row_step, "kh")


def _count(kb: KernelBuilder, start: ir.Value, size: int, k: int, dilation: int, pad_end: int,
           include_pad: bool) -> ir.Value:
    """The window's taps that count along one dim (the window never starts before the pad)."""
    if include_pad:
        return taps_below(kb, start, size + pad_end, k, dilation)
    lo, hi = valid_taps(kb, start, size, k, dilation)
    return kb.b.sub(hi, kb.b.select(kb.b.icmp_signed("<", lo, hi), lo, hi))


def lower_pool(k: GpuArgs) -> None:
    kb, node = k.kb, k.node
    dtype = np.dtype(node.inputs[0].dtype)
    n, c, h, w = node.inputs[0].shape
    _, _, oh, ow = node.outputs[0].shape
    a = node.attrs
    (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
    pt, pl, pb, pr = a["pads"]
    average = node.op == "AveragePool"
    how = "add" if average else "max"
    e = Emit(kb, dtype, 1)
    window = _unrolled_window if k.plan.extra["unrolled"] else _looped_window

    def body(flat: ir.Value) -> None:
        p, oy, ox = unflatten(kb, flat, (n * c, oh, ow))
        rows = kb.b.sub(kb.b.mul(oy, kb.i64(sh)), kb.i64(pt))
        cols = kb.b.sub(kb.b.mul(ox, kb.i64(sw)), kb.i64(pl))
        v = window(kb, e, how, k.inputs[0], kb.b.mul(p, kb.i64(h * w)), rows, cols, a, w, h)
        if average:
            include = bool(a["count_include_pad"])
            count = kb.b.mul(_count(kb, rows, h, kh, a["dilations"][0], pb, include),
                             _count(kb, cols, w, kw, a["dilations"][1], pr, include))
            v = e.div(v, kb.b.sitofp(count, llvm_type(dtype)))
        kb.store(v, k.outputs[0], dtype, flat)

    for_each_output(k, int(node.outputs[0].type.size), body)


GPU.register("MaxPool", lower=lower_pool)
GPU.register("AveragePool", lower=lower_pool)
