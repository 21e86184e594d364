"""TFLite element-wise builtins as TensorFlow ops: arithmetic with its fused activation,
the builtins named like TensorFlow's, logical ops, the clipped and parametric ReLUs,
hard-swish, GELU, softmax with its beta, local response normalization, casts and the
dequantization of float16 constants."""

from __future__ import annotations

import math

import numpy as np

from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext
from hobbit.frontend.tflite.ops.common import activation, clip
from hobbit.frontend.tflite.ops.table import translates, unsupported


_ARITHMETIC = {"ADD": "AddV2", "SUB": "Sub", "MUL": "Mul", "DIV": "RealDiv"}


@translates(*_ARITHMETIC)
def arithmetic(c: OpContext) -> list[TensorRef]:
    y = c.node(_ARITHMETIC[c.op.builtin], [c.input(0), c.input(1)], T=c.dtype(0))
    return [activation(c, y, c.enum_option(S.ArithmeticOptions.ACTIVATION))]


_SAME_AS_TF = {
    "LOGISTIC": "Sigmoid", "TANH": "Tanh", "RELU": "Relu", "RELU6": "Relu6", "ELU": "Elu",
    "RSQRT": "Rsqrt", "SQRT": "Sqrt", "SQUARE": "Square", "EXP": "Exp", "LOG": "Log",
    "ABS": "Abs", "NEG": "Neg", "FLOOR": "Floor", "CEIL": "Ceil", "ROUND": "Round",
    "SIN": "Sin", "COS": "Cos", "SIGN": "Sign", "LOG_SOFTMAX": "LogSoftmax",
    "ZEROS_LIKE": "ZerosLike", "SQUARED_DIFFERENCE": "SquaredDifference", "POW": "Pow",
    "MAXIMUM": "Maximum", "MINIMUM": "Minimum", "FLOOR_DIV": "FloorDiv",
    "FLOOR_MOD": "FloorMod", "LESS": "Less", "LESS_EQUAL": "LessEqual",
    "GREATER": "Greater", "GREATER_EQUAL": "GreaterEqual", "EQUAL": "Equal",
    "NOT_EQUAL": "NotEqual", "ATAN2": "Atan2",
}


@translates(*_SAME_AS_TF)
def same_as_tf(c: OpContext) -> list[TensorRef]:
    """Builtins whose operands and meaning are TF's op's, attribute T aside."""
    return [c.node(_SAME_AS_TF[c.op.builtin], c.inputs(), T=c.dtype(0))]


_LOGICAL = {"LOGICAL_AND": "LogicalAnd", "LOGICAL_OR": "LogicalOr", "LOGICAL_NOT": "LogicalNot"}


@translates(*_LOGICAL)
def logical(c: OpContext) -> list[TensorRef]:
    return [c.node(_LOGICAL[c.op.builtin], c.inputs())]


@translates("SELECT", "SELECT_V2")
def select(c: OpContext) -> list[TensorRef]:
    op = "SelectV2" if c.op.builtin == "SELECT_V2" else "Select"
    return [c.node(op, c.inputs(), T=c.dtype(1))]


@translates("ADD_N")
def add_n(c: OpContext) -> list[TensorRef]:
    return [c.node("AddN", c.inputs(), N=len(c.op.inputs), T=c.dtype(0))]


@translates("RELU_N1_TO_1")
def relu_n1_to_1(c: OpContext) -> list[TensorRef]:
    return [clip(c, c.input(0), -1.0, 1.0)]


@translates("RELU_0_TO_1")
def relu_0_to_1(c: OpContext) -> list[TensorRef]:
    return [clip(c, c.input(0), 0.0, 1.0)]


@translates("LEAKY_RELU")
def leaky_relu(c: OpContext) -> list[TensorRef]:
    alpha = c.float_option(S.LeakyReluOptions.ALPHA)
    return [c.node("LeakyRelu", [c.input(0)], T=c.dtype(0), alpha=alpha)]


@translates("PRELU")
def prelu(c: OpContext) -> list[TensorRef]:
    """relu(x) + alpha * min(x, 0)."""
    dtype = c.dtype(0)
    x = c.input(0)
    negative = c.node("Minimum", [x, c.const(0.0, dtype, "zero")], T=dtype)
    scaled = c.node("Mul", [c.input(1), negative], T=dtype)
    return [c.node("AddV2", [c.node("Relu", [x], T=dtype), scaled], T=dtype)]


@translates("HARD_SWISH")
def hard_swish(c: OpContext) -> list[TensorRef]:
    """x * relu6(x + 3) / 6."""
    dtype = c.dtype(0)
    x = c.input(0)
    shifted = c.node("AddV2", [x, c.const(3.0, dtype, "three")], T=dtype)
    gated = c.node("Mul", [x, c.node("Relu6", [shifted], T=dtype)], T=dtype)
    return [c.node("RealDiv", [gated, c.const(6.0, dtype, "six")], T=dtype)]


@translates("GELU")
def gelu(c: OpContext) -> list[TensorRef]:
    """0.5 x (1 + erf(x / sqrt 2)), or with approximate 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    dtype = c.dtype(0)
    x = c.input(0)
    if c.bool_option(S.GeluOptions.APPROXIMATE):
        cube = c.node("Mul", [x, c.node("Mul", [x, x], T=dtype)], T=dtype)
        inner = c.node("AddV2", [x, c.node("Mul", [cube, c.const(0.044715, dtype, "k")], T=dtype)], T=dtype)
        scaled = c.node("Mul", [inner, c.const(math.sqrt(2.0 / math.pi), dtype, "scale")], T=dtype)
        gate = c.node("Tanh", [scaled], T=dtype)
    else:
        scaled = c.node("Mul", [x, c.const(1.0 / math.sqrt(2.0), dtype, "scale")], T=dtype)
        gate = c.node("Erf", [scaled], T=dtype)
    one_plus = c.node("AddV2", [gate, c.const(1.0, dtype, "one")], T=dtype)
    half_x = c.node("Mul", [x, c.const(0.5, dtype, "half")], T=dtype)
    return [c.node("Mul", [half_x, one_plus], T=dtype)]


@translates("SOFTMAX")
def softmax(c: OpContext) -> list[TensorRef]:
    """softmax(beta * x) over the last axis."""
    dtype = c.dtype(0)
    x = c.input(0)
    beta = c.float_option(S.SoftmaxOptions.BETA)
    if beta != 1.0:
        x = c.node("Mul", [x, c.const(beta, dtype, "beta")], T=dtype)
    return [c.node("Softmax", [x], T=dtype)]


@translates("LOCAL_RESPONSE_NORMALIZATION")
def local_response_normalization(c: OpContext) -> list[TensorRef]:
    O = S.LocalResponseNormalizationOptions
    return [
        c.node(
            "LRN", [c.input(0)], T=c.dtype(0), depth_radius=c.int_option(O.RADIUS),
            bias=c.float_option(O.BIAS), alpha=c.float_option(O.ALPHA), beta=c.float_option(O.BETA),
        )
    ]


@translates("CAST")
def cast(c: OpContext) -> list[TensorRef]:
    return [c.node("Cast", [c.input(0)], SrcT=c.dtype(0), DstT=c.output(0).dtype, Truncate=False)]


@translates("DEQUANTIZE")
def dequantize(c: OpContext) -> list[TensorRef]:
    """Only float16 -> float32 (weights stored as halves); the reader rejects quantized models."""
    if c.dtype(0) != np.float16:
        return unsupported(c, "TFLite:DEQUANTIZE")
    value = c.constant(0)
    if value is not None:
        return [c.const(value.astype(np.float32), np.float32, "value")]
    return [c.node("Cast", [c.input(0)], SrcT=c.dtype(0), DstT=np.dtype(np.float32), Truncate=False)]
