"""TFLite convolutions and dense layers (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED, BATCH_MATMUL) as TensorFlow ops: filters from OHWI (and depthwise
[1,H,W,C*M]) to TensorFlow's HWIO ([H,W,C,M]), the bias and fused activation as nodes of
their own."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext
from hobbit.frontend.tflite.ops.common import (activation, bias_add, declared_dims, padding, rearranged, reshaped,
                                               strides)
from hobbit.frontend.tflite.ops.table import translates


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
