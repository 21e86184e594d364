"""Kernels for compile-time resampling tables (ResizeNearest, ResampleAxis).

The tables become private constant arrays in the module. ResampleAxis views
its input as [outer, n_in, inner] and its output as [outer, n_out, inner];
each output row (o, j) is the weighted sum of the input rows its taps name,
walked along the contiguous inner dim so LLVM can vectorise it. float16 is
loaded into float32, summed there and rounded once at the store.

Run-time dims (hobbit.graph.extents): the tables are the bound's, and a smaller size uses
their prefix (the extents check, TABLE_ATTRS, made sure that is what the model computes
there). ResizeNearest walks each dim up to its length; ResampleAxis walks the output up to
its lengths and clamps each tap's index to the input's run-time length along the axis (at
the bound a tap may read a row that a smaller input lacks: its last row stands in, as
Resize's own clamping does)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llvmlite import ir

from hobbit.graph.ir import Node
from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.emit.epilogue import collapse_extents
from hobbit.backend.cpu.elementwise import dynamic_extents, emit_loop_nest
from hobbit.backend.cpu.gather import emit_table_copy
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit


def constant_array(kb: KernelBuilder, values: Sequence[float | int], dtype: np.dtype) -> ir.GlobalVariable:
    """A private read-only global holding `values` as `dtype`."""
    module = kb.fn.module
    elem = llvm_type(dtype)
    ty = ir.ArrayType(elem, len(values))
    table = ir.GlobalVariable(module, ty, name=module.get_unique_name("table"))
    table.global_constant = True
    table.linkage = "private"
    table.unnamed_addr = True
    cast = float if np.dtype(dtype).kind == "f" else int
    table.initializer = ir.Constant(ty, [ir.Constant(elem, cast(v)) for v in values])
    return table


def lower_resize_nearest(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    strides = contiguous_strides(tuple(x.shape))
    offsets = [[i * s for i in table] for table, s in zip(k.node.attrs["sources"], strides)]
    emit_table_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, offsets, dynamic_extents(k, k.node.outputs[0]))


def resize_dynamic(node: Node) -> str | None:
    """A resized dim is run-time in the output where it is in the input (its tables were
    checked to be prefixes, or clamped, at other sizes: hobbit.graph.extents.TABLE_ATTRS)."""
    x, out = node.inputs[0], node.outputs[0]
    x_ext = x.extents or (None,) * len(x.shape)
    out_ext = out.extents or (None,) * len(out.shape)
    for d, (a, b) in enumerate(zip(x_ext, out_ext)):
        if (a is None) != (b is None):
            return f"dim {d} is run-time in {'its input' if b is None else 'its output'} only"
    return None


def lower_resample_axis(k: KernelArgs) -> None:
    kb, node, a = k.kb, k.node, k.node.attrs
    x = node.inputs[0]
    dtype = np.dtype(x.dtype)
    cd = compute_dtype(dtype)
    axis, taps = a["axis"], a["taps"]
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    n_in = int(x.shape[axis])
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    n_out = len(a["indices"]) // taps
    indices = constant_array(kb, a["indices"], np.dtype(np.int64))
    weights = constant_array(kb, a["weights"], cd)
    outside = constant_array(kb, a["outside"], np.dtype(np.int8)) if a["outside"] else None
    e = Emit(kb, cd, 1)
    src, dst = k.inputs[0], k.outputs[0]
    b = kb.b

    if x.extents is not None or node.outputs[0].extents is not None:
        _resample_extents(k, indices, weights, outside)
        return
    lo, hi = k.threads.split(outer * n_out)
    with kb.loop(lo, hi, name="row") as row:
        o = b.udiv(row, kb.i64(n_out))
        j = b.urem(row, kb.i64(n_out))
        x_base = kb.mul(o, n_in * inner)
        y_base = kb.mul(row, inner)
        first = kb.mul(j, taps)
        with kb.loop(0, inner, name="inner") as i:
            acc = kb.alloca(llvm_type(cd))
            b.store(e.c(0.0), acc)
            with kb.loop(first, kb.add(first, taps), name="tap") as at:
                source = kb.add(x_base, kb.add(kb.mul(kb.load(indices, np.int64, at), inner), i))
                value = widen(b, kb.load(src, dtype, source), dtype)
                b.store(e.fma(value, kb.load(weights, cd, at), b.load(acc)), acc)
            total = b.load(acc)
            if outside is not None:
                flag = b.icmp_signed("!=", kb.load(outside, np.int8, j), ir.Constant(ir.IntType(8), 0))
                total = e.select(flag, e.c(a["extrapolation_value"]), total)
            kb.store(narrow(b, total, dtype), dst, dtype, kb.add(y_base, i))


def _resample_extents(k: KernelArgs, indices: ir.GlobalVariable, weights: ir.GlobalVariable,
                      outside: ir.GlobalVariable | None) -> None:
    """ResampleAxis with run-time dims: every output element inside the extents, its taps'
    indices clamped to the input's length along the axis in this inference. The output's
    dims are merged where they are one range (the axis stays alone, found by its own stride
    set) and the outermost merged dim is shared among the threads."""
    kb, node, a = k.kb, k.node, k.node.attrs
    x, out = node.inputs[0], node.outputs[0]
    dtype = np.dtype(x.dtype)
    cd = compute_dtype(dtype)
    axis, taps = a["axis"], a["taps"]
    x_strides, y_strides = contiguous_strides(tuple(x.shape)), contiguous_strides(tuple(out.shape))
    rank = len(out.shape)
    src_strides = [0 if d == axis else x_strides[d] for d in range(rank)]
    axis_strides = [1 if d == axis else 0 for d in range(rank)]
    shape, (y_s, x_s, j_s), lengths = collapse_extents(kb, tuple(out.shape), [y_strides, src_strides, axis_strides],
                                                       k.extents(out))
    in_length = k.extent(x, axis)
    last = None if isinstance(in_length, int) else kb.idx(kb.add(in_length, -1))
    e = Emit(kb, cd, 1)
    src, dst = k.inputs[0], k.outputs[0]
    b = kb.b

    def body(index, width, mask):
        j = kb.idx(kb.affine(list(zip(index, j_s))))
        x_base = kb.affine(list(zip(index, x_s)))
        first = kb.mul(j, taps)
        acc = kb.alloca(llvm_type(cd))
        b.store(e.c(0.0), acc)
        with kb.loop(first, kb.add(first, taps), name="tap") as at:
            row = kb.load(indices, np.int64, at)
            if last is not None:
                row = kb.imin(row, last)
            value = widen(b, kb.load(src, dtype, kb.add(x_base, kb.mul(row, x_strides[axis]))), dtype)
            b.store(e.fma(value, kb.load(weights, cd, at), b.load(acc)), acc)
        total = b.load(acc)
        if outside is not None:
            flag = b.icmp_signed("!=", kb.load(outside, np.int8, j), ir.Constant(ir.IntType(8), 0))
            total = e.select(flag, e.c(a["extrapolation_value"]), total)
        kb.store(narrow(b, total, dtype), dst, dtype, kb.affine(list(zip(index, y_s))))

    emit_loop_nest(kb, shape, 1, body, k.threads, lengths)


CPU.register("ResizeNearest", lower=lower_resize_nearest, dynamic=resize_dynamic)
CPU.register("ResampleAxis", lower=lower_resample_axis, dynamic=resize_dynamic)
