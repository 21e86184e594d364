"""16-bit floats: float16 and bfloat16 are stored in 16 bits and computed in float32.

Element-wise kernels widen each loaded value to its compute dtype and narrow the
result once, before the store, so an op rounds once (round to nearest even) as
onnxruntime's float32-based kernels do, and polynomial transcendentals keep
their float32 accuracy. llvmlite has no bfloat type, so bfloat16 lives in
memory as i16 and converts with bit operations: its bits are the top half of
a float32's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from llvmlite import ir

from hobbit.emit.builder import overload_suffix

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
_I16 = ir.IntType(16)
_I32 = ir.IntType(32)


def is_half(dtype: np.dtype) -> bool:
    """Whether `dtype` is a 16-bit float that is only stored, never computed in."""
    return np.dtype(dtype) in (FLOAT16, BFLOAT16)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic on `dtype` values runs in."""
    return FLOAT32 if is_half(dtype) else np.dtype(dtype)


def widen(b: ir.IRBuilder, value: ir.Value, stored: np.dtype) -> ir.Value:
    """A value loaded as `stored` in its compute dtype (exact)."""
    stored = np.dtype(stored)
    if stored == FLOAT16:
        return b.fpext(value, _like(value, ir.FloatType()))
    if stored == BFLOAT16:
        bits = b.shl(b.zext(value, _like(value, _I32)), _splat(value, _I32, 16))
        return b.bitcast(bits, _like(value, ir.FloatType()))
    return value


def narrow(b: ir.IRBuilder, value: ir.Value, stored: np.dtype) -> ir.Value:
    """A float32 or float64 value rounded to nearest even into `stored`; other dtypes pass.

    bfloat16 from float64 rounds through float32, as onnxruntime does."""
    stored = np.dtype(stored)
    if stored == FLOAT16:
        if _element(value.type) == ir.DoubleType():
            value = _to_float_round_to_odd(b, value)
        return b.fptrunc(value, _like(value, ir.HalfType()))
    if stored != BFLOAT16:
        return value
    if _element(value.type) == ir.DoubleType():
        value = b.fptrunc(value, _like(value, ir.FloatType()))
    bits = b.bitcast(value, _like(value, _I32))
    high = b.lshr(bits, _splat(value, _I32, 16))
    bias = b.add(b.and_(high, _splat(value, _I32, 1)), _splat(value, _I32, 0x7FFF))
    rounded = b.lshr(b.add(bits, bias), _splat(value, _I32, 16))
    quiet_nan = b.or_(high, _splat(value, _I32, 0x40))
    result = b.select(b.fcmp_unordered("uno", value, value), quiet_nan, rounded)
    return b.trunc(result, _like(value, _I16))


def _to_float_round_to_odd(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """float64 -> float32 rounding to odd: an inexact result gets the odd one of its two
    neighbours. A second rounding to float16 is then correct (float32 has more than
    float16's 11 + 2 bits), and LLVM needs no float64 -> half runtime call (which the
    JIT cannot resolve)."""
    t = b.fptrunc(value, _like(value, ir.FloatType()))
    inexact = b.fcmp_unordered("!=", b.fpext(t, value.type), value)
    bits = b.bitcast(t, _like(value, _I32))
    even = b.icmp_unsigned("==", b.and_(bits, _splat(value, _I32, 1)), _splat(value, _I32, 0))
    name = f"llvm.fabs.{overload_suffix(value.type)}"
    module = b.function.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(value.type, [value.type]), name=name)
    away = b.fcmp_ordered(">", b.call(fn, [b.fpext(t, value.type)]), b.call(fn, [value]))
    step = b.select(away, _splat(value, _I32, -1), _splat(value, _I32, 1))
    odd = b.add(bits, b.select(b.and_(inexact, even), step, _splat(value, _I32, 0)))
    return b.bitcast(odd, _like(value, ir.FloatType()))


def _element(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def _like(value: ir.Value, element: ir.Type) -> ir.Type:
    """`element`, as a vector when `value` is one."""
    if isinstance(value.type, ir.VectorType):
        return ir.VectorType(element, value.type.count)
    return element


def _splat(value: ir.Value, element: ir.Type, v: int) -> ir.Constant:
    ty = _like(value, element)
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(element, v)] * ty.count)
    return ir.Constant(ty, v)
