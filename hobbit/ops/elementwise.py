"""Element-wise ops: each is a scalar expression (hobbit.lower.scalar) plus a
numpy reference. All share one loop emitter and can be fused as epilogues."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hobbit.graph.ir import Node, TensorType
from hobbit.graph.registry import OpDef, register_op
from hobbit.graph import per_sample
from hobbit.graph.shapes import broadcast
from hobbit.lower.elementwise import emit_elementwise
from hobbit.lower.half import compute_dtype
from hobbit.lower.kernel import KernelArgs
from hobbit.lower import trig
from hobbit.lower.scalar import Emit


def lower_elementwise(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    width = k.width(max((compute_dtype(v.dtype) for v in k.node.inputs + [out]), key=lambda d: d.itemsize))
    # Below ~16K elements a parallel region costs more than it saves.
    team = k.threads if out.type.size >= 16384 else None
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], width, team)


def _same_type(node: Node) -> list[TensorType]:
    return [node.inputs[0].type]


def _broadcast_type(node: Node) -> list[TensorType]:
    a, b = node.inputs
    return [TensorType(a.dtype, broadcast(a.shape, b.shape))]


def unary(name: str, expr: Callable[[Emit, Any, dict], Any],
          ref: Callable[[np.ndarray, dict], np.ndarray], attrs: dict | None = None) -> None:
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [np.asarray(ref(ins[0], a)).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_same_type, reference=reference, lower=lower_elementwise,
                      kind="elementwise", scalar=lambda e, args, a: expr(e, args[0], a), attrs=attrs or {},
                      per_sample=per_sample.broadcasting))


def binary(name: str, expr: Callable[[Emit, Any, Any], Any],
           ref: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    binary_with_attrs(name, lambda e, x, y, a: expr(e, x, y), lambda x, y, a: ref(x, y), {})


def binary_with_attrs(name: str, expr: Callable[[Emit, Any, Any, dict], Any],
                      ref: Callable[[np.ndarray, np.ndarray, dict], np.ndarray], attrs: dict) -> None:
    """A broadcasting binary op whose result has the first operand's dtype."""
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [np.asarray(ref(ins[0], ins[1], a)).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_broadcast_type, reference=reference, lower=lower_elementwise,
                      kind="elementwise", scalar=lambda e, args, a: expr(e, args[0], args[1], a), attrs=attrs,
                      per_sample=per_sample.broadcasting))


def _bool_type(node: Node) -> list[TensorType]:
    return [TensorType(np.dtype(np.bool_), node.inputs[0].shape)]


def predicate(name: str, expr: Callable[[Emit, Any, dict], Any],
              ref: Callable[[np.ndarray, dict], np.ndarray], attrs: dict | None = None) -> None:
    """A unary test with a bool result (IsNaN, IsInf)."""
    register_op(OpDef(name, infer=_bool_type, lower=lower_elementwise, kind="elementwise",
                      scalar=lambda e, args, a: e.as_bool(expr(e, args[0], a)),
                      reference=lambda ins, a: [np.asarray(ref(ins[0], a), dtype=np.bool_)], attrs=attrs or {},
                      per_sample=per_sample.broadcasting))


def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.trunc(a / b).astype(a.dtype)
    return a / b


def _np_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's power, with C's answers for negative integer exponents instead of an error."""
    if a.dtype.kind not in "iu":
        return np.power(a, b)
    a, b = np.broadcast_arrays(a, b)
    raised = np.power(a, np.maximum(b, 0).astype(a.dtype))
    unit = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, unit, raised).astype(a.dtype)


def _np_mod(a: np.ndarray, b: np.ndarray, attrs: dict) -> np.ndarray:
    if attrs["fmod"]:
        return np.fmod(a, b)
    return np.mod(a, b)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _clip(e: Emit, x, lo: float, hi: float):
    """min(max(x, lo), hi); infinite bounds are no bounds (integers have no inf)."""
    if math.isfinite(lo):
        x = e.max(x, e.c(lo))
    if math.isfinite(hi):
        x = e.min(x, e.c(hi))
    return x


def _np_clip(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if math.isfinite(lo):
        x = np.maximum(x, np.asarray(lo).astype(x.dtype))
    if math.isfinite(hi):
        x = np.minimum(x, np.asarray(hi).astype(x.dtype))
    return x


def _erf(x: np.ndarray) -> np.ndarray:
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


binary("Add", lambda e, a, b: e.add(a, b), np.add)
binary("Sub", lambda e, a, b: e.sub(a, b), np.subtract)
binary("Mul", lambda e, a, b: e.mul(a, b), np.multiply)
binary("Div", lambda e, a, b: e.div(a, b), _np_div)
binary("Max", lambda e, a, b: e.max(a, b), np.maximum)
binary("Min", lambda e, a, b: e.min(a, b), np.minimum)
binary("Pow", lambda e, a, b: e.pow(a, b) if e.float else e.ipow(a, b), _np_pow)
binary_with_attrs("Mod", lambda e, a, b, at: e.mod(a, b, bool(at["fmod"])), _np_mod, {"fmod": 0})

unary("Relu", lambda e, x, a: e.max(x, e.c(0)), lambda x, a: np.maximum(x, 0))
unary("LeakyRelu", lambda e, x, a: e.select(e.lt(x, e.c(0)), e.mul(x, e.c(a["alpha"])), x),
      lambda x, a: np.where(x < 0, x * a["alpha"], x), {"alpha": 0.01})
unary("Clip", lambda e, x, a: _clip(e, x, a["min"], a["max"]), lambda x, a: _np_clip(x, a["min"], a["max"]),
      {"min": -np.inf, "max": np.inf})
unary("Sigmoid", lambda e, x, a: e.sigmoid(x), lambda x, a: _sigmoid(x))
unary("HardSigmoid", lambda e, x, a: e.clamp(e.fma(x, e.c(a["alpha"]), e.c(a["beta"])), 0.0, 1.0),
      lambda x, a: np.clip(x * a["alpha"] + a["beta"], 0, 1), {"alpha": 0.2, "beta": 0.5})
unary("HardSwish", lambda e, x, a: e.mul(x, e.clamp(e.fma(x, e.c(1 / 6), e.c(0.5)), 0.0, 1.0)),
      lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1))
unary("Tanh", lambda e, x, a: e.tanh(x), lambda x, a: np.tanh(x))
unary("Erf", lambda e, x, a: e.erf(x), lambda x, a: _erf(x))
unary("Exp", lambda e, x, a: e.exp(x), lambda x, a: np.exp(x))
unary("Log", lambda e, x, a: e.log(x), lambda x, a: np.log(x))
unary("Sqrt", lambda e, x, a: e.sqrt(x), lambda x, a: np.sqrt(x))
unary("Neg", lambda e, x, a: e.neg(x), lambda x, a: -x)
unary("Abs", lambda e, x, a: e.abs(x), lambda x, a: np.abs(x))
unary("Reciprocal", lambda e, x, a: e.div(e.c(1.0), x), lambda x, a: 1.0 / x)
unary("Floor", lambda e, x, a: e.floor(x), lambda x, a: np.floor(x))
unary("Ceil", lambda e, x, a: e.ceil(x), lambda x, a: np.ceil(x))
unary("Softplus", lambda e, x, a: e.log(e.add(e.exp(x), e.c(1.0))), lambda x, a: np.log1p(np.exp(x)))
unary("Elu", lambda e, x, a: e.select(e.lt(x, e.c(0)), e.mul(e.c(a["alpha"]), e.sub(e.exp(x), e.c(1.0))), x),
      lambda x, a: np.where(x < 0, a["alpha"] * (np.exp(x) - 1), x), {"alpha": 1.0})
unary("Gelu", lambda e, x, a: e.mul(e.mul(x, e.c(0.5)), e.add(e.c(1.0), e.erf(e.mul(x, e.c(2 ** -0.5))))),
      lambda x, a: 0.5 * x * (1 + _erf(x / np.sqrt(2))))

unary("Round", lambda e, x, a: e.round_even(x), lambda x, a: np.round(x))
unary("Sign", lambda e, x, a: e.sign(x), lambda x, a: np.sign(x))
predicate("IsNaN", lambda e, x, a: e.is_nan(x), lambda x, a: np.isnan(x))
predicate("IsInf", lambda e, x, a: e.is_inf(x, bool(a["detect_positive"]), bool(a["detect_negative"])),
          lambda x, a: (np.isposinf(x) & bool(a["detect_positive"])) | (np.isneginf(x) & bool(a["detect_negative"])),
          {"detect_positive": 1, "detect_negative": 1})

# Trigonometric and hyperbolic functions (hobbit.lower.trig).
for _name, _emit, _ref in (("Sin", trig.sin, np.sin), ("Cos", trig.cos, np.cos), ("Tan", trig.tan, np.tan),
                           ("Asin", trig.asin, np.arcsin), ("Acos", trig.acos, np.arccos),
                           ("Atan", trig.atan, np.arctan), ("Sinh", trig.sinh, np.sinh),
                           ("Cosh", trig.cosh, np.cosh), ("Asinh", trig.asinh, np.arcsinh),
                           ("Acosh", trig.acosh, np.arccosh), ("Atanh", trig.atanh, np.arctanh)):
    unary(_name, lambda e, x, a, f=_emit: f(e, x), lambda x, a, f=_ref: f(x))


def _cast_type(node: Node) -> list[TensorType]:
    return [TensorType(np.dtype(node.attrs["to"]), node.inputs[0].shape)]


register_op(OpDef(
    "Cast", infer=_cast_type, reference=lambda ins, a: [np.asarray(ins[0]).astype(a["to"])],
    lower=lower_elementwise, kind="elementwise", scalar=lambda e, args, a: e.convert(args[0], a["to"]),
    attrs={"to": "float32"}, per_sample=per_sample.broadcasting,
    doc="convert to dtype `to` (a numpy dtype name); float -> int saturates, NaN -> 0"))
