"""Converters for TensorFlow's element-wise arithmetic, comparisons, casts, matrix
products and reductions. TensorFlow broadcasts as numpy does, and so do hobbit's
element-wise ops, so binary ops map one to one."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.einsum import emit_einsum
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import axis, cast, const_int, const_ints

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
    """Floats: floor(x / y). Signed integers: hobbit's Div truncates, so a quotient with a
    nonzero remainder whose sign differs from the divisor's is one too high."""
    x, y = ins
    kind = np.dtype(x.dtype).kind
    if kind == "f":
        return [ctx.emit1("Floor", [ctx.emit1("Div", [x, y])])]
    if kind == "u":
        return [ctx.emit1("Div", [x, y])]
    if kind != "i":
        raise Unsupported(f"FloorDiv of {np.dtype(x.dtype).name} tensors")
    quotient = ctx.emit1("Div", [x, y])
    remainder = ctx.emit1("Mod", [x, y], {"fmod": 1})
    zero = ctx.const(0, x.dtype)
    inexact = ctx.emit1("Not", [ctx.emit1("Equal", [remainder, zero])])
    signs_differ = ctx.emit1("Xor", [ctx.emit1("Less", [remainder, zero]), ctx.emit1("Less", [y, zero])])
    lowered = ctx.emit1("Sub", [quotient, ctx.const(1, x.dtype)])
    return [ctx.emit1("Where", [ctx.emit1("And", [inexact, signs_differ]), lowered, quotient])]


@tf_converter("Atan2")
def atan2(ctx, node, ins):
    """atan(y / x), plus pi with y's sign where x's sign bit is set, as C's atan2 (which
    TensorFlow computes) does for every input: the quotient is replaced where it is
    0/0 (by y, so the result is +-0 or +-pi) and inf/inf (by +-1, giving the odd
    multiples of pi/4). Sign bits, not comparisons, decide, so -0 counts as negative."""
    y, x = ins
    bits = _SIGN_BITS.get(np.dtype(x.dtype))
    if bits is None:
        raise Unsupported(f"Atan2 of {np.dtype(x.dtype).name} tensors")
    zero, one = ctx.const(0, x.dtype), ctx.const(1, x.dtype)
    both_zero = ctx.emit1("And", [ctx.emit1("Equal", [y, zero]), ctx.emit1("Equal", [x, zero])])
    both_infinite = ctx.emit1("And", [ctx.emit1("IsInf", [y]), ctx.emit1("IsInf", [x])])
    unit_y = _with_sign_of(ctx, one, y, bits)
    unit_ratio = ctx.emit1("Mul", [unit_y, _with_sign_of(ctx, one, x, bits)])
    ratio = ctx.emit1("Where", [both_zero, y, ctx.emit1("Div", [y, x])])
    ratio = ctx.emit1("Where", [both_infinite, unit_ratio, ratio])
    angle = ctx.emit1("Atan", [ratio])
    half_turn = ctx.emit1("Mul", [unit_y, ctx.const(np.pi, x.dtype)])
    turned = ctx.emit1("Add", [angle, half_turn])
    return [ctx.emit1("Where", [_sign_bit(ctx, x, bits), turned, angle])]


_SIGN_BITS = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64)}


def _sign_bit(ctx, x, bits: np.dtype):
    """Whether x's sign bit is set (true for -0 and negative NaNs too)."""
    return ctx.emit1("Less", [ctx.emit1("BitCast", [x], {"to": bits.name}), ctx.const(0, bits)])


def _with_sign_of(ctx, magnitude, x, bits: np.dtype):
    """+magnitude or -magnitude, as x's sign bit says (C's copysign)."""
    return ctx.emit1("Where", [_sign_bit(ctx, x, bits), ctx.emit1("Neg", [magnitude]), magnitude])


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
    return [emit_einsum(ctx, node.attrs["equation"], ins)]


_REDUCTIONS = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


@tf_converter(*_REDUCTIONS)
def reduce(ctx, node, ins):
    """An empty axis list reduces nothing (hobbit's empty `axes` would mean all of them)."""
    x, attrs = ins[0], _reduction_attrs(ctx, node, ins)
    return [x] if not attrs["axes"] else [ctx.emit1(_REDUCTIONS[node.op], [x], attrs)]


def _reduction_attrs(ctx, node, ins) -> dict:
    """A TF reduction's constant axes (sorted, deduplicated, made positive) and keep_dims as
    hobbit's Reduce* attributes."""
    x, axes_value = ins
    rank = len(x.shape)
    axes = sorted({axis(a, rank, "reduction axis") for a in const_ints(ctx, axes_value, "reduction axes")})
    return {"axes": tuple(axes), "keepdims": 1 if node.attrs.get("keep_dims", False) else 0}


_LOGICAL_REDUCTIONS = {"All": "ReduceMin", "Any": "ReduceMax"}


@tf_converter(*_LOGICAL_REDUCTIONS)
def logical_reduce(ctx, node, ins):
    """All and Any as the min and max of the bools read as 0/1 bytes (hobbit's reductions
    are numeric); an empty dim gives min 255 (true) and max 0 (false), as TF's do."""
    x, attrs = ins[0], _reduction_attrs(ctx, node, ins)
    if not attrs["axes"]:
        return [x]
    reduced = ctx.emit1(_LOGICAL_REDUCTIONS[node.op], [cast(ctx, x, np.uint8)], attrs)
    return [cast(ctx, reduced, np.bool_)]


@tf_converter("Cumsum")
def cumsum(ctx, node, ins):
    x, axis_value = ins
    dim = axis(const_int(ctx, axis_value, "Cumsum axis"), len(x.shape), "Cumsum axis")
    return [ctx.emit1("CumSum", [x], {"axis": dim, "exclusive": int(bool(node.attrs.get("exclusive", False))),
                                      "reverse": int(bool(node.attrs.get("reverse", False)))})]


@tf_converter("ArgMax", "ArgMin")
def arg_reduce(ctx, node, ins):
    x, axis_value = ins
    (index,) = const_ints(ctx, axis_value, "ArgMax axis")
    y = ctx.emit1(node.op, [x], {"axis": axis(index, len(x.shape)), "keepdims": 0})
    return [cast(ctx, y, node.attrs.get("output_type", np.int64))]
