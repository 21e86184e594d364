"""Converters for Conv, Gemm, MatMul and BatchNormalization."""

from __future__ import annotations


import numpy as np

from hobbit.errors import ShapeError, Unsupported
from hobbit.frontend.common.batchnorm import batchnorm_from_statistics
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.common.padding import resolve_pads
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.ops.convnd import conv_general
from hobbit.frontend.onnx.ops.norm import batchnorm_training


@converter("Conv", since=1)
def conv(ctx, node, ins):
    a = ctx.attrs(node)
    x, w = ins[0], ins[1]
    if len(w.shape) != len(x.shape):
        raise ShapeError(f"Conv weight {w.type} does not have the rank of its input {x.type}")
    wide = [None if v is None else widen_half(ctx, v) for v in ins]
    if wide[0] is not x:  # float16/bfloat16: the float32 convolutions, rounded once at the end
        return [narrow(ctx, conv(ctx, node, wide)[0], x.dtype)]
    if len(x.shape) != 4 or np.dtype(x.dtype) != np.float32:
        return conv_general(ctx, node, ins)
    kernel = tuple(w.shape[2:])
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != kernel:
        raise Unsupported(f"kernel_shape {a['kernel_shape']} disagrees with weight shape {w.shape}")
    strides = tuple(a.get("strides", (1, 1)))
    dilations = tuple(a.get("dilations", (1, 1)))
    pads = resolve_pads(a.get("auto_pad", "NOTSET"), a.get("pads"), x.shape[2:], kernel, strides, dilations)
    pads = (pads[0], pads[1], pads[2], pads[3])
    inputs = [x, w] + ([ins[2]] if len(ins) > 2 and ins[2] is not None else [])
    return [ctx.emit1("Conv", inputs, {"strides": strides, "dilations": dilations, "pads": pads,
                                       "group": int(a.get("group", 1))})]


@converter("MatMul", since=1)
def matmul(ctx, node, ins):
    """numpy matmul; 1-D operands become matrices and back; 16-bit floats run in float32."""
    dtype = ins[0].dtype
    a, b = (widen_half(ctx, v) for v in ins)
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise Unsupported("MatMul of a scalar")
    a2 = ctx.emit1("Reshape", [a], {"shape": (1,) + tuple(a.shape)}) if len(a.shape) == 1 else a
    b2 = ctx.emit1("Reshape", [b], {"shape": tuple(b.shape) + (1,)}) if len(b.shape) == 1 else b
    y = ctx.emit1("MatMul", [a2, b2])
    shape = tuple(y.shape)
    if len(a.shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b.shape) == 1:
        shape = shape[:-1]
    return [narrow(ctx, ctx.emit1("Reshape", [y], {"shape": shape}) if shape != tuple(y.shape) else y, dtype)]


@converter("Gemm", since=1)
def gemm(ctx, node, ins):
    """alpha*A'B' + beta*C as MatMul (+ Mul) (+ Add); constant transposes fold away."""
    a_attr = ctx.attrs(node)
    dtype = ins[0].dtype
    a, b = widen_half(ctx, ins[0]), widen_half(ctx, ins[1])
    c = widen_half(ctx, ins[2]) if len(ins) > 2 and ins[2] is not None else None
    if a_attr.get("transA", 0):
        a = ctx.emit1("Transpose", [a], {"perm": (1, 0)})
    if a_attr.get("transB", 0) and b.const is not None:
        # A view, not a folded copy: VGG-16's fc1 weight (411 MB) was held twice at the import's peak.
        b = ctx.const(b.const.T)
    elif a_attr.get("transB", 0):
        b = ctx.emit1("Transpose", [b], {"perm": (1, 0)})
    alpha, beta = float(a_attr.get("alpha", 1.0)), float(a_attr.get("beta", 1.0))
    if alpha != 1.0:
        b = ctx.emit1("Mul", [b, ctx.const(alpha, b.dtype)])
    y = ctx.emit1("MatMul", [a, b])
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.emit1("Mul", [c, ctx.const(beta, c.dtype)])
        y = ctx.emit1("Add", [y, c])
    return [narrow(ctx, y, dtype)]


@converter("BatchNormalization", since=1)
def batchnorm(ctx, node, ins):
    a = ctx.attrs(node)
    epsilon = float(a.get("epsilon", 1e-5))
    if len(ins[0].shape) < 2:
        raise Unsupported("BatchNormalization needs an input of rank >= 2")
    if a.get("training_mode", 0) and ctx.opset >= 14:
        return batchnorm_training(ctx, *ins[:5], epsilon, float(a.get("momentum", 0.9)))
    if a.get("training_mode", 0) or (ctx.opset < 9 and not a.get("is_test", 1) and len(node.output) > 1):
        raise Unsupported("training-mode BatchNormalization before opset 14")
    if any(v.const is None for v in ins[1:5]):
        return [batchnorm_from_statistics(ctx, *ins[:5], epsilon)]
    return [ctx.emit1("BatchNormalization", ins[:5], {"epsilon": epsilon})]
