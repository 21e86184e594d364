"""Converters for MaxPool, AveragePool and the global pools.

Pools of 1 to 3 spatial dims become the 2-D pool ops (auto_pad resolved to
explicit pads; see pool_nd.py); global pools are reductions over every spatial dim.
float16 and bfloat16 pool in float32 and round once at the end."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.ops.pool_nd import emit_pool, window_attrs


def _pool(ctx, node, ins, op: str) -> list:
    a = ctx.attrs(node)
    model_dtype = np.dtype(ins[0].dtype)
    x = widen_half(ctx, ins[0])
    dtype = np.dtype(x.dtype)
    if not (dtype.kind == "f" and dtype.itemsize >= 4) and not (op == "MaxPool" and dtype.kind in "iu"):
        raise Unsupported(f"{op} on {dtype.name} tensors")
    if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
        raise Unsupported("the Indices output of MaxPool")
    kernel, strides, dilations, pads = window_attrs(a, x, op)
    if all(k == 1 for k in kernel) and all(st == 1 for st in strides) and not any(pads):
        return [ins[0]]  # a 1x1 window at stride 1 (VGG's adaptive pool at 7x7) copies its input
    y = emit_pool(ctx, x, op, kernel, strides, dilations, pads, int(a.get("ceil_mode", 0)),
                  int(a.get("count_include_pad", 0)))
    return [narrow(ctx, y, model_dtype)]


@converter("MaxPool", since=1)
def maxpool(ctx, node, ins):
    return _pool(ctx, node, ins, "MaxPool")


@converter("AveragePool", since=1)
def averagepool(ctx, node, ins):
    return _pool(ctx, node, ins, "AveragePool")


def _global(reduce_op: str):
    def convert(ctx, node, ins):
        x = widen_half(ctx, ins[0])
        if len(x.shape) < 3:
            raise Unsupported(f"global pooling of a rank-{len(x.shape)} tensor")
        if not (np.dtype(x.dtype).kind == "f" and np.dtype(x.dtype).itemsize >= 4):
            raise Unsupported(f"global pooling of {np.dtype(x.dtype).name} tensors")
        y = ctx.emit1(reduce_op, [x], {"axes": tuple(range(2, len(x.shape))), "keepdims": 1})
        return [narrow(ctx, y, np.dtype(ins[0].dtype))]
    return convert


converter("GlobalAveragePool", since=1)(_global("ReduceMean"))
converter("GlobalMaxPool", since=1)(_global("ReduceMax"))
