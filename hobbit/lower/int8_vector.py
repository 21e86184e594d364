"""The vector steps every int8 kernel shares: the dot-product instruction and the
requantizing epilogue."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.lower.builder import KernelBuilder
from hobbit.plan.int8 import DotProduct

I8, I32 = ir.IntType(8), ir.IntType(32)
F32 = ir.FloatType()
U8 = np.dtype(np.uint8)


def requantize(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value) -> ir.Value:
    """clip(rint((acc + offset) * multiplier) + y_zero, lo, hi) as bytes, on vectors (the int8
    kernels' epilogue). The clamp happens in float32, so the conversion to int32 is in range."""
    b, lanes = kb.b, acc.type.count
    vf = ir.VectorType(F32, lanes)
    real = b.fmul(b.sitofp(b.add(acc, offset), vf), multiplier)
    q = b.fadd(kb.call_intrinsic(f"llvm.rint.v{lanes}f32", vf, [real]), ir.Constant(vf, [float(attrs["y_zero"])] * lanes))
    q = kb.call_intrinsic(f"llvm.maxnum.v{lanes}f32", vf, [q, ir.Constant(vf, [float(attrs["lo"])] * lanes)])
    q = kb.call_intrinsic(f"llvm.minnum.v{lanes}f32", vf, [q, ir.Constant(vf, [float(attrs["hi"])] * lanes)])
    return b.trunc(b.fptosi(q, ir.VectorType(I32, lanes)), ir.VectorType(I8, lanes))


def requantize_channel(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value,
                       channel: int | ir.Value) -> ir.Value:
    """requantize with one output channel's offset and multiplier for every lane."""
    lanes = acc.type.count
    return requantize(kb, attrs, acc, kb.splat(kb.load(offset, np.dtype(np.int32), channel), lanes),
                      kb.splat(kb.load(multiplier, np.dtype(np.float32), channel), lanes))


def dot_step(kb: KernelBuilder, dot: DotProduct, acc: ir.Value, activations: ir.Value, weights: ir.Value) -> ir.Value:
    """acc + the lane-wise dot products of `group` activations and weights."""
    if dot.name == "vpdpbusd":
        return kb.call_intrinsic(f"llvm.x86.avx512.vpdpbusd.{32 * dot.lanes}", acc.type, [acc, activations, weights])
    pairs = kb.call_intrinsic("llvm.x86.avx2.pmadd.wd", acc.type, [activations, weights])
    return kb.b.add(acc, pairs)
