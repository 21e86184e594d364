"""Element-wise ops: each is a numpy reference here plus a scalar expression that every
backend reads (hobbit/emit/scalar_ops.py). Each backend runs them all in one loop
emitter of its own, and they can be fused as epilogues."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from hobbit.errors import RunError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample
from hobbit.graph.shapes import broadcast


def _same_type(node: Node) -> list[TensorType]:
    return [node.inputs[0].type]


def _broadcast_type(node: Node) -> list[TensorType]:
    a, b = node.inputs
    return [TensorType(a.dtype, broadcast(a.shape, b.shape))]


def unary(name: str, ref: Callable[[np.ndarray, dict], np.ndarray], attrs: dict | None = None) -> None:
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [np.asarray(ref(ins[0], a)).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_same_type, reference=reference, kind="elementwise", attrs=attrs or {},
                      per_sample=per_sample.broadcasting))


def binary(name: str, ref: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    binary_with_attrs(name, lambda x, y, a: ref(x, y), {})


def binary_with_attrs(name: str, ref: Callable[[np.ndarray, np.ndarray, dict], np.ndarray], attrs: dict) -> None:
    """A broadcasting binary op whose result has the first operand's dtype."""
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [np.asarray(ref(ins[0], ins[1], a)).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_broadcast_type, reference=reference, kind="elementwise", attrs=attrs,
                      per_sample=per_sample.broadcasting))


def _bool_type(node: Node) -> list[TensorType]:
    return [TensorType(np.dtype(np.bool_), node.inputs[0].shape)]


def predicate(name: str, ref: Callable[[np.ndarray, dict], np.ndarray], attrs: dict | None = None) -> None:
    """A unary test with a bool result (IsNaN, IsInf)."""
    register_op(OpDef(name, infer=_bool_type, kind="elementwise",
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


def _np_clip(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if math.isfinite(lo):
        x = np.maximum(x, np.asarray(lo).astype(x.dtype))
    if math.isfinite(hi):
        x = np.minimum(x, np.asarray(hi).astype(x.dtype))
    return x


def _erf(x: np.ndarray) -> np.ndarray:
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


binary("Add", np.add)
binary("Sub", np.subtract)
binary("Mul", np.multiply)
binary("Div", _np_div)
binary("Max", np.maximum)
binary("Min", np.minimum)
binary("Pow", _np_pow)
binary_with_attrs("Mod", _np_mod, {"fmod": 0})


def _nonzero_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    if np.any(ins[0] == 0):
        raise RunError("integer division by zero: a divisor is 0")
    return [ins[0]]


register_op(OpDef(
    "NonzeroDivisor", infer=lambda n: [n.inputs[0].type], reference=_nonzero_reference, checks_data=True,
    per_sample=per_sample.broadcasting,
    doc="a copy of an integer Div's or Mod's divisor, checked at run time to hold no 0 (a RunError "
        "naming the node, as onnxruntime refuses such a run; the division itself gives 0 there)"))

unary("Relu", lambda x, a: np.maximum(x, 0))
unary("LeakyRelu", lambda x, a: np.where(x < 0, x * a["alpha"], x), {"alpha": 0.01})
unary("Clip", lambda x, a: _np_clip(x, a["min"], a["max"]), {"min": -np.inf, "max": np.inf})
unary("Sigmoid", lambda x, a: _sigmoid(x))
unary("HardSigmoid", lambda x, a: np.clip(x * a["alpha"] + a["beta"], 0, 1), {"alpha": 0.2, "beta": 0.5})
unary("HardSwish", lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1))
unary("Tanh", lambda x, a: np.tanh(x))
unary("Erf", lambda x, a: _erf(x))
unary("Exp", lambda x, a: np.exp(x))
unary("Log", lambda x, a: np.log(x))
unary("Sqrt", lambda x, a: np.sqrt(x))
unary("Neg", lambda x, a: -x)
unary("Abs", lambda x, a: np.abs(x))
unary("Reciprocal", lambda x, a: 1.0 / x)
unary("Floor", lambda x, a: np.floor(x))
unary("Ceil", lambda x, a: np.ceil(x))
unary("Softplus", lambda x, a: np.log1p(np.exp(x)))
unary("Elu", lambda x, a: np.where(x < 0, a["alpha"] * (np.exp(x) - 1), x), {"alpha": 1.0})
unary("Gelu", lambda x, a: 0.5 * x * (1 + _erf(x / np.sqrt(2))))

unary("Round", lambda x, a: np.round(x))
unary("Sign", lambda x, a: np.sign(x))
predicate("IsNaN", lambda x, a: np.isnan(x))
predicate("IsInf",
          lambda x, a: (np.isposinf(x) & bool(a["detect_positive"])) | (np.isneginf(x) & bool(a["detect_negative"])),
          {"detect_positive": 1, "detect_negative": 1})

# Trigonometric and hyperbolic functions.
for _name, _ref in (("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin), ("Acos", np.arccos),
                    ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh),
                    ("Acosh", np.arccosh), ("Atanh", np.arctanh)):
    unary(_name, lambda x, a, f=_ref: f(x))


def _cast_type(node: Node) -> list[TensorType]:
    return [TensorType(np.dtype(node.attrs["to"]), node.inputs[0].shape)]


def _cast_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    """numpy's astype, except float -> int, which saturates with NaN -> 0 as the kernels do
    (llvm.fpto[su]i.sat): a Cast folded at compile time gives what it gives at run time
    (T5's relative-position buckets cast log(0) = -inf before a Where drops it)."""
    x, to = np.asarray(ins[0]), np.dtype(a["to"])
    if x.dtype.kind != "f" or to.kind not in "iu":
        return [x.astype(to)]
    info = np.iinfo(to)
    inside = (x > info.min) & (x < info.max)  # float comparisons: int64's max rounds up to 2**63
    with np.errstate(invalid="ignore"):
        cast = np.where(inside, x, 0).astype(to)
    return [np.where(x >= info.max, info.max, np.where(x <= info.min, info.min, cast)).astype(to)]


register_op(OpDef(
    "Cast", infer=_cast_type, reference=_cast_reference,
    kind="elementwise", attrs={"to": "float32"}, per_sample=per_sample.broadcasting,
    doc="convert to dtype `to` (a numpy dtype name); float -> int saturates, NaN -> 0"))
