"""Converters for linear quantization: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, and the integer products MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv.

Per-tensor, per-axis and blocked scales become plain broadcasting: a per-axis
scale is reshaped to [C, 1, ...]; for blocks of size B along an axis of extent D,
x is viewed with that axis split into [D/B, B] and the scale as [D/B, 1]. Integer
products (MatMulInteger, ConvInteger) are the float64 product of their operands
dequantized with unit scale, cast to int32: exact, and the int8 pass runs them on the
integer dot product where the target has one. QLinear* with constant weights become the
QDQ form (DequantizeLinear -> MatMul/Conv -> QuantizeLinear) the int8 pass fuses into one
kernel; otherwise they rescale the integer product in float32 and requantize with
QuantizeLinear (round half to even, saturate)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.onnx.converters import converter, lookup
from hobbit.frontend.onnx.types import onnx_dtype
from hobbit.graph.shapes import normalize_axis

_INT_TYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _float32(ctx, v):
    """Scales in float16 (or another float) are computed in float32."""
    if np.dtype(v.dtype) == np.float32:
        return v
    if np.dtype(v.dtype).kind != "f":
        raise Unsupported(f"a scale of dtype {np.dtype(v.dtype).name}")
    return ctx.emit1("Cast", [v], {"to": "float32"})


def _zero(ctx, zero, dtype: np.dtype):
    return ctx.const(np.zeros((), dtype=dtype)) if zero is None else zero


def _broadcastable(ctx, x, params: list, axis: int, block: int, op: str):
    """x and its scale/zero point reshaped so the parameters broadcast into x.

    Returns (x view, parameter views, x's original shape when x had to be viewed)."""
    rank = len(x.shape)
    single = [p.type.size == 1 and len(p.shape) <= 1 for p in params]
    params = [ctx.emit1("Reshape", [p], {"shape": ()}) if one else p for p, one in zip(params, single)]
    if all(single):
        return x, params, None
    if rank == 0:
        raise Unsupported(f"{op} of a scalar with per-axis parameters")
    axis = normalize_axis(axis, rank, f"{op} axis")
    extent = x.shape[axis]
    trailing = (1,) * (rank - axis - 1)
    if not block:
        for p in params:
            if p.shape and tuple(p.shape) != (extent,):
                raise Unsupported(f"{op} parameters of shape {tuple(p.shape)} for axis {axis} of {tuple(x.shape)}")
        return x, [ctx.emit1("Reshape", [p], {"shape": (extent,) + trailing}) if p.shape else p
                   for p in params], None
    if extent % block:
        raise Unsupported(f"{op} blocks of {block} that do not divide axis extent {extent}")
    blocks = extent // block
    expected = tuple(x.shape[:axis]) + (blocks,) + tuple(x.shape[axis + 1:])
    for p in params:
        if p.shape and tuple(p.shape) != expected:
            raise Unsupported(f"{op} blocked parameters of shape {tuple(p.shape)} (expected {expected})")
    view = tuple(x.shape[:axis]) + (blocks, block) + tuple(x.shape[axis + 1:])
    param_view = tuple(x.shape[:axis]) + (blocks, 1) + tuple(x.shape[axis + 1:])
    x_view = ctx.emit1("Reshape", [x], {"shape": view})
    return x_view, [ctx.emit1("Reshape", [p], {"shape": param_view}) if p.shape else p for p in params], tuple(x.shape)


def _restore(ctx, y, shape):
    return y if shape is None else ctx.emit1("Reshape", [y], {"shape": shape})


def quantize(ctx, x, scale, zero):
    """QuantizeLinear of float32 x with float32 scale and an integer zero point (all broadcast)."""
    return ctx.emit1("QuantizeLinear", [x, scale, zero], {"to": np.dtype(zero.dtype).name})


def _output_dtype(ctx, a: dict, zero, default: str) -> np.dtype:
    if "output_dtype" in a and int(a["output_dtype"]):
        dtype = onnx_dtype(int(a["output_dtype"]), ctx.node_name)
        if zero is not None and np.dtype(zero.dtype) != dtype:
            raise Unsupported(f"output_dtype {dtype.name} with a zero point of dtype {np.dtype(zero.dtype).name}")
        return dtype
    return np.dtype(zero.dtype) if zero is not None else np.dtype(default)


@converter("QuantizeLinear", since=10)
def quantize_linear(ctx, node, ins):
    a = ctx.attrs(node)
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    to = _output_dtype(ctx, a, zero, "uint8")
    if to.name not in _INT_TYPES[:4]:
        raise Unsupported(f"QuantizeLinear to {to.name}")
    if "precision" in a and int(a["precision"]) and onnx_dtype(int(a["precision"]), ctx.node_name) != np.float32:
        raise Unsupported("QuantizeLinear with a division precision other than float32")
    if np.dtype(x.dtype).kind != "f":
        raise Unsupported(f"QuantizeLinear of {np.dtype(x.dtype).name} input")
    x32, scale = _float32(ctx, x), _float32(ctx, scale)
    zero = _zero(ctx, zero, to)
    view, (scale, zero), shape = _broadcastable(ctx, x32, [scale, zero], int(a.get("axis", 1)),
                                                int(a.get("block_size", 0)), "QuantizeLinear")
    return [_restore(ctx, quantize(ctx, view, scale, zero), shape)]


@converter("DequantizeLinear", since=10)
def dequantize_linear(ctx, node, ins):
    a = ctx.attrs(node)
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    out = _output_dtype(ctx, a, None, np.dtype(scale.dtype).name)
    if out.kind != "f":
        raise Unsupported(f"DequantizeLinear to {out.name}")
    y = dequantize(ctx, x, scale, zero, int(a.get("axis", 1)), int(a.get("block_size", 0)))
    return [y if out == np.dtype(y.dtype) else ctx.emit1("Cast", [y], {"to": out.name})]


def dequantize(ctx, x, scale, zero, axis: int = 1, block: int = 0):
    """DequantizeLinear of integer x (per tensor, per `axis` or in blocks), in float32 (or
    float64 for a float64 scale)."""
    if np.dtype(x.dtype).name not in _INT_TYPES:
        raise Unsupported(f"DequantizeLinear of {np.dtype(x.dtype).name} input")
    compute = np.dtype(scale.dtype) if np.dtype(scale.dtype) == np.float64 else np.dtype(np.float32)
    if compute == np.float32:
        scale = _float32(ctx, scale)
    zero = _zero(ctx, zero, np.dtype(x.dtype))
    view, (scale, zero), shape = _broadcastable(ctx, x, [scale, zero], axis, block, "DequantizeLinear")
    return _restore(ctx, ctx.emit1("DequantizeLinear", [view, scale, zero], {"to": compute.name}), shape)


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, node, ins):
    """uint8 quantization over the range [min(x, 0), max(x, 0)]; returns y, y_scale, y_zero_point."""
    x = ins[0]
    if np.dtype(x.dtype) != np.float32:
        raise Unsupported(f"DynamicQuantizeLinear of {np.dtype(x.dtype).name} input")
    every = tuple(range(len(x.shape)))
    zero_f = ctx.const(np.float32(0))
    low = ctx.emit1("Min", [ctx.emit1("ReduceMin", [x], {"axes": every, "keepdims": 0}), zero_f])
    high = ctx.emit1("Max", [ctx.emit1("ReduceMax", [x], {"axes": every, "keepdims": 0}), zero_f])
    scale = ctx.emit1("Div", [ctx.emit1("Sub", [high, low]), ctx.const(np.float32(255))])
    zero = quantize(ctx, ctx.emit1("Neg", [low]), scale, ctx.const(np.uint8(0)))
    return [quantize(ctx, x, scale, zero), scale, zero]


def _exact(ctx, v, zero, axis: int):
    """v - zero in float64, written as a DequantizeLinear of unit scale: exact for 8-bit
    operands (every product and partial sum of an integer product stays below 2**53), and
    the form the int8 pass recognises to run the product on the integer dot product.
    A zero point of more than one element is per index of `axis`."""
    if np.dtype(v.dtype).name not in _INT_TYPES[:2]:
        raise Unsupported(f"integer product of {np.dtype(v.dtype).name} operands")
    return dequantize(ctx, v, ctx.const(np.float64(1.0)), zero, axis=axis)


def _integer_matmul(ctx, node, a, b, a_zero, b_zero):
    """(a - a_zero) @ (b - b_zero) in int32: a's zero point per tensor or per row, b's per
    tensor or per column."""
    a_c = _exact(ctx, a, a_zero, axis=max(len(a.shape) - 2, 0))
    b_c = _exact(ctx, b, b_zero, axis=len(b.shape) - 1)
    product = lookup("", "MatMul", ctx.opset).fn(ctx, node, [a_c, b_c])[0]
    return ctx.emit1("Cast", [product], {"to": "int32"})


def _optional(ins: list, index: int):
    return ins[index] if len(ins) > index else None


@converter("MatMulInteger", since=10)
def matmul_integer(ctx, node, ins):
    return [_integer_matmul(ctx, node, ins[0], ins[1], _optional(ins, 2), _optional(ins, 3))]


@converter("QLinearMatMul", since=10)
def qlinear_matmul(ctx, node, ins):
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = ins
    if b.const is not None and a_scale.type.size == 1 and len(b.shape) == 2:
        real = lookup("", "MatMul", ctx.opset).fn(ctx, node, [dequantize(ctx, a, a_scale, a_zero),
                                                              dequantize(ctx, b, b_scale, b_zero, axis=1)])[0]
        return [_requantize(ctx, real, y_scale, y_zero)]
    acc = _integer_matmul(ctx, node, a, b, a_zero, b_zero)
    a_scale, b_scale, y_scale = (_float32(ctx, v) for v in (a_scale, b_scale, y_scale))
    if a_scale.type.size > 1:  # per row of A
        a_scale = ctx.emit1("Reshape", [a_scale], {"shape": (a_scale.type.size, 1)})
    real = ctx.emit1("Mul", [ctx.emit1("Cast", [acc], {"to": "float32"}), ctx.emit1("Mul", [a_scale, b_scale])])
    return [_requantize(ctx, real, y_scale, y_zero)]


def _requantize(ctx, real, y_scale, y_zero):
    for p in (y_scale, y_zero):
        if p.type.size != 1:
            raise Unsupported("a per-axis output scale or zero point")
    y_scale = ctx.emit1("Reshape", [y_scale], {"shape": ()})
    return quantize(ctx, real, y_scale, ctx.emit1("Reshape", [y_zero], {"shape": ()}))


def _integer_conv(ctx, node, x, w, x_zero, w_zero):
    """Conv of (x - x_zero) and (w - w_zero, per tensor or per output channel) in int32;
    padding adds true zeros, as padding x with x_zero would."""
    if len(w.shape) < 3:
        raise Unsupported(f"integer convolution with weight of shape {tuple(w.shape)}")
    y = lookup("", "Conv", ctx.opset).fn(ctx, node, [_exact(ctx, x, x_zero, axis=1), _exact(ctx, w, w_zero, axis=0)])[0]
    return ctx.emit1("Cast", [y], {"to": "int32"})


@converter("ConvInteger", since=10)
def conv_integer(ctx, node, ins):
    return [_integer_conv(ctx, node, ins[0], ins[1], _optional(ins, 2), _optional(ins, 3))]


@converter("QLinearConv", since=10)
def qlinear_conv(ctx, node, ins):
    """With constant weights, the QDQ form (DequantizeLinear -> Conv -> QuantizeLinear) the
    int8 pass runs as one int8 kernel; otherwise exact integer products emulated in float64."""
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = ins[:8]
    bias = _optional(ins, 8)
    if w.const is not None and x_scale.type.size == 1 and (bias is None or bias.const is not None):
        xf, wf = dequantize(ctx, x, x_scale, x_zero), dequantize(ctx, w, w_scale, w_zero, axis=0)
        operands = [xf, wf]
        if bias is not None:
            bias_scale = ctx.emit1("Mul", [_float32(ctx, x_scale), _float32(ctx, w_scale)])
            operands.append(dequantize(ctx, bias, bias_scale, None, axis=0))
        real = lookup("", "Conv", ctx.opset).fn(ctx, node, operands)[0]
        return [_requantize(ctx, real, y_scale, y_zero)]
    acc = _integer_conv(ctx, node, x, w, x_zero, w_zero)
    spatial = (1,) * (len(acc.shape) - 2)
    if bias is not None:
        acc = ctx.emit1("Add", [acc, ctx.emit1("Reshape", [bias], {"shape": (bias.type.size,) + spatial})])
    x_scale, w_scale, y_scale = (_float32(ctx, v) for v in (x_scale, w_scale, y_scale))
    w_scale = ctx.emit1("Reshape", [w_scale], {"shape": (w_scale.type.size,) + spatial})
    x_scale = ctx.emit1("Reshape", [x_scale], {"shape": ()})
    real = ctx.emit1("Mul", [ctx.emit1("Cast", [acc], {"to": "float32"}), ctx.emit1("Mul", [x_scale, w_scale])])
    return [_requantize(ctx, real, y_scale, y_zero)]


# -- onnxruntime's quantized operators (domain com.microsoft, quantize_static's QOperator format)

_MS = "com.microsoft"


@converter("QLinearAdd", since=1, domain=_MS)
def qlinear_add(ctx, node, ins):
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale = ins[:7]
    real = ctx.emit1("Add", [dequantize(ctx, a, a_scale, a_zero), dequantize(ctx, b, b_scale, b_zero)])
    return [_requantize(ctx, real, y_scale, _optional(ins, 7) or _zero(ctx, None, np.dtype(a.dtype)))]


@converter("QLinearGlobalAveragePool", since=1, domain=_MS)
def qlinear_global_average_pool(ctx, node, ins):
    x, x_scale, x_zero, y_scale, y_zero = ins
    if ctx.attrs(node).get("channels_last", 0):
        raise Unsupported("QLinearGlobalAveragePool with channels_last")
    pooled = lookup("", "GlobalAveragePool", ctx.opset).fn(ctx, node, [dequantize(ctx, x, x_scale, x_zero)])[0]
    return [_requantize(ctx, pooled, y_scale, y_zero)]


@converter("QGemm", since=1, domain=_MS)
def qgemm(ctx, node, ins):
    """alpha * A'B' + C with quantized A and B (C int32 in units of a_scale*b_scale); the
    output quantized when y_scale is given, else float32."""
    a_attr = ctx.attrs(node)
    a, a_scale, a_zero, b, b_scale, b_zero = ins[:6]
    bias, y_scale, y_zero = _optional(ins, 6), _optional(ins, 7), _optional(ins, 8)
    if float(a_attr.get("alpha", 1.0)) != 1.0:
        raise Unsupported("QGemm with alpha != 1")
    trans_b = int(a_attr.get("transB", 0))
    operands = [dequantize(ctx, a, a_scale, a_zero), dequantize(ctx, b, b_scale, b_zero, axis=0 if trans_b else 1)]
    if bias is not None:
        bias_scale = ctx.emit1("Mul", [_float32(ctx, a_scale), _float32(ctx, b_scale)])
        operands.append(dequantize(ctx, bias, bias_scale, None, axis=0))
    real = lookup("", "Gemm", ctx.opset).fn(ctx, node, operands)[0]  # QGemm's attributes are Gemm's
    if y_scale is None:
        return [real]
    return [_requantize(ctx, real, y_scale, y_zero if y_zero is not None else _zero(ctx, None, np.dtype(np.uint8)))]


@converter("QLinearConcat", since=1, domain=_MS)
def qlinear_concat(ctx, node, ins):
    """Inputs y_scale, y_zero, then (x, x_scale, x_zero) per operand."""
    y_scale, y_zero, rest = ins[0], ins[1], ins[2:]
    if len(rest) % 3 or not rest:
        raise Unsupported(f"QLinearConcat with {len(ins)} inputs (expected 2 + 3 per operand)")
    parts = [dequantize(ctx, rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
    joined = lookup("", "Concat", ctx.opset).fn(ctx, node, parts)[0]  # reads the node's axis
    return [_requantize(ctx, joined, y_scale, y_zero)]
