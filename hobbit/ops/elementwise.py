"""Element-wise ops: each is a scalar expression (hobbit.lower.scalar) plus a
numpy reference. All share one loop emitter and can be fused as epilogues."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hobbit.graph.ir import Node, TensorType
from hobbit.graph.registry import OpDef, register_op
from hobbit.graph.shapes import broadcast
from hobbit.lower.elementwise import emit_elementwise
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.scalar import Emit


def lower_elementwise(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    width = k.width(max((v.dtype for v in k.node.inputs + [out]), key=lambda d: np.dtype(d).itemsize))
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
        return [np.asarray(ref(ins[0], a)).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_same_type, reference=reference, lower=lower_elementwise,
                      kind="elementwise", scalar=lambda e, args, a: expr(e, args[0], a), attrs=attrs or {}))


def binary(name: str, expr: Callable[[Emit, Any, Any], Any],
           ref: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        return [np.asarray(ref(ins[0], ins[1])).astype(ins[0].dtype)]

    register_op(OpDef(name, infer=_broadcast_type, reference=reference, lower=lower_elementwise,
                      kind="elementwise", scalar=lambda e, args, a: expr(e, args[0], args[1])))


def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.trunc(a / b).astype(a.dtype)
    return a / b


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x: np.ndarray) -> np.ndarray:
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


binary("Add", lambda e, a, b: e.add(a, b), np.add)
binary("Sub", lambda e, a, b: e.sub(a, b), np.subtract)
binary("Mul", lambda e, a, b: e.mul(a, b), np.multiply)
binary("Div", lambda e, a, b: e.div(a, b), _np_div)
binary("Max", lambda e, a, b: e.max(a, b), np.maximum)
binary("Min", lambda e, a, b: e.min(a, b), np.minimum)
binary("Pow", lambda e, a, b: e.pow(a, b), np.power)

unary("Relu", lambda e, x, a: e.max(x, e.c(0)), lambda x, a: np.maximum(x, 0))
unary("LeakyRelu", lambda e, x, a: e.select(e.lt(x, e.c(0)), e.mul(x, e.c(a["alpha"])), x),
      lambda x, a: np.where(x < 0, x * a["alpha"], x), {"alpha": 0.01})
unary("Clip", lambda e, x, a: e.clamp(x, a["min"], a["max"]),
      lambda x, a: np.clip(x, a["min"], a["max"]), {"min": -np.inf, "max": np.inf})
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


def _cast_type(node: Node) -> list[TensorType]:
    return [TensorType(np.dtype(node.attrs["to"]), node.inputs[0].shape)]


register_op(OpDef(
    "Cast", infer=_cast_type, reference=lambda ins, a: [np.asarray(ins[0]).astype(a["to"])],
    lower=lower_elementwise, kind="elementwise", scalar=lambda e, args, a: e.convert(args[0], a["to"]),
    attrs={"to": "float32"},
    doc="convert to dtype `to` (a numpy dtype name); float -> int saturates, NaN -> 0"))
