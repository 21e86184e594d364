"""Converters for TensorFlow's element-wise arithmetic, comparisons, casts, matrix
products and reductions. TensorFlow broadcasts as numpy does, and so do hobbit's
element-wise ops, so binary ops map one to one."""

from __future__ import annotations

import numpy as np
import onnx

from hobbit.frontend.onnx_ops.einsum import einsum as onnx_einsum
from hobbit.frontend.onnx_types import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import axis, cast, const_ints

_BINARY = {"Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div", "Div": "Div",
           "Maximum": "Max", "Minimum": "Min", "Pow": "Pow", "Greater": "Greater", "GreaterEqual": "GreaterOrEqual",
           "Less": "Less", "LessEqual": "LessOrEqual", "Equal": "Equal", "LogicalAnd": "And", "LogicalOr": "Or"}

_UNARY = {"Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log", "Abs": "Abs", "Neg": "Neg", "Floor": "Floor", "Ceil": "Ceil",
          "Round": "Round", "Reciprocal": "Reciprocal", "Inv": "Reciprocal", "Sign": "Sign", "Sin": "Sin",
          "Cos": "Cos", "LogicalNot": "Not"}


@tf_converter(*_BINARY)
def binary(ctx, node, ins):
    return [ctx.emit1(_BINARY[node.op], [ins[0], ins[1]])]


@tf_converter(*_UNARY)
def unary(ctx, node, ins):
    return [ctx.emit1(_UNARY[node.op], [ins[0]])]


@tf_converter("NotEqual")
def not_equal(ctx, node, ins):
    return [ctx.emit1("Not", [ctx.emit1("Equal", [ins[0], ins[1]])])]


@tf_converter("SquaredDifference")
def squared_difference(ctx, node, ins):
    d = ctx.emit1("Sub", [ins[0], ins[1]])
    return [ctx.emit1("Mul", [d, d])]


@tf_converter("Square")
def square(ctx, node, ins):
    return [ctx.emit1("Mul", [ins[0], ins[0]])]


@tf_converter("Rsqrt")
def rsqrt(ctx, node, ins):
    return [ctx.emit1("Reciprocal", [ctx.emit1("Sqrt", [ins[0]])])]


@tf_converter("Log1p")
def log1p(ctx, node, ins):
    x = ins[0]
    return [ctx.emit1("Log", [ctx.emit1("Add", [x, ctx.const(1, x.dtype)])])]


@tf_converter("FloorDiv")
def floor_div(ctx, node, ins):
    x, y = ins
    if np.dtype(x.dtype).kind != "f":
        raise Unsupported(f"FloorDiv of {np.dtype(x.dtype).name} tensors")
    return [ctx.emit1("Floor", [ctx.emit1("Div", [x, y])])]


@tf_converter("FloorMod")
def floor_mod(ctx, node, ins):
    """Integers: the result takes the divisor's sign (ONNX's Mod, fmod=0); floats: x - floor(x/y)*y."""
    x, y = ins
    if np.dtype(x.dtype).kind in "iu":
        return [ctx.emit1("Mod", [x, y], {"fmod": 0})]
    quotient = ctx.emit1("Floor", [ctx.emit1("Div", [x, y])])
    return [ctx.emit1("Sub", [x, ctx.emit1("Mul", [quotient, y])])]


@tf_converter("AddN")
def add_n(ctx, node, ins):
    total = ins[0]
    for x in ins[1:]:
        total = ctx.emit1("Add", [total, x])
    return [total]


@tf_converter("Cast")
def cast_op(ctx, node, ins):
    return [cast(ctx, ins[0], node.attrs["DstT"])]


@tf_converter("Select", "SelectV2")
def select(ctx, node, ins):
    """Select (v1) with a vector condition picks whole rows of higher-rank operands."""
    condition, x, y = ins
    if node.op == "Select" and len(condition.shape) == 1 and len(x.shape) > 1:
        condition = ctx.emit1("Reshape", [condition], {"shape": (condition.shape[0],) + (1,) * (len(x.shape) - 1)})
    return [ctx.emit1("Where", [condition, x, y])]


def _transpose_last_two(ctx, x):
    rank = len(x.shape)
    if rank < 2:
        raise Unsupported(f"a matrix product of the rank-{rank} tensor {x.type}")
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    return ctx.emit1("Transpose", [x], {"perm": perm})


@tf_converter("MatMul")
def matmul(ctx, node, ins):
    a, b = ins
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise Unsupported(f"MatMul of {a.type} and {b.type} (it takes matrices)")
    if node.attrs.get("transpose_a", False):
        a = _transpose_last_two(ctx, a)
    if node.attrs.get("transpose_b", False):
        b = _transpose_last_two(ctx, b)
    return [ctx.emit1("MatMul", [a, b])]


@tf_converter("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(ctx, node, ins):
    a, b = ins
    if node.attrs.get("adj_x", False):
        a = _transpose_last_two(ctx, a)
    if node.attrs.get("adj_y", False):
        b = _transpose_last_two(ctx, b)
    if np.dtype(a.dtype) != np.dtype(b.dtype):
        raise Unsupported(f"BatchMatMul of {a.type} and {b.type}")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise Unsupported(f"BatchMatMul of {a.type} and {b.type} (it takes matrices)")
    y = ctx.emit1("MatMul", [a, b])
    out_type = node.attrs.get("Tout")
    return [cast(ctx, y, out_type) if out_type is not None else y]


@tf_converter("Einsum")
def einsum(ctx, node, ins):
    """TensorFlow's equations are ONNX's (single-letter labels, '...', optional '->')."""
    equation = node.attrs["equation"]
    return onnx_einsum(ctx, _OnnxEquation(equation), ins)


class _OnnxEquation:
    """What the ONNX Einsum converter reads of its node: the equation attribute."""

    def __init__(self, equation: str):
        self.attribute = [onnx.helper.make_attribute("equation", equation)]


_REDUCTIONS = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


@tf_converter(*_REDUCTIONS)
def reduce(ctx, node, ins):
    """An empty axis list reduces nothing (hobbit's empty `axes` would mean all of them)."""
    x, axes_value = ins
    rank = len(x.shape)
    axes = sorted({axis(a, rank, "reduction axis") for a in const_ints(ctx, axes_value, "reduction axes")})
    if not axes:
        return [x]
    keep = 1 if node.attrs.get("keep_dims", False) else 0
    return [ctx.emit1(_REDUCTIONS[node.op], [x], {"axes": tuple(axes), "keepdims": keep})]


@tf_converter("ArgMax", "ArgMin")
def arg_reduce(ctx, node, ins):
    x, axis_value = ins
    (index,) = const_ints(ctx, axis_value, "ArgMax axis")
    y = ctx.emit1(node.op, [x], {"axis": axis(index, len(x.shape)), "keepdims": 0})
    return [cast(ctx, y, node.attrs.get("output_type", np.int64))]
