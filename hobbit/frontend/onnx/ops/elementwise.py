"""Converters for element-wise ONNX ops (arithmetic, activations, Cast, Where)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import ModelFormatError, ShapeError, Unsupported
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.types import onnx_dtype
from hobbit.graph.shapes import broadcast

_SAME_NAME = ["Add", "Sub", "Mul", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log",
              "Sqrt", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Softplus"]
# Ops whose kernels only exist for floating-point inputs (as their ONNX schemas say).
_FLOAT_ONLY = {"Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Softplus",
               "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
               "Round", "IsNaN", "IsInf"}


def _check_dtype(op: str, x) -> None:
    if op in _FLOAT_ONLY and not _is_float(x.dtype):
        raise Unsupported(f"{op} of a {np.dtype(x.dtype).name} tensor (only floating-point types are supported)")


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == ml_dtypes.bfloat16


def _direct(op: str):
    def convert(ctx, node, ins):
        _check_dtype(op, ins[0])
        return [ctx.emit1(op, ins)]
    return convert


for _op in _SAME_NAME:
    converter(_op, since=1)(_direct(_op))
for _op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan"):
    converter(_op, since=7)(_direct(_op))
for _op in ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sign", "IsNaN"):
    converter(_op, since=9)(_direct(_op))
converter("Round", since=11)(_direct("Round"))


@converter("IsInf", since=10)
def is_inf(ctx, node, ins):
    _check_dtype("IsInf", ins[0])
    a = ctx.attrs(node)
    return [ctx.emit1("IsInf", ins, {"detect_positive": int(a.get("detect_positive", 1)),
                                     "detect_negative": int(a.get("detect_negative", 1))})]


def _checked_divisor(ctx, node, divisor):
    """An integer divisor, refused when it holds 0: onnxruntime refuses such a run, where the
    kernels would give 0. A constant one is checked now; one computed at run time goes
    through NonzeroDivisor, whose status record turns a 0 into a RunError naming the node."""
    if _is_float(divisor.dtype):
        return divisor
    if divisor.const is None:
        return ctx.emit1("NonzeroDivisor", [divisor])
    if np.any(divisor.const == 0):
        raise ModelFormatError(f"node '{ctx.node_name}' ({node.op_type}): its constant divisor '{node.input[1]}' "
                               "holds 0, and integer division by zero is undefined")
    return divisor


@converter("Div", since=1)
def div(ctx, node, ins):
    return [ctx.emit1("Div", [ins[0], _checked_divisor(ctx, node, ins[1])])]


@converter("Mod", since=10)
def mod(ctx, node, ins):
    fmod = int(ctx.attrs(node).get("fmod", 0))
    if fmod not in (0, 1):
        raise Unsupported(f"fmod={fmod} (must be 0 or 1)")
    return [ctx.emit1("Mod", [ins[0], _checked_divisor(ctx, node, ins[1])], {"fmod": fmod})]


@converter("Pow", since=1)
def pow_(ctx, node, ins):
    """Pow(T, T1) -> T. Mixed dtypes meet in T, except an integer base with a float
    exponent, which (like onnxruntime's std::pow) computes in float64 and truncates."""
    x, y = ins
    if _is_float(x.dtype) or not _is_float(y.dtype):
        if y.dtype != x.dtype:
            y = ctx.emit1("Cast", [y], {"to": np.dtype(x.dtype).name})
        return [ctx.emit1("Pow", [x, y])]
    wide = [ctx.emit1("Cast", [v], {"to": "float64"}) if v.dtype != np.float64 else v for v in (x, y)]
    return [ctx.emit1("Cast", [ctx.emit1("Pow", wide)], {"to": np.dtype(x.dtype).name})]


def _with_attrs(op: str, names: dict[str, float]):
    def convert(ctx, node, ins):
        a = ctx.attrs(node)
        return [ctx.emit1(op, ins[:1], {k: float(a.get(k, default)) for k, default in names.items()})]
    return convert


converter("LeakyRelu", since=1)(_with_attrs("LeakyRelu", {"alpha": 0.01}))
converter("HardSigmoid", since=1)(_with_attrs("HardSigmoid", {"alpha": 0.2, "beta": 0.5}))
converter("Elu", since=1)(_with_attrs("Elu", {"alpha": 1.0}))
converter("HardSwish", since=14)(_direct("HardSwish"))


@converter("PRelu", since=7)
def prelu(ctx, node, ins):
    """x where x >= 0, slope * x below. From opset 7 `slope` broadcasts one way onto X
    (numpy rules, the result keeps X's shape): PyTorch exports [C, 1, 1] for NCHW, or [1].
    Opset 9 only adds integer types and 16 bfloat16 and a function body of the same
    computation, so this one converter serves 7 onwards. Opsets 1-6, from before ONNX had
    broadcasting rules, say only that a slope of size 1 is shared; PyTorch never wrote them
    (its exporters start at opset 7) and onnxruntime cannot check them, so they stay
    unsupported rather than guessed."""
    x, slope = ins
    if np.dtype(slope.dtype) != np.dtype(x.dtype):
        raise Unsupported(f"slope of dtype {np.dtype(slope.dtype).name} with input {np.dtype(x.dtype).name}")
    if broadcast(tuple(x.shape), tuple(slope.shape)) != tuple(x.shape):
        raise ShapeError(f"PRelu slope {tuple(slope.shape)} does not broadcast one way to the input {tuple(x.shape)}")
    dtype = x.dtype
    x, slope = widen_half(ctx, x), widen_half(ctx, slope)
    if slope.const is not None and slope.const.size == 1 and _is_float(x.dtype):
        # one shared slope (PyTorch's default nn.PReLU()) is LeakyRelu: one fused scalar expression
        y = ctx.emit1("LeakyRelu", [x], {"alpha": float(slope.const.reshape(-1)[0])})
    else:
        negative = ctx.emit1("Less", [x, ctx.const(0, x.dtype)])
        y = ctx.emit1("Where", [negative, ctx.emit1("Mul", [slope, x]), x])
    return [narrow(ctx, y, dtype)]


@converter("Gelu", since=20)
def gelu(ctx, node, ins):
    if ctx.attrs(node).get("approximate", "none") != "none":
        raise Unsupported("approximate='tanh' is not supported")
    return [ctx.emit1("Gelu", ins)]


@converter("Clip", since=1)
def clip_attrs(ctx, node, ins):
    a = ctx.attrs(node)
    low, high = _clip_range(ins[0].dtype)
    return [ctx.emit1("Clip", ins[:1], {"min": float(a.get("min", low)), "max": float(a.get("max", high))})]


@converter("Clip", since=11)
def clip_inputs(ctx, node, ins):
    """Constant bounds become Clip's attributes; bounds computed at run time become
    Max then Min (min > max then gives max, as ONNX says)."""
    x, lo, hi = (list(ins) + [None, None])[:3]
    if all(v is None or v.const is not None for v in (lo, hi)):
        low, high = _clip_range(x.dtype)
        bounds = {"min": lo.const.item() if lo is not None else low,
                  "max": hi.const.item() if hi is not None else high}
        return [ctx.emit1("Clip", [x], bounds)]
    if lo is not None:
        x = ctx.emit1("Max", [x, lo])
    if hi is not None:
        x = ctx.emit1("Min", [x, hi])
    return [x]


def _clip_range(dtype) -> tuple[float, float] | tuple[int, int]:
    """Clip's default bounds, the dtype's lowest and highest values (as ONNX says: so an
    infinity is clipped to the largest finite value, as onnxruntime does); integers stay
    Python ints so that 64-bit bounds are exact."""
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    if not _is_float(dtype):
        raise Unsupported(f"Clip of a {np.dtype(dtype).name} tensor")
    info = ml_dtypes.finfo(dtype)
    return float(info.min), float(info.max)


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
    return [_cast(ctx, ins[0], onnx_dtype(ctx.attrs(node)["to"], node.name))]


@converter("CastLike", since=15)
def cast_like(ctx, node, ins):
    return [_cast(ctx, ins[0], np.dtype(ins[1].dtype))]


def _cast(ctx, x, to: np.dtype):
    if x.dtype == to:
        return x
    return ctx.emit1("Cast", [x], {"to": np.dtype(to).name})


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
