"""Kernels for compile-time resampling tables (ResizeNearest, ResampleAxis).

The tables become private constant arrays in the module. ResampleAxis views
its input as [outer, n_in, inner] and its output as [outer, n_out, inner];
each output row (o, j) is the weighted sum of the input rows its taps name,
walked along the contiguous inner dim so LLVM can vectorise it. float16 is
loaded into float32, summed there and rounded once at the store."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder, llvm_type
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
    emit_table_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, offsets)


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


CPU.register("ResizeNearest", lower=lower_resize_nearest)
CPU.register("ResampleAxis", lower=lower_resample_axis)
