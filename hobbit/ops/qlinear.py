"""Integer ops of a quantized network, made by the int8 pass (hobbit/passes/int8.py) from
the DequantizeLinear -> float op -> QuantizeLinear patterns of QDQ models.

QConv is a convolution of uint8/int8 activations with int8 weights, accumulated exactly in
int32 and requantized in its own epilogue:

    acc[n, o, p] = sum_k x[n, k, p] * w[o, k] + offset[o]       (x padded with x_zero)
    y = clip(rint(float32(acc) * multiplier[o]) + y_zero, lo, hi)  in dtype `to`

`offset` folds the bias and the activations' zero point (bias[o] - x_zero * sum_k w[o, k]),
so padding with x_zero contributes nothing, as padding with real zeros does in the float
model; `multiplier` is x_scale * w_scale[o] / y_scale. A Relu before the QuantizeLinear
becomes lo = y_zero. The weights are stored [OC, Kp] with the reduction dim
k = (c, kh, kw) padded with zeros to whole groups of the kernel's dot-product instruction
(4 bytes for vpdpbusd; hobbit.plan.int8 chooses), in the dtype the kernel reads them in.

QMatMul is the same for a matrix product with constant weights [K, N] (fully-connected
layers), stored in NR-column panels of the dot product's layout; offset and multiplier are
per column.

For int8 activations the kernels add 128 to make them unsigned, and `offset` is computed
for the values they read: x + 128 (the pass does this), so the references do the same.

A QAdd of a QConv's output and another tensor (a residual connection) is fused into the
QConv: its fifth input is the residual, and the epilogue adds it to the requantized value
exactly as the QAdd would (the same float32 operations), so no intermediate is stored.

QConvInteger and QMatMulInteger are ConvInteger and MatMulInteger (dynamically quantized
models: the activations' zero point is computed at run time by DynamicQuantizeLinear) on
the same kernels: the exact int32 result, sum_k (x - x_zero) * w, is the kernel's sum of
x * w minus x_zero times the weights' sum, which the epilogue subtracts with the zero
point it reads at run time.

QAdd adds two quantized tensors of their own scales and zero points and requantizes:
y = clip(rint(((a - a_zero) * a_scale + (b - b_zero) * b_scale) / y_scale) + y_zero, lo, hi),
in float32 as a DequantizeLinear -> Add -> QuantizeLinear chain computes it.

QRequantize moves a quantized tensor to another scale and zero point (an input of a quantized
Concat), QGlobalAveragePool and QAveragePool average quantized planes and windows; each
follows the arithmetic of onnxruntime's QLinearConcat / QLinearGlobalAveragePool /
QLinearAveragePool, which the docs of the ops below spell out."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.graph.shapes import broadcast, pool_out_size
from hobbit.ops import per_sample
from hobbit.ops.nn import conv_flops, conv_infer, conv_reference
from hobbit.ops.registry import OpDef, register_op
from hobbit.plan.int8 import depthwise_unpacked, is_depthwise


def _qconv_infer(node: Node) -> list[TensorType]:
    x, w, offset, multiplier = node.inputs[:4]
    oc = node.attrs["weight_shape"][0]
    if x.dtype.kind not in "iu" or x.dtype.itemsize != 1 or w.dtype.kind != "i" \
            or offset.dtype != np.int32 or multiplier.dtype != np.float32 \
            or tuple(offset.shape) != (oc,) or tuple(multiplier.shape) != (oc,):
        raise ShapeError(f"QConv of {x.type} by {w.type} with offset {offset.type} and multiplier {multiplier.type}")
    shape = conv_infer(node)[0].shape
    if len(node.inputs) > 4 and (tuple(node.inputs[4].shape) != shape or node.inputs[4].dtype != np.dtype(node.attrs["to"])):
        raise ShapeError(f"QConv residual {node.inputs[4].type} for an output of shape {shape}")
    then = node.attrs.get("then")
    to = then["to"] if then else node.attrs["sum_to"] if len(node.inputs) > 4 else node.attrs["to"]
    return [TensorType(np.dtype(to), shape)]


def unpacked_weights(w: np.ndarray, a: dict) -> np.ndarray:
    """Stored weights -> the [OC, C/group, KH, KW] filters they hold: a depthwise conv's
    [OC, KH, KW padded] rows (hobbit.plan.int8.depthwise_filters), else [OC, Kp] rows, or with
    a "weight_panel" of MR rows, per group panels of [Kp/word, MR, word] (one 32-bit word of
    k a step: 4 int8 or 2 int16; hobbit.plan.int8.panel_filters), zero-padded to whole panels."""
    weight_shape, mr = a["weight_shape"], a.get("weight_panel", 0)
    if len(weight_shape) == 4 and is_depthwise(weight_shape[1], a["group"]):
        return depthwise_unpacked(w, weight_shape)
    k = int(np.prod(weight_shape[1:]))
    if mr:
        group, kp, word = a["group"], w.shape[1], 4 // w.dtype.itemsize
        ocg = weight_shape[0] // group
        panels = w.reshape(group, -1, kp // word, mr, word).transpose(0, 1, 3, 2, 4).reshape(group, -1, kp)
        w = panels[:, :ocg].reshape(weight_shape[0], kp)
    return w[:, :k].reshape(weight_shape)


def _requantize(acc: np.ndarray, multiplier: np.ndarray, a: dict) -> np.ndarray:
    scaled = np.rint(acc.astype(np.float32) * multiplier.astype(np.float32)) + np.float32(a["y_zero"])
    return np.clip(scaled, a["lo"], a["hi"]).astype(a["to"])


def _as_read(x: np.ndarray) -> np.ndarray:
    """Activations as the int8 kernels read them: uint8 as stored, int8 + 128."""
    return x.astype(np.int64) + (128 if x.dtype == np.int8 else 0)


def _qconv_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w, offset, multiplier = ins[:4]
    pt, pl, pb, pr = a["pads"]
    zero = a["x_zero"] + (128 if x.dtype == np.int8 else 0)
    padded = np.pad(_as_read(x).astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=zero)
    unpadded = {**a, "pads": (0, 0, 0, 0), "weight_layout": "OIHW"}
    acc = conv_reference([padded, unpacked_weights(w, a).astype(np.float64)], unpadded)[0]
    acc = acc + offset.reshape(1, -1, 1, 1)
    y = _requantize(acc, multiplier.reshape(1, -1, 1, 1), a)
    if len(ins) > 4:
        y = _qadd_reference([y, ins[4]], residual_add_attrs(a))[0]
    return _qrequantize_reference([y], a["then"]) if a.get("then") else [y]


RESIDUAL_ATTRS = ("a_scale", "a_zero", "b_scale", "b_zero", "y_scale", "y_zero", "lo", "hi", "to")


def residual_add_attrs(a: dict) -> dict:
    """The QAdd a QConv with a residual input applies to its requantized output (operand a)
    and the residual (operand b): its attributes are stored with a "sum_" prefix."""
    return {name: a[f"sum_{name}"] for name in RESIDUAL_ATTRS}


register_op(OpDef(
    "QConv", infer=_qconv_infer, reference=_qconv_reference, flops=conv_flops,
    per_sample=per_sample.first_input,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "weight_shape": (),
           "weight_panel": 0, "x_zero": 0, "y_zero": 0, "lo": 0, "hi": 255, "to": "uint8",
           **{f"sum_{name}": value for name, value in zip(RESIDUAL_ATTRS, (1.0, 0, 1.0, 0, 1.0, 0, 0, 255, "uint8"))},
           "then": None},
    doc="int8 convolution with int32 accumulation and requantization; inputs X (uint8/int8), "
        "W [OC, Kp] (int8 or int16; in panels of weight_panel rows when that is set; depthwise: "
        "[OC, KH * KW padded to 4]), offset "
        "(int32 [OC]: bias - x_zero * row sums), multiplier "
        "(float32 [OC]: x_scale * w_scale / y_scale)[, a residual: the requantized output and it "
        "are added as QAdd with the sum_* attributes]; `then`: a QRequantize's attributes, applied "
        "to the bytes last (a quantized Concat's input of other parameters, fused by the int8 pass)"))


def _zero_read(x: np.ndarray, zero: np.ndarray) -> int:
    """The activations' zero point as the kernels read it (int8 + 128)."""
    return int(zero.reshape(-1)[0]) + (128 if x.dtype == np.int8 else 0)


def _check_integer_operands(node: Node, sums_count: int) -> None:
    x, w, sums, zero = node.inputs
    if x.dtype.kind not in "iu" or x.dtype.itemsize != 1 or w.dtype.kind != "i" or sums.dtype != np.int32 \
            or tuple(sums.shape) != (sums_count,) or zero.dtype != x.dtype or zero.type.size != 1:
        raise ShapeError(f"{node.op} of {x.type} by {w.type} with weight sums {sums.type} and zero point {zero.type}")


def _qconv_integer_infer(node: Node) -> list[TensorType]:
    _check_integer_operands(node, node.attrs["weight_shape"][0])
    return [TensorType(np.dtype(np.int32), conv_infer(node)[0].shape)]


def _qconv_integer_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w, sums, zero = ins
    pt, pl, pb, pr = a["pads"]
    read = _zero_read(x, zero)
    padded = np.pad(_as_read(x).astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=read)
    unpadded = {**a, "pads": (0, 0, 0, 0), "weight_layout": "OIHW"}
    acc = conv_reference([padded, unpacked_weights(w, a).astype(np.float64)], unpadded)[0]
    return [(acc - read * sums.reshape(1, -1, 1, 1).astype(np.float64)).astype(np.int32)]


register_op(OpDef(
    "QConvInteger", infer=_qconv_integer_infer, reference=_qconv_integer_reference, flops=conv_flops,
    per_sample=per_sample.first_input,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "weight_shape": (),
           "weight_panel": 0},
    doc="ConvInteger on the int8 kernels: the exact int32 convolution of (X - x_zero) and centred "
        "int8 weights; inputs X (uint8/int8), W [OC, Kp] (as QConv's), the weights' row sums (int32 "
        "[OC]), x_zero (one element of X's dtype, may be computed at run time: the padding reads it)"))


def _qmatmul_integer_infer(node: Node) -> list[TensorType]:
    a = node.attrs
    _check_integer_operands(node, a["n"])
    x = node.inputs[0]
    if len(x.shape) < 2 or x.shape[-1] != a["k"]:
        raise ShapeError(f"QMatMulInteger of {x.type} (K={a['k']}, N={a['n']})")
    return [TensorType(np.dtype(np.int32), tuple(x.shape[:-1]) + (a["n"],))]


def _qmatmul_integer_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w, sums, zero = ins
    acc = _as_read(x) @ unpacked_matrix(w, a["k"], a["n"]).astype(np.int64)
    return [(acc - _zero_read(x, zero) * sums.astype(np.int64)).astype(np.int32)]


register_op(OpDef(
    "QMatMulInteger", infer=_qmatmul_integer_infer, reference=_qmatmul_integer_reference,
    per_sample=per_sample.first_input, flops=lambda node: 2 * node.outputs[0].type.size * node.attrs["k"],
    attrs={"k": 0, "n": 0},
    doc="MatMulInteger on the int8 kernels: the exact int32 product of (X - x_zero) [..., K] and "
        "centred constant int8 weights; inputs X, W (QMatMul's panels), the weights' column sums "
        "(int32 [N]), x_zero (one element of X's dtype, may be computed at run time)"))


def _qadd_infer(node: Node) -> list[TensorType]:
    a, b = node.inputs
    for v in (a, b):
        if v.dtype.kind not in "iu" or v.dtype.itemsize != 1:
            raise ShapeError(f"QAdd of {a.type} and {b.type}")
    return [TensorType(np.dtype(node.attrs["to"]), broadcast(tuple(a.shape), tuple(b.shape)))]


def _qadd_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, y = ins
    real = ((x.astype(np.int32) - a["a_zero"]).astype(np.float32) * np.float32(a["a_scale"])
            + (y.astype(np.int32) - a["b_zero"]).astype(np.float32) * np.float32(a["b_scale"]))
    q = np.rint(real / np.float32(a["y_scale"])) + np.float32(a["y_zero"])
    return [np.clip(q, a["lo"], a["hi"]).astype(a["to"])]


register_op(OpDef(
    "QAdd", infer=_qadd_infer, reference=_qadd_reference, kind="elementwise",
    per_sample=per_sample.broadcasting,
    attrs={"a_scale": 1.0, "a_zero": 0, "b_scale": 1.0, "b_zero": 0, "y_scale": 1.0, "y_zero": 0,
           "lo": 0, "hi": 255, "to": "uint8"},
    doc="the sum of two quantized tensors, requantized: DequantizeLinear -> Add [-> Relu] -> QuantizeLinear"))


def _qmatmul_infer(node: Node) -> list[TensorType]:
    x, w, offset, multiplier = node.inputs
    a = node.attrs
    if x.dtype.kind not in "iu" or x.dtype.itemsize != 1 or len(x.shape) < 2 or x.shape[-1] != a["k"] \
            or offset.dtype != np.int32 or multiplier.dtype != np.float32 \
            or tuple(offset.shape) != (a["n"],) or tuple(multiplier.shape) != (a["n"],):
        raise ShapeError(f"QMatMul of {x.type} by {w.type} (K={a['k']}, N={a['n']})")
    return [TensorType(np.dtype(a["to"]), tuple(x.shape[:-1]) + (a["n"],))]


def unpacked_matrix(w: np.ndarray, k: int, n: int) -> np.ndarray:
    """[N/NR panels, Kp/group, NR, group] stored weights -> the [K, N] matrix they hold."""
    panels, groups, nr, group = w.shape
    return w.transpose(1, 3, 0, 2).reshape(groups * group, panels * nr)[:k, :n]


def _qmatmul_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w, offset, multiplier = ins
    acc = _as_read(x) @ unpacked_matrix(w, a["k"], a["n"]).astype(np.int64) + offset
    return [_requantize(acc, multiplier, a)]


register_op(OpDef(
    "QMatMul", infer=_qmatmul_infer, reference=_qmatmul_reference, per_sample=per_sample.first_input,
    flops=lambda node: 2 * node.outputs[0].type.size * node.attrs["k"],
    attrs={"k": 0, "n": 0, "x_zero": 0, "y_zero": 0, "lo": 0, "hi": 255, "to": "uint8"},
    doc="int8 matrix product with int32 accumulation and requantization; inputs X ([..., K], uint8/int8 "
        "as stored, int8 read as x + 128 like QConv), W (constant [N/NR, Kp/group, NR, group] panels), "
        "offset (int32 [N]), multiplier (float32 [N])"))


def _byte_input(node: Node) -> None:
    x = node.inputs[0]
    if x.dtype.kind not in "iu" or x.dtype.itemsize != 1:
        raise ShapeError(f"{node.op} {node.name} of {x.type}: expected a uint8 or int8 tensor")


def _qrequantize_infer(node: Node) -> list[TensorType]:
    _byte_input(node)
    return [TensorType(np.dtype(node.attrs["to"]), tuple(node.inputs[0].shape))]


def _qrequantize_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    real = (ins[0].astype(np.int32) - a["x_zero"]).astype(np.float32) * np.float32(a["x_scale"])
    q = np.rint(real / np.float32(a["y_scale"])) + np.float32(a["y_zero"])
    return [np.clip(q, a["lo"], a["hi"]).astype(a["to"])]


register_op(OpDef(
    "QRequantize", infer=_qrequantize_infer, reference=_qrequantize_reference, kind="elementwise",
    per_sample=per_sample.first_input,
    attrs={"x_scale": 1.0, "x_zero": 0, "y_scale": 1.0, "y_zero": 0, "lo": 0, "hi": 255, "to": "uint8",
           "multiplier": 0.0},
    doc="a quantized tensor in another scale and zero point: DequantizeLinear -> QuantizeLinear in float32, "
        "y = clip(rint((x - x_zero) * x_scale / y_scale) + y_zero, lo, hi) (the inputs of a quantized Concat); "
        "`multiplier`, when not 0, is a float32 m with rint((x - x_zero) * m) equal to that for every x"))


def _qglobal_average_pool_infer(node: Node) -> list[TensorType]:
    _byte_input(node)
    shape = tuple(node.inputs[0].shape)
    if len(shape) < 3:
        raise ShapeError(f"QGlobalAveragePool {node.name} of a rank-{len(shape)} tensor")
    return [TensorType(np.dtype(node.attrs["to"]), shape[:2] + (1,) * (len(shape) - 2))]


def _qglobal_average_pool_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    axes = tuple(range(2, x.ndim))
    acc = x.astype(np.int64).sum(axis=axes, keepdims=True) - a["x_zero"] * int(np.prod(x.shape[2:]))
    return [_requantize(acc, np.float32(a["multiplier"]), a)]


register_op(OpDef(
    "QGlobalAveragePool", infer=_qglobal_average_pool_infer, reference=_qglobal_average_pool_reference,
    per_sample=per_sample.first_input,
    attrs={"x_zero": 0, "multiplier": 1.0, "y_zero": 0, "lo": 0, "hi": 255, "to": "uint8"},
    doc="the mean of each quantized plane, requantized: acc = sum(x) - x_zero * HW exactly in int32, "
        "y = clip(rint(float32(acc) * multiplier) + y_zero, lo, hi) with multiplier = x_scale / (y_scale * HW) "
        "in float32 (onnxruntime's QLinearGlobalAveragePool)"))


def _qaverage_pool_infer(node: Node) -> list[TensorType]:
    _byte_input(node)
    a = node.attrs
    shape = tuple(node.inputs[0].shape)
    if len(shape) != 4:
        raise ShapeError(f"QAveragePool {node.name} of a rank-{len(shape)} tensor (expected NCHW)")
    return [TensorType(np.dtype(a["to"]), shape[:2] + _pooled_hw(shape, a))]


def average_window(o: int, size: int, k: int, stride: int, pad_begin: int) -> tuple[int, int]:
    """Input positions [start, stop) of output o's window, as onnxruntime clips it."""
    start = o * stride - pad_begin
    return max(start, 0), min(start + k, size)


def _qaverage_pool_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
    oh, ow = _pooled_hw(x.shape, a)
    real = np.float32(a["x_scale"]) * (x.astype(np.int32) - a["x_zero"]).astype(np.float32)
    y = np.empty(x.shape[:2] + (oh, ow), np.float32)
    for i in range(oh):
        h0, h1 = average_window(i, x.shape[2], kh, sh, a["pads"][0])
        for j in range(ow):
            w0, w1 = average_window(j, x.shape[3], kw, sw, a["pads"][1])
            acc = np.zeros(x.shape[:2], np.float32)
            for h in range(h0, h1):
                for w in range(w0, w1):
                    acc = acc + real[:, :, h, w]
            count = kh * kw if a["count_include_pad"] else (h1 - h0) * (w1 - w0)
            y[:, :, i, j] = acc / np.float32(count)
    q = np.rint(y / np.float32(a["y_scale"]) + np.float32(a["y_zero"]))
    return [np.clip(q, a["lo"], a["hi"]).astype(a["to"])]


def _pooled_hw(shape: tuple[int, ...], a: dict) -> tuple[int, int]:
    return tuple(pool_out_size(shape[2 + d], a["kernel_shape"][d], a["strides"][d], 1, a["pads"][d],
                               a["pads"][2 + d], bool(a["ceil_mode"])) for d in (0, 1))


register_op(OpDef(
    "QAveragePool", infer=_qaverage_pool_infer, reference=_qaverage_pool_reference,
    per_sample=per_sample.first_input,
    attrs={"kernel_shape": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0), "ceil_mode": 0, "count_include_pad": 0,
           "x_scale": 1.0, "x_zero": 0, "y_scale": 1.0, "y_zero": 0, "lo": 0, "hi": 255, "to": "uint8"},
    doc="2-D average pooling of a quantized tensor (NCHW, no dilation) with onnxruntime's QLinearAveragePool "
        "arithmetic: the dequantized taps of each window (clipped to the input) added in float32 row by row, "
        "divided by the tap count (the kernel size with count_include_pad), y = clip(rint(mean / y_scale + "
        "y_zero), lo, hi)"))
