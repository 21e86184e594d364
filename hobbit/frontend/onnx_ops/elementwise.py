"""Converters for element-wise ONNX ops (arithmetic, activations, Cast, Where)."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.converters import converter
from hobbit.frontend.onnx import Unsupported, onnx_dtype

_SAME_NAME = ["Add", "Sub", "Mul", "Div", "Pow", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log",
              "Sqrt", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Softplus"]


def _direct(op: str):
    def convert(ctx, node, ins):
        return [ctx.emit1(op, ins)]
    return convert


for _op in _SAME_NAME:
    converter(_op, since=1)(_direct(_op))


def _with_attrs(op: str, names: dict[str, float]):
    def convert(ctx, node, ins):
        a = ctx.attrs(node)
        return [ctx.emit1(op, ins[:1], {k: float(a.get(k, default)) for k, default in names.items()})]
    return convert


converter("LeakyRelu", since=1)(_with_attrs("LeakyRelu", {"alpha": 0.01}))
converter("HardSigmoid", since=1)(_with_attrs("HardSigmoid", {"alpha": 0.2, "beta": 0.5}))
converter("Elu", since=1)(_with_attrs("Elu", {"alpha": 1.0}))
converter("HardSwish", since=14)(_direct("HardSwish"))


@converter("Gelu", since=20)
def gelu(ctx, node, ins):
    if ctx.attrs(node).get("approximate", "none") != "none":
        raise Unsupported("approximate='tanh' is not supported")
    return [ctx.emit1("Gelu", ins)]


@converter("Clip", since=1)
def clip_attrs(ctx, node, ins):
    a = ctx.attrs(node)
    return [ctx.emit1("Clip", ins[:1], {"min": float(a.get("min", -np.inf)), "max": float(a.get("max", np.inf))})]


@converter("Clip", since=11)
def clip_inputs(ctx, node, ins):
    bounds = {}
    for key, v, default in (("min", ins[1] if len(ins) > 1 else None, -np.inf),
                            ("max", ins[2] if len(ins) > 2 else None, np.inf)):
        bounds[key] = float(ctx.const_value(v, f"Clip {key}")) if v is not None else default
    return [ctx.emit1("Clip", ins[:1], bounds)]


def _variadic(op: str):
    """Sum/Max/Min/Mean of N inputs as a chain of binary ops."""
    def convert(ctx, node, ins):
        acc = ins[0]
        for other in ins[1:]:
            acc = ctx.emit1(op, [acc, other])
        return [acc]
    return convert


converter("Sum", since=1)(_variadic("Add"))
converter("Max", since=1)(_variadic("Max"))
converter("Min", since=1)(_variadic("Min"))


@converter("Mean", since=1)
def mean(ctx, node, ins):
    total = _variadic("Add")(ctx, node, ins)[0]
    return [ctx.emit1("Mul", [total, ctx.const(1.0 / len(ins), total.dtype)])]


@converter("Cast", since=1)
def cast(ctx, node, ins):
    to = onnx_dtype(ctx.attrs(node)["to"], node.name)
    if ins[0].dtype == to:
        return [ins[0]]
    return [ctx.emit1("Cast", ins, {"to": np.dtype(to).name})]


@converter("Identity", since=1)
def identity(ctx, node, ins):
    return [ins[0]]


@converter("Dropout", since=1)
def dropout(ctx, node, ins):
    """Inference: Dropout is the identity; the optional mask is all true."""
    outs = [ins[0]]
    if len(node.output) > 1 and node.output[1]:
        outs.append(ctx.const(np.ones(ins[0].shape, dtype=np.bool_)))
    return outs
