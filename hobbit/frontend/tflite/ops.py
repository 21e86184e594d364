"""TFLite builtins translated into TensorFlow ops with tf.raw_ops semantics, so TFLite
models share the TensorFlow converters. Each translation reads one operator (OpContext)
and returns the node outputs that hold its output tensors.

TFLite differs from TensorFlow mostly in three ways, undone here: fused activations
(a separate node after the op), filter layouts (OHWI, [1,H,W,C*M] for depthwise; TF
wants HWIO, [H,W,C,M]) and attributes kept as operands or options the other way round.
A builtin without a translation becomes a node of op "TFLite:<NAME>", which the
converter reports with the model's other unsupported ops."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from hobbit.errors import ShapeError
from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext

Translation = Callable[[OpContext], list[TensorRef]]

TRANSLATIONS: dict[str, Translation] = {}

# More dims than any TensorFlow kernel takes; a larger count is a damaged file.
MAX_RANK = 64


def translates(*builtins: str):
    def register(fn: Translation) -> Translation:
        for builtin in builtins:
            TRANSLATIONS[builtin] = fn
        return fn

    return register


def unsupported(c: OpContext, op: str) -> list[TensorRef]:
    """A placeholder node the converter lists as unsupported, with one output per tensor."""
    inputs = [c.input(i) for i in range(len(c.op.inputs)) if c.has_input(i)]
    node = c.node(op, inputs, tflite_operator=c.op.index, tflite_version=c.op.version)
    return [TensorRef(node.node, i) for i in range(len(c.op.outputs))]


def translate(c: OpContext) -> list[TensorRef]:
    if c.op.builtin == "CUSTOM":
        return unsupported(c, f"TFLite:CUSTOM:{c.op.custom_code}")
    translation = TRANSLATIONS.get(c.op.builtin)
    if translation is None:
        return unsupported(c, f"TFLite:{c.op.builtin}")
    return translation(c)


# Shared pieces.


def activation(c: OpContext, x: TensorRef, code: int) -> TensorRef:
    """The fused activation `code` (ActivationFunctionType) applied to x, as its own node."""
    dtype = c.dtype(0)
    name = S.ACTIVATIONS[code] if 0 <= code < len(S.ACTIVATIONS) else f"ACTIVATION_{code}"
    if name == "NONE":
        return x
    if name == "RELU":
        return c.node("Relu", [x], T=dtype)
    if name == "RELU6":
        return c.node("Relu6", [x], T=dtype)
    if name == "TANH":
        return c.node("Tanh", [x], T=dtype)
    if name == "RELU_N1_TO_1":
        return clip(c, x, -1.0, 1.0)
    return c.node(f"TFLite:fused_activation:{name}", [x], tflite_operator=c.op.index)


def clip(c: OpContext, x: TensorRef, low: float, high: float) -> TensorRef:
    dtype = c.dtype(0)
    upper = c.node("Minimum", [x, c.const(high, dtype, "high")], T=dtype)
    return c.node("Maximum", [upper, c.const(low, dtype, "low")], T=dtype)


def padding(c: OpContext, field: int) -> str:
    code = c.enum_option(field)
    return S.PADDING[code] if 0 <= code < len(S.PADDING) else f"PADDING_{code}"


def strides(c: OpContext, h_field: int, w_field: int) -> list[int]:
    return [1, c.int_option(h_field), c.int_option(w_field), 1]


def rearranged(c: OpContext, i: int, perm: tuple[int, ...], suffix: str) -> TensorRef:
    """Input i transposed by `perm`: a transposed view of a constant, else a Transpose."""
    value = c.constant(i)
    if value is not None:
        return c.const(np.transpose(value, perm), value.dtype, suffix)
    return c.node("Transpose", [c.input(i), c.const(perm)], T=c.dtype(i), Tperm=np.dtype(np.int32))


def reshaped(c: OpContext, x: TensorRef, shape: list[int], dtype) -> TensorRef:
    return c.node("Reshape", [x, c.const(shape)], T=dtype, Tshape=np.dtype(np.int32))


def bias_add(c: OpContext, x: TensorRef, i: int) -> TensorRef:
    if not c.has_input(i):
        return x
    return c.node("BiasAdd", [x, c.input(i)], T=c.dtype(0), data_format="NHWC")


def declared_dims(c: OpContext, tensor) -> list[int] | None:
    """A tensor's dims with -1 for the unknown one, None when more than one is unknown."""
    if tensor.signature is None:
        return None
    dims = [-1 if d is None else d for d in tensor.signature]
    return dims if dims.count(-1) <= 1 else None


# Convolutions and dense layers.


@translates("CONV_2D")
def conv_2d(c: OpContext) -> list[TensorRef]:
    O = S.Conv2DOptions
    y = c.node(
        "Conv2D",
        [c.input(0), rearranged(c, 1, (1, 2, 3, 0), "filter")],
        T=c.dtype(0),
        strides=strides(c, O.STRIDE_H, O.STRIDE_W),
        padding=padding(c, O.PADDING),
        dilations=[1, c.int_option(O.DILATION_H, 1), c.int_option(O.DILATION_W, 1), 1],
        data_format="NHWC",
        use_cudnn_on_gpu=True,
        explicit_paddings=[],
    )
    return [activation(c, bias_add(c, y, 2), c.enum_option(O.ACTIVATION))]


@translates("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(c: OpContext) -> list[TensorRef]:
    O = S.DepthwiseConv2DOptions
    y = c.node(
        "DepthwiseConv2dNative",
        [c.input(0), depthwise_filter(c)],
        T=c.dtype(0),
        strides=strides(c, O.STRIDE_H, O.STRIDE_W),
        padding=padding(c, O.PADDING),
        dilations=[1, c.int_option(O.DILATION_H, 1), c.int_option(O.DILATION_W, 1), 1],
        data_format="NHWC",
        explicit_paddings=[],
    )
    return [activation(c, bias_add(c, y, 2), c.enum_option(O.ACTIVATION))]


def depthwise_filter(c: OpContext) -> TensorRef:
    """[1, H, W, C*M] -> [H, W, C, M]; output channel c*M+m is the same one in both."""
    _, h, w, cm = c.static_shape(1, 4)
    in_shape = c.tensor(0).shape
    if in_shape is not None and len(in_shape) == 4 and 0 < in_shape[3] <= cm and cm % in_shape[3] == 0:
        channels = in_shape[3]
    else:
        channels = max(cm // max(c.int_option(S.DepthwiseConv2DOptions.DEPTH_MULTIPLIER, 1), 1), 1)
    shape = [h, w, channels, cm // channels]
    if channels * shape[3] != cm:
        raise ShapeError(
            f"{c.emitter.model.source}: {c.label} writing '{c.base}' has {cm} filter channels, "
            f"not a multiple of its {channels} input channels"
        )
    value = c.constant(1)
    if value is not None:
        return c.const(value.reshape(shape), value.dtype, "filter")
    return reshaped(c, c.input(1), shape, c.dtype(1))


@translates("TRANSPOSE_CONV")
def transpose_conv(c: OpContext) -> list[TensorRef]:
    """Inputs (output_shape, weights OHWI, input[, bias]); TF's filter is [H, W, O, I]."""
    O = S.TransposeConvOptions
    y = c.node(
        "Conv2DBackpropInput",
        [c.input(0), rearranged(c, 1, (1, 2, 0, 3), "filter"), c.input(2)],
        T=c.dtype(2),
        strides=strides(c, O.STRIDE_H, O.STRIDE_W),
        padding=padding(c, O.PADDING),
        dilations=[1, 1, 1, 1],
        data_format="NHWC",
        use_cudnn_on_gpu=True,
        explicit_paddings=[],
    )
    if c.has_input(3):
        y = c.node("BiasAdd", [y, c.input(3)], T=c.dtype(2), data_format="NHWC")
    return [activation(c, y, c.enum_option(O.ACTIVATION))]


@translates("FULLY_CONNECTED")
def fully_connected(c: OpContext) -> list[TensorRef]:
    """x @ weights^T + bias on x flattened to [-1, in]; keep_num_dims restores x's leading dims."""
    O = S.FullyConnectedOptions
    dtype = c.dtype(0)
    x = c.input(0)
    in_shape = c.tensor(0).shape
    depth = c.static_shape(1, 2)[1]
    flat = in_shape is None or len(in_shape) != 2
    if flat:
        x = reshaped(c, x, [-1, depth], dtype)
    y = c.node("MatMul", [x, c.input(1)], T=dtype, transpose_a=False, transpose_b=True)
    y = activation(c, bias_add(c, y, 2), c.enum_option(O.ACTIVATION))
    if flat and c.bool_option(O.KEEP_NUM_DIMS):
        y = keep_leading_dims(c, y, c.input(0))
    return [y]


def keep_leading_dims(c: OpContext, y: TensorRef, x: TensorRef) -> TensorRef:
    dtype = c.dtype(0)
    dims = declared_dims(c, c.output(0))
    if dims is not None:
        return reshaped(c, y, dims, dtype)
    int32 = np.dtype(np.int32)
    shape = c.node("Shape", [x], T=dtype, out_type=int32)
    leading = c.node(
        "StridedSlice",
        [shape, c.const([0]), c.const([-1]), c.const([1])],
        T=int32, Index=int32, begin_mask=1, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0,
    )
    depth = c.const([c.static_shape(1, 2)[0]])
    full = c.node("ConcatV2", [leading, depth, c.const(0)], N=2, T=int32, Tidx=int32)
    return c.node("Reshape", [y, full], T=dtype, Tshape=int32)


@translates("BATCH_MATMUL")
def batch_matmul(c: OpContext) -> list[TensorRef]:
    O = S.BatchMatMulOptions
    return [
        c.node(
            "BatchMatMulV2", [c.input(0), c.input(1)], T=c.dtype(0),
            adj_x=c.bool_option(O.ADJ_X), adj_y=c.bool_option(O.ADJ_Y),
        )
    ]


# Element-wise.

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


# Pooling and reductions.

_POOLS = {"AVERAGE_POOL_2D": "AvgPool", "MAX_POOL_2D": "MaxPool"}


@translates(*_POOLS)
def pool_2d(c: OpContext) -> list[TensorRef]:
    O = S.Pool2DOptions
    y = c.node(
        _POOLS[c.op.builtin],
        [c.input(0)],
        T=c.dtype(0),
        ksize=[1, c.int_option(O.FILTER_HEIGHT), c.int_option(O.FILTER_WIDTH), 1],
        strides=strides(c, O.STRIDE_H, O.STRIDE_W),
        padding=padding(c, O.PADDING),
        data_format="NHWC",
    )
    return [activation(c, y, c.enum_option(O.ACTIVATION))]


_REDUCERS = {
    "MEAN": "Mean", "SUM": "Sum", "REDUCE_MAX": "Max", "REDUCE_MIN": "Min",
    "REDUCE_PROD": "Prod", "REDUCE_ANY": "Any", "REDUCE_ALL": "All",
}


@translates(*_REDUCERS)
def reduce(c: OpContext) -> list[TensorRef]:
    op = _REDUCERS[c.op.builtin]
    attrs = {"keep_dims": c.bool_option(S.ReducerOptions.KEEP_DIMS), "Tidx": c.dtype(1)}
    if op not in ("Any", "All"):
        attrs["T"] = c.dtype(0)
    return [c.node(op, [c.input(0), c.input(1)], **attrs)]


@translates("ARG_MAX", "ARG_MIN")
def arg_max_min(c: OpContext) -> list[TensorRef]:
    op = "ArgMax" if c.op.builtin == "ARG_MAX" else "ArgMin"
    return [
        c.node(op, [c.input(0), c.input(1)], T=c.dtype(0), Tidx=c.dtype(1), output_type=c.output(0).dtype)
    ]


@translates("CUMSUM")
def cumsum(c: OpContext) -> list[TensorRef]:
    O = S.CumsumOptions
    return [
        c.node(
            "Cumsum", [c.input(0), c.input(1)], T=c.dtype(0), Tidx=c.dtype(1),
            exclusive=c.bool_option(O.EXCLUSIVE), reverse=c.bool_option(O.REVERSE),
        )
    ]


# Shapes and data movement.


@translates("RESHAPE")
def reshape(c: OpContext) -> list[TensorRef]:
    """The new shape is input 1 when given, else the options' new_shape, else the output's."""
    dtype = c.dtype(0)
    if c.has_input(1) and c.tensor(1).shape != (0,):
        return [c.node("Reshape", [c.input(0), c.input(1)], T=dtype, Tshape=c.dtype(1))]
    shape = c.ints_option(S.ReshapeOptions.NEW_SHAPE)
    if shape is None:
        shape = declared_dims(c, c.output(0))
    if shape is None:
        return unsupported(c, "TFLite:RESHAPE")
    return [reshaped(c, c.input(0), shape, dtype)]


@translates("SQUEEZE")
def squeeze(c: OpContext) -> list[TensorRef]:
    dims = c.ints_option(S.SqueezeOptions.SQUEEZE_DIMS) or []
    return [c.node("Squeeze", [c.input(0)], T=c.dtype(0), squeeze_dims=dims)]


@translates("EXPAND_DIMS")
def expand_dims(c: OpContext) -> list[TensorRef]:
    return [c.node("ExpandDims", [c.input(0), c.input(1)], T=c.dtype(0), Tdim=c.dtype(1))]


@translates("TRANSPOSE")
def transpose(c: OpContext) -> list[TensorRef]:
    return [c.node("Transpose", [c.input(0), c.input(1)], T=c.dtype(0), Tperm=c.dtype(1))]


@translates("CONCATENATION")
def concatenation(c: OpContext) -> list[TensorRef]:
    O = S.ConcatenationOptions
    values = c.inputs()
    axis = c.const(c.int_option(O.AXIS), suffix="axis")
    y = c.node("ConcatV2", [*values, axis], N=len(values), T=c.dtype(0), Tidx=np.dtype(np.int32))
    return [activation(c, y, c.enum_option(O.ACTIVATION))]


@translates("PACK")
def pack(c: OpContext) -> list[TensorRef]:
    values = c.inputs()
    return [c.node("Pack", values, N=len(values), T=c.dtype(0), axis=c.int_option(S.PackOptions.AXIS))]


@translates("UNPACK")
def unpack(c: OpContext) -> list[TensorRef]:
    O = S.UnpackOptions
    num = c.int_option(O.NUM)
    y = c.node("Unpack", [c.input(0)], T=c.dtype(0), num=num, axis=c.int_option(O.AXIS))
    return [TensorRef(y.node, i) for i in range(num)]


@translates("SPLIT")
def split(c: OpContext) -> list[TensorRef]:
    """Inputs (axis, value), as TF's Split."""
    num = c.int_option(S.SplitOptions.NUM_SPLITS)
    y = c.node("Split", [c.input(0), c.input(1)], T=c.dtype(1), num_split=num)
    return [TensorRef(y.node, i) for i in range(num)]


@translates("SPLIT_V")
def split_v(c: OpContext) -> list[TensorRef]:
    """Inputs (value, size_splits, axis), as TF's SplitV."""
    num = c.int_option(S.SplitOptions.NUM_SPLITS)
    y = c.node("SplitV", c.inputs(), T=c.dtype(0), Tlen=c.dtype(1), num_split=num)
    return [TensorRef(y.node, i) for i in range(num)]


@translates("STRIDED_SLICE")
def strided_slice(c: OpContext) -> list[TensorRef]:
    """With `offset`, end is relative to begin: TF's end is begin + end."""
    O = S.StridedSliceOptions
    index = c.dtype(1)
    begin, end = c.input(1), c.input(2)
    if c.bool_option(O.OFFSET):
        end = c.node("AddV2", [begin, end], T=index)
    if c.has_input(3):
        step = c.input(3)
    else:
        (count,) = c.static_shape(1, 1)
        if count > MAX_RANK:
            raise ShapeError(f"{c.emitter.model.source}: {c.label} writing '{c.base}' slices {count} dims")
        step = c.const(np.ones(count, dtype=index), index, "strides")
    return [
        c.node(
            "StridedSlice",
            [c.input(0), begin, end, step],
            T=c.dtype(0),
            Index=index,
            begin_mask=c.int_option(O.BEGIN_MASK),
            end_mask=c.int_option(O.END_MASK),
            ellipsis_mask=c.int_option(O.ELLIPSIS_MASK),
            new_axis_mask=c.int_option(O.NEW_AXIS_MASK),
            shrink_axis_mask=c.int_option(O.SHRINK_AXIS_MASK),
        )
    ]


@translates("SLICE")
def slice_(c: OpContext) -> list[TensorRef]:
    return [c.node("Slice", c.inputs(), T=c.dtype(0), Index=c.dtype(1))]


@translates("GATHER")
def gather(c: OpContext) -> list[TensorRef]:
    O = S.GatherOptions
    axis = c.const(c.int_option(O.AXIS), suffix="axis")
    return [
        c.node(
            "GatherV2", [c.input(0), c.input(1), axis], Tparams=c.dtype(0), Tindices=c.dtype(1),
            Taxis=np.dtype(np.int32), batch_dims=c.int_option(O.BATCH_DIMS),
        )
    ]


@translates("GATHER_ND")
def gather_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("GatherNd", c.inputs(), Tparams=c.dtype(0), Tindices=c.dtype(1))]


@translates("PAD", "PADV2")
def pad(c: OpContext) -> list[TensorRef]:
    attrs = {"T": c.dtype(0), "Tpaddings": c.dtype(1)}
    if c.has_input(2):
        return [c.node("PadV2", [c.input(0), c.input(1), c.input(2)], **attrs)]
    return [c.node("Pad", [c.input(0), c.input(1)], **attrs)]


@translates("MIRROR_PAD")
def mirror_pad(c: OpContext) -> list[TensorRef]:
    code = c.enum_option(S.MirrorPadOptions.MODE)
    mode = S.MIRROR_PAD_MODE[code] if 0 <= code < len(S.MIRROR_PAD_MODE) else f"MODE_{code}"
    return [c.node("MirrorPad", [c.input(0), c.input(1)], T=c.dtype(0), Tpaddings=c.dtype(1), mode=mode)]


@translates("TILE")
def tile(c: OpContext) -> list[TensorRef]:
    return [c.node("Tile", c.inputs(), T=c.dtype(0), Tmultiples=c.dtype(1))]


@translates("REVERSE_V2")
def reverse_v2(c: OpContext) -> list[TensorRef]:
    return [c.node("ReverseV2", c.inputs(), T=c.dtype(0), Tidx=c.dtype(1))]


@translates("BROADCAST_TO")
def broadcast_to(c: OpContext) -> list[TensorRef]:
    return [c.node("BroadcastTo", c.inputs(), T=c.dtype(0), Tidx=c.dtype(1))]


@translates("SHAPE")
def shape(c: OpContext) -> list[TensorRef]:
    return [c.node("Shape", [c.input(0)], T=c.dtype(0), out_type=c.output(0).dtype)]


@translates("RANK")
def rank(c: OpContext) -> list[TensorRef]:
    return [c.node("Rank", [c.input(0)], T=c.dtype(0))]


@translates("FILL")
def fill(c: OpContext) -> list[TensorRef]:
    """Inputs (dims, value), as TF's Fill."""
    return [c.node("Fill", [c.input(0), c.input(1)], T=c.dtype(1), index_type=c.dtype(0))]


@translates("RANGE")
def range_(c: OpContext) -> list[TensorRef]:
    return [c.node("Range", c.inputs(), Tidx=c.dtype(0))]


@translates("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(c: OpContext) -> list[TensorRef]:
    if c.op.builtin == "RESIZE_BILINEAR":
        op, O = "ResizeBilinear", S.ResizeBilinearOptions
    else:
        op, O = "ResizeNearestNeighbor", S.ResizeNearestNeighborOptions
    return [
        c.node(
            op, [c.input(0), c.input(1)], T=c.dtype(0),
            align_corners=c.bool_option(O.ALIGN_CORNERS),
            half_pixel_centers=c.bool_option(O.HALF_PIXEL_CENTERS),
        )
    ]


_BLOCK_OPS = {"SPACE_TO_DEPTH": "SpaceToDepth", "DEPTH_TO_SPACE": "DepthToSpace"}


@translates(*_BLOCK_OPS)
def block_rearrangement(c: OpContext) -> list[TensorRef]:
    return [
        c.node(
            _BLOCK_OPS[c.op.builtin], [c.input(0)], T=c.dtype(0),
            block_size=c.int_option(S.BlockSizeOptions.BLOCK_SIZE), data_format="NHWC",
        )
    ]


@translates("SPACE_TO_BATCH_ND")
def space_to_batch_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("SpaceToBatchND", c.inputs(), T=c.dtype(0), Tblock_shape=c.dtype(1), Tpaddings=c.dtype(2))]


@translates("BATCH_TO_SPACE_ND")
def batch_to_space_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("BatchToSpaceND", c.inputs(), T=c.dtype(0), Tblock_shape=c.dtype(1), Tcrops=c.dtype(2))]
