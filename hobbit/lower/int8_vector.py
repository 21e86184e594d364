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


def requantize(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value,
               residual: ir.Value | None = None) -> ir.Value:
    """clip(rint((acc + offset) * multiplier) + y_zero, lo, hi) as bytes, on vectors (the int8
    kernels' epilogue); with a residual (bytes), that plus the residual as QAdd computes it
    (QConv's sum_* attributes). Clamps happen in float32, so the conversion to int32 is in range."""
    b, lanes = kb.b, acc.type.count
    vf = ir.VectorType(F32, lanes)
    real = b.fmul(b.sitofp(b.add(acc, offset), vf), multiplier)
    q = _clamped(kb, b.fadd(_rint(kb, real), _splat(vf, attrs["y_zero"])), attrs["lo"], attrs["hi"])
    if residual is not None:
        q = _add_residual(kb, attrs, q, residual)
    return b.trunc(b.fptosi(q, ir.VectorType(I32, lanes)), ir.VectorType(I8, lanes))


def _add_residual(kb: KernelBuilder, attrs: dict, q: ir.Value, residual: ir.Value) -> ir.Value:
    """QAdd of q (integral float32) and the residual bytes, in the order of its scalar
    expression (hobbit/lower/scalar_ops.py), so the fused result is bit-identical."""
    b, lanes = kb.b, q.type.count
    vf, vi = q.type, ir.VectorType(I32, lanes)
    signed = np.dtype(attrs["to"]).kind == "i"
    r = b.sext(residual, vi) if signed else b.zext(residual, vi)
    own = b.fmul(b.fsub(q, _splat(vf, attrs["sum_a_zero"])), _splat(vf, attrs["sum_a_scale"]))
    other = b.fmul(b.sitofp(b.sub(r, ir.Constant(vi, [int(attrs["sum_b_zero"])] * lanes)), vf),
                   _splat(vf, attrs["sum_b_scale"]))
    total = b.fdiv(b.fadd(own, other), _splat(vf, attrs["sum_y_scale"]))
    return _clamped(kb, b.fadd(_rint(kb, total), _splat(vf, attrs["sum_y_zero"])), attrs["sum_lo"], attrs["sum_hi"])


def _splat(vf: ir.VectorType, value: float) -> ir.Constant:
    return ir.Constant(vf, [float(np.float32(value))] * vf.count)


def _rint(kb: KernelBuilder, x: ir.Value) -> ir.Value:
    return kb.call_intrinsic(f"llvm.rint.v{x.type.count}f32", x.type, [x])


def _clamped(kb: KernelBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    n = x.type.count
    x = kb.call_intrinsic(f"llvm.maxnum.v{n}f32", x.type, [x, _splat(x.type, lo)])
    return kb.call_intrinsic(f"llvm.minnum.v{n}f32", x.type, [x, _splat(x.type, hi)])


def requantize_channel(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value,
                       channel: int | ir.Value, residual: ir.Value | None = None) -> ir.Value:
    """requantize with one output channel's offset and multiplier for every lane."""
    lanes = acc.type.count
    return requantize(kb, attrs, acc, kb.splat(kb.load(offset, np.dtype(np.int32), channel), lanes),
                      kb.splat(kb.load(multiplier, np.dtype(np.float32), channel), lanes), residual)


def dot_step(kb: KernelBuilder, dot: DotProduct, acc: ir.Value, activations: ir.Value, weights: ir.Value) -> ir.Value:
    """acc + the lane-wise dot products of `group` activations and weights."""
    if dot.name == "vpdpbusd":
        return kb.call_intrinsic(f"llvm.x86.avx512.vpdpbusd.{32 * dot.lanes}", acc.type, [acc, activations, weights])
    pairs = kb.call_intrinsic("llvm.x86.avx2.pmadd.wd", acc.type, [activations, weights])
    return kb.b.add(acc, pairs)
