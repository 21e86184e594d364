"""Converters for TensorFlow's neural-network ops: convolutions, bias, batch norm, pools,
softmax and activations.

Filters are HWIO in TensorFlow and OIHW in hobbit; a constant filter's Transpose folds
at import. Depthwise filters HWCM become (C*M, 1, H, W) with group C: TensorFlow orders
a depthwise output channel as c*M + m, which is the grouped convolution's order."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.batchnorm import batchnorm_from_statistics
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.layout import data_format, spatial, spatial_dims, to_format, to_nchw, window_pads
from hobbit.frontend.tf.tf_ops.operands import axis, const_ints, reshape

HWIO_TO_OIHW = (3, 2, 0, 1)


def _float32(op: str, x) -> None:
    if np.dtype(x.dtype) != np.float32:
        raise Unsupported(f"{op} on {np.dtype(x.dtype).name} tensors (hobbit's kernel is float32)")


def _conv_format(node, op: str, x, w) -> str:
    """The data format of the 2-D convolution `node` (op) of x by the filter w, once both are
    checked: rank 4, and x float32."""
    fmt = data_format(node)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise Unsupported(f"a 2-D convolution needs a rank-4 input and filter, got {x.type} and {w.type}")
    _float32(op, x)
    return fmt


def _conv(ctx, node, fmt: str, x, w, group: int):
    """The Conv of x (in data format fmt) with the OIHW filter w, back in fmt: strides,
    dilations and padding as node's attributes say, for w's window."""
    strides, dilations = spatial(node, "strides", fmt), spatial(node, "dilations", fmt)
    pads = window_pads(node, fmt, spatial_dims(x.shape, fmt), tuple(w.shape[2:]), strides, dilations)
    y = ctx.emit1("Conv", [to_nchw(ctx, x, fmt), w], {"strides": strides, "dilations": dilations, "pads": pads,
                                                       "group": group})
    return to_format(ctx, y, fmt)


@tf_converter("Conv2D")
def conv2d(ctx, node, ins):
    x, f = ins
    fmt = _conv_format(node, "Conv2D", x, f)
    channels = x.shape[3] if fmt == "NHWC" else x.shape[1]
    per_group = f.shape[2]
    if per_group == 0 or channels % per_group:
        raise Unsupported(f"filter {f.type} does not divide the {channels} input channels into groups")
    w = ctx.emit1("Transpose", [f], {"perm": HWIO_TO_OIHW})
    return [_conv(ctx, node, fmt, x, w, channels // per_group)]


@tf_converter("DepthwiseConv2dNative")
def depthwise_conv2d(ctx, node, ins):
    x, f = ins
    fmt = _conv_format(node, "DepthwiseConv2dNative", x, f)
    kh, kw, channels, multiplier = f.shape
    if channels != (x.shape[3] if fmt == "NHWC" else x.shape[1]):
        raise Unsupported(f"depthwise filter {f.type} does not match the channels of {x.type}")
    cmhw = ctx.emit1("Transpose", [f], {"perm": (2, 3, 0, 1)})
    w = reshape(ctx, cmhw, (channels * multiplier, 1, kh, kw))
    return [_conv(ctx, node, fmt, x, w, channels)]


@tf_converter("Conv2DBackpropInput")
def conv2d_backprop_input(ctx, node, ins):
    """The gradient of Conv2D with respect to its input, i.e. a transposed convolution: ONNX's
    ConvTranspose reads the forward filter as it is (OIHW with O the forward output
    channels), with the forward conv's pads and the output padding that reaches input_sizes."""
    sizes, f, dy = ins
    fmt = _conv_format(node, "Conv2DBackpropInput", dy, f)
    out_shape = const_ints(ctx, sizes, "input_sizes")
    if len(out_shape) != 4:
        raise Unsupported(f"input_sizes {out_shape} must have 4 entries")
    kh, kw, in_channels, out_channels = f.shape
    out_hw = spatial_dims(tuple(out_shape), fmt)
    strides, dilations = spatial(node, "strides", fmt), spatial(node, "dilations", fmt)
    pads = window_pads(node, fmt, out_hw, (kh, kw), strides, dilations)
    in_hw = spatial_dims(dy.shape, fmt)
    extra = []
    for d, (size, k) in enumerate(zip(in_hw, (kh, kw))):
        reached = strides[d] * (size - 1) + (k - 1) * dilations[d] + 1 - pads[d] - pads[d + 2]
        extra.append(out_hw[d] - reached)
    if any(not 0 <= e < max(strides[d], dilations[d]) for d, e in enumerate(extra)):
        raise Unsupported(f"input_sizes {out_shape} do not fit a {in_hw} gradient with strides {strides}")
    w = ctx.emit1("Transpose", [f], {"perm": HWIO_TO_OIHW})
    y = ctx.emit1("ConvND", [to_nchw(ctx, dy, fmt), w], {
        "strides": strides, "dilations": dilations, "pads": pads, "group": 1, "transposed": 1,
        "output_padding": tuple(extra)})
    if y.shape[1] != in_channels:
        raise Unsupported(f"filter {f.type} does not give {in_channels} channels")
    return [to_format(ctx, y, fmt)]


@tf_converter("BiasAdd", "BiasAddV1")
def bias_add(ctx, node, ins):
    """NHWC bias is a plain broadcasting Add; NCHW bias is reshaped to (C, 1, ...)."""
    x, b = ins
    fmt = data_format(node)
    if len(b.shape) != 1 or len(x.shape) < 2:
        raise Unsupported(f"BiasAdd of {b.type} to {x.type}")
    if fmt == "NCHW":
        b = reshape(ctx, b, (b.shape[0],) + (1,) * (len(x.shape) - 2))
    return [ctx.emit1("Add", [x, b])]


@tf_converter("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(ctx, node, ins):
    """Inference mode only; the batch statistics outputs are not computed."""
    if node.attrs.get("is_training", True):
        raise Unsupported("training-mode FusedBatchNorm (freeze the model for inference)")
    x, scale, offset, mean, var = ins
    fmt = data_format(node)
    if len(x.shape) != 4:
        raise Unsupported(f"FusedBatchNorm of a rank-{len(x.shape)} tensor")
    epsilon = float(node.attrs.get("epsilon", 1e-4))
    xin = to_nchw(ctx, x, fmt)
    if all(v.const is not None for v in (scale, offset, mean, var)):
        y = ctx.emit1("BatchNormalization", [xin, scale, offset, mean, var], {"epsilon": epsilon})
    else:
        y = batchnorm_from_statistics(ctx, xin, scale, offset, mean, var, epsilon)
    outputs = 6 if node.op == "FusedBatchNormV3" else 5
    return [to_format(ctx, y, fmt)] + [None] * (outputs - 1)


def _pool(ctx, node, x, op: str, ksize_value=None, strides_value=None):
    fmt = data_format(node)
    if len(x.shape) != 4:
        raise Unsupported(f"{op} of a rank-{len(x.shape)} tensor")
    _float32(op, x)
    if ksize_value is not None:
        node = _with_window(ctx, node, ksize_value, strides_value)
    kernel, strides = spatial(node, "ksize", fmt), spatial(node, "strides", fmt)
    pads = window_pads(node, fmt, spatial_dims(x.shape, fmt), kernel, strides)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    if op == "AveragePool":
        attrs["count_include_pad"] = 0  # TF averages over the window's pixels inside the image
    return [to_format(ctx, ctx.emit1(op, [to_nchw(ctx, x, fmt)], attrs), fmt)]


def _with_window(ctx, node, ksize, strides):
    """A MaxPoolV2 node as a MaxPool node: its window comes as inputs, not attributes."""
    attrs = {**node.attrs, "ksize": const_ints(ctx, ksize, "ksize"), "strides": const_ints(ctx, strides, "strides")}
    return type(node)(node.name, node.op, node.inputs, attrs)


@tf_converter("MaxPool")
def max_pool(ctx, node, ins):
    return _pool(ctx, node, ins[0], "MaxPool")


@tf_converter("MaxPoolV2")
def max_pool_v2(ctx, node, ins):
    return _pool(ctx, node, ins[0], "MaxPool", ins[1], ins[2])


@tf_converter("AvgPool")
def avg_pool(ctx, node, ins):
    return _pool(ctx, node, ins[0], "AveragePool")


@tf_converter("Softmax", "LogSoftmax")
def softmax(ctx, node, ins):
    x = ins[0]
    if not x.shape:
        raise Unsupported(f"{node.op} of a scalar")
    return [ctx.emit1(node.op, [x], {"axis": axis(-1, len(x.shape))})]


_UNARY = {"Relu": "Relu", "Elu": "Elu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Softplus": "Softplus", "Erf": "Erf"}


@tf_converter(*_UNARY)
def unary_activation(ctx, node, ins):
    return [ctx.emit1(_UNARY[node.op], [ins[0]])]


@tf_converter("Erfc")
def erfc(ctx, node, ins):
    """1 - erf(x): what tf.nn.gelu(approximate=False) computes its Gaussian CDF with."""
    x = ins[0]
    return [ctx.emit1("Sub", [ctx.const(1.0, x.dtype), ctx.emit1("Erf", [x])])]


@tf_converter("Relu6")
def relu6(ctx, node, ins):
    return [ctx.emit1("Clip", [ins[0]], {"min": 0.0, "max": 6.0})]


@tf_converter("LeakyRelu")
def leaky_relu(ctx, node, ins):
    return [ctx.emit1("LeakyRelu", [ins[0]], {"alpha": float(node.attrs.get("alpha", 0.2))})]


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@tf_converter("Selu")
def selu(ctx, node, ins):
    x = ins[0]
    elu = ctx.emit1("Elu", [x], {"alpha": _SELU_ALPHA})
    return [ctx.emit1("Mul", [elu, ctx.const(_SELU_SCALE, x.dtype)])]


@tf_converter("Softsign")
def softsign(ctx, node, ins):
    x = ins[0]
    denominator = ctx.emit1("Add", [ctx.emit1("Abs", [x]), ctx.const(1.0, x.dtype)])
    return [ctx.emit1("Div", [x, denominator])]


@tf_converter("LRN")
def lrn(ctx, node, ins):
    """x / (bias + alpha * sum of x^2 over channels d - r .. d + r)^beta, on the last
    (channel) axis. The window sum is an average pool over zero-padded squares times its
    size: the squares are laid out as one (rows, channels) image so the pool runs along C."""
    x = ins[0]
    _float32("LRN", x)
    if len(x.shape) != 4:
        raise Unsupported(f"LRN of a rank-{len(x.shape)} tensor (it takes NHWC images)")
    radius = int(node.attrs.get("depth_radius", 5))
    if radius < 0:
        raise Unsupported(f"LRN depth_radius {radius}")
    size = 2 * radius + 1
    channels = x.shape[-1]
    squares = reshape(ctx, ctx.emit1("Mul", [x, x]), (1, 1, x.type.size // max(channels, 1), channels))
    mean = ctx.emit1("AveragePool", [squares], {"kernel_shape": (1, size), "strides": (1, 1),
                                                "pads": (0, radius, 0, radius), "count_include_pad": 1})
    total = reshape(ctx, mean, tuple(x.shape))
    scale = float(node.attrs.get("alpha", 1.0)) * size
    scaled = ctx.emit1("Mul", [total, ctx.const(scale, x.dtype)])
    base = ctx.emit1("Add", [scaled, ctx.const(float(node.attrs.get("bias", 1.0)), x.dtype)])
    power = ctx.emit1("Pow", [base, ctx.const(float(node.attrs.get("beta", 0.5)), x.dtype)])
    return [ctx.emit1("Div", [x, power])]
