"""The scalar expression of each element-wise kernel: one table every backend reads.

SCALARS maps an element-wise kernel's name (OpDef.kernel of the ops in
hobbit/ops/elementwise.py, bitwise.py, quantize.py and the comparisons, logic, Where and
Copy of tensor.py) to scalar(emit, args, attrs) -> value. The expression is the same
arithmetic on every device and at every vector width: the CPU's loop emitter
(hobbit/backend/cpu/elementwise.py) and the GPU's (hobbit/backend/gpu/elementwise.py)
register each one in their tables around their own loops, and fused epilogues
(hobbit.emit.epilogue) apply them after any producer."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from hobbit.emit import trig
from hobbit.emit.builder import llvm_type
from hobbit.emit.scalar import Emit

_WIDE = np.dtype(np.int64)

Scalar = Callable[[Emit, list, dict], Any]
SCALARS: dict[str, Scalar] = {}


def _register(name: str, scalar: Scalar) -> None:
    if name in SCALARS:
        raise ValueError(f"scalar expression {name!r} registered twice")
    SCALARS[name] = scalar


def _unary(name: str, expr: Callable[[Emit, Any, dict], Any]) -> None:
    _register(name, lambda e, args, a: expr(e, args[0], a))


def _binary(name: str, expr: Callable[[Emit, Any, Any], Any]) -> None:
    _binary_with_attrs(name, lambda e, x, y, a: expr(e, x, y))


def _binary_with_attrs(name: str, expr: Callable[[Emit, Any, Any, dict], Any]) -> None:
    _register(name, lambda e, args, a: expr(e, args[0], args[1], a))


def _predicate(name: str, expr: Callable[[Emit, Any, dict], Any]) -> None:
    """A unary test with a bool result (IsNaN, IsInf)."""
    _register(name, lambda e, args, a: e.as_bool(expr(e, args[0], a)))


def _clip(e: Emit, x, lo: float, hi: float):
    """min(max(x, lo), hi); infinite bounds are no bounds (integers have no inf)."""
    if math.isfinite(lo):
        x = e.max(x, e.c(lo))
    if math.isfinite(hi):
        x = e.min(x, e.c(hi))
    return x


_binary("Add", lambda e, a, b: e.add(a, b))
_binary("Sub", lambda e, a, b: e.sub(a, b))
_binary("Mul", lambda e, a, b: e.mul(a, b))
_binary("Div", lambda e, a, b: e.div(a, b))
_binary("Max", lambda e, a, b: e.max(a, b))
_binary("Min", lambda e, a, b: e.min(a, b))
_binary("Pow", lambda e, a, b: e.pow(a, b) if e.float else e.ipow(a, b))
_binary_with_attrs("Mod", lambda e, a, b, at: e.mod(a, b, bool(at["fmod"])))

_unary("Relu", lambda e, x, a: e.max(x, e.c(0)))
_unary("LeakyRelu", lambda e, x, a: e.select(e.lt(x, e.c(0)), e.mul(x, e.c(a["alpha"])), x))
_unary("Clip", lambda e, x, a: _clip(e, x, a["min"], a["max"]))
_unary("Sigmoid", lambda e, x, a: e.sigmoid(x))
_unary("HardSigmoid", lambda e, x, a: e.clamp(e.fma(x, e.c(a["alpha"]), e.c(a["beta"])), 0.0, 1.0))
_unary("HardSwish", lambda e, x, a: e.mul(x, e.clamp(e.fma(x, e.c(1 / 6), e.c(0.5)), 0.0, 1.0)))
_unary("Tanh", lambda e, x, a: e.tanh(x))
_unary("Erf", lambda e, x, a: e.erf(x))
_unary("Exp", lambda e, x, a: e.exp(x))
_unary("Log", lambda e, x, a: e.log(x))
_unary("Sqrt", lambda e, x, a: e.sqrt(x))
_unary("Neg", lambda e, x, a: e.neg(x))
_unary("Abs", lambda e, x, a: e.abs(x))
_unary("Reciprocal", lambda e, x, a: e.div(e.c(1.0), x))
_unary("Floor", lambda e, x, a: e.floor(x))
_unary("Ceil", lambda e, x, a: e.ceil(x))
_unary("Softplus", lambda e, x, a: e.log(e.add(e.exp(x), e.c(1.0))))
_unary("Elu", lambda e, x, a: e.select(e.lt(x, e.c(0)), e.mul(e.c(a["alpha"]), e.sub(e.exp(x), e.c(1.0))), x))
_unary("Gelu", lambda e, x, a: e.mul(e.mul(x, e.c(0.5)), e.add(e.c(1.0), e.erf(e.mul(x, e.c(2 ** -0.5))))))

_unary("Round", lambda e, x, a: e.round_even(x))
_unary("Sign", lambda e, x, a: e.sign(x))
_predicate("IsNaN", lambda e, x, a: e.is_nan(x))
_predicate("IsInf", lambda e, x, a: e.is_inf(x, bool(a["detect_positive"]), bool(a["detect_negative"])))

# Trigonometric and hyperbolic functions (hobbit.emit.trig).
for _name, _emit in (("Sin", trig.sin), ("Cos", trig.cos), ("Tan", trig.tan), ("Asin", trig.asin),
                     ("Acos", trig.acos), ("Atan", trig.atan), ("Sinh", trig.sinh), ("Cosh", trig.cosh),
                     ("Asinh", trig.asinh), ("Acosh", trig.acosh), ("Atanh", trig.atanh)):
    _unary(_name, lambda e, x, a, f=_emit: f(e, x))

_register("Cast", lambda e, args, a: e.convert(args[0], a["to"]))

# -- Bitwise ops on integer tensors ---------------------------------------------------

_binary_with_attrs("BitShift", lambda e, x, y, a: e.shift(x, y, bool(a["left"])))
_binary("BitwiseAnd", lambda e, x, y: e.b.and_(x, y))
_binary("BitwiseOr", lambda e, x, y: e.b.or_(x, y))
_binary("BitwiseXor", lambda e, x, y: e.b.xor(x, y))
_unary("BitwiseNot", lambda e, x, a: e.b.not_(x))


# -- Linear (de)quantization -------------------------------------------------------------

def _quantize_scalar(e: Emit, args: list, a: dict):
    x, scale, zero = args
    to = np.dtype(a["to"])
    zero_f = Emit(e.kb, to, e.width).convert(zero, e.dtype)
    q = e.add(e.round_even(e.div(x, scale)), zero_f)
    return e.convert(q, to)  # saturating float -> int, NaN -> 0


def _dequantize_scalar(e: Emit, args: list, a: dict):
    x, scale, zero = args
    wide = Emit(e.kb, _WIDE, e.width)
    difference = wide.sub(e.convert(x, _WIDE), e.convert(zero, _WIDE))
    to = np.dtype(a["to"])
    return Emit(e.kb, to, e.width).mul(wide.convert(difference, to), scale)


def _qadd_scalar(e: Emit, args: list, a: dict):
    """QAdd (hobbit/ops/qlinear.py) in float32, as its DequantizeLinear -> Add -> QuantizeLinear
    chain computes it."""
    f = Emit(e.kb, np.dtype(np.float32), e.width)
    wide = Emit(e.kb, np.dtype(np.int32), e.width)

    def real(x, zero, scale):
        return f.mul(wide.convert(wide.sub(e.convert(x, np.int32), wide.c(zero)), np.float32), f.c(scale))

    total = f.add(real(args[0], a["a_zero"], a["a_scale"]), real(args[1], a["b_zero"], a["b_scale"]))
    q = f.add(f.round_even(f.div(total, f.c(a["y_scale"]))), f.c(a["y_zero"]))
    return f.convert(f.clamp(q, a["lo"], a["hi"]), np.dtype(a["to"]))


def _qrequantize_scalar(e: Emit, args: list, a: dict):
    """QRequantize: a quantized tensor moved to another scale and zero point, the part of a
    quantized Concat (hobbit/passes/int8.py) whose input's parameters differ from the output's.

    It runs as an element-wise kernel, bytes in and bytes out, and writes straight into its
    slice of the Concat when the Concat is in place (hobbit/passes/concat.py), or in the
    epilogue of the QConv that produces its input. The arithmetic is the DequantizeLinear ->
    QuantizeLinear pair's in float32, (x - x_zero) * x_scale, divided by y_scale, rounded
    half to even, plus y_zero, clamped: onnxruntime's QLinearConcat looks the result up in a
    table it builds with those same operations, so the two agree bit for bit. Where the int8
    pass found that one multiplier x_scale / y_scale gives the same result for every input
    byte (`multiplier`; not always: it can move a value within an ulp of a rounding tie), the
    divide, the slow part (vdivps), becomes a multiply."""
    f = Emit(e.kb, np.dtype(np.float32), e.width)
    wide = Emit(e.kb, np.dtype(np.int32), e.width)
    centred = wide.convert(wide.sub(e.convert(args[0], np.int32), wide.c(a["x_zero"])), np.float32)
    if a["multiplier"]:
        scaled = f.mul(centred, f.c(a["multiplier"]))
    else:
        scaled = f.div(f.mul(centred, f.c(a["x_scale"])), f.c(a["y_scale"]))
    q = f.add(f.round_even(scaled), f.c(a["y_zero"]))
    return f.convert(f.clamp(q, a["lo"], a["hi"]), np.dtype(a["to"]))


_register("QuantizeLinear", _quantize_scalar)
_register("QAdd", _qadd_scalar)
_register("DequantizeLinear", _dequantize_scalar)
_register("QRequantize", _qrequantize_scalar)


# -- Comparisons, logic and Where: element-wise with bool values --------------------

def _as_bool(e: Emit, flag: ir.Value) -> ir.Value:
    """An i1 (vector) result stored as a 0/1 byte, numpy's bool."""
    ty = llvm_type(np.dtype(np.bool_))
    return e.b.zext(flag, ir.VectorType(ty, e.width) if e.width > 1 else ty)


def _truth(e: Emit, v: ir.Value) -> ir.Value:
    return e.b.icmp_unsigned("!=", v, ir.Constant(v.type, None))


def _bool_binary(name: str, expr) -> None:
    _register(name, lambda e, args, a: _as_bool(e, expr(e, args[0], args[1])))


def _eq(e: Emit, a, b):
    return e.b.fcmp_ordered("==", a, b) if e.float else e.b.icmp_signed("==", a, b)


def _le(e: Emit, a, b):
    if e.float:
        return e.b.fcmp_ordered("<=", a, b)
    return e.b.icmp_signed("<=", a, b) if e.dtype.kind == "i" else e.b.icmp_unsigned("<=", a, b)


_bool_binary("Equal", _eq)
_bool_binary("Less", lambda e, a, b: e.lt(a, b))
_bool_binary("Greater", lambda e, a, b: e.gt(a, b))
_bool_binary("LessOrEqual", _le)
_bool_binary("GreaterOrEqual", lambda e, a, b: _le(e, b, a))
_bool_binary("And", lambda e, a, b: e.b.and_(_truth(e, a), _truth(e, b)))
_bool_binary("Or", lambda e, a, b: e.b.or_(_truth(e, a), _truth(e, b)))
_bool_binary("Xor", lambda e, a, b: e.b.xor(_truth(e, a), _truth(e, b)))
_register("Not", lambda e, args, a: _as_bool(e, e.b.not_(_truth(e, args[0]))))
_register("Where", lambda e, args, a: e.b.select(_truth(e, args[0]), args[1], args[2]))

# Copy (an explicit copy the frontends and legalize insert) is the identity; the CPU's
# kernel runs its loop on one thread (hobbit/backend/cpu/tensor.py).
_register("Copy", lambda e, args, a: args[0])
