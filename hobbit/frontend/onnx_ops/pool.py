"""Converters for MaxPool, AveragePool and the global pools.

2-D pools map onto the graph ops directly (auto_pad resolved to explicit pads);
1-D pools become 2-D pools over a height-1 view; global pools are reductions
over every spatial dim."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.converters import converter
from hobbit.frontend.onnx import Unsupported
from hobbit.frontend.onnx_ops.nn import resolve_pads


def _pool(ctx, node, ins, op: str) -> list:
    a = ctx.attrs(node)
    x = ins[0]
    dtype = np.dtype(x.dtype)
    if not (dtype.kind == "f" and dtype.itemsize >= 4) and not (op == "MaxPool" and dtype.kind in "iu"):
        raise Unsupported(f"{op} on {dtype.name} tensors")
    if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
        raise Unsupported("the Indices output of MaxPool")
    spatial = len(x.shape) - 2
    if spatial not in (1, 2):
        raise Unsupported(f"{spatial}-D pooling (only 1-D and 2-D are supported)")
    if "kernel_shape" not in a:
        raise Unsupported(f"{op} without kernel_shape")
    kernel = tuple(int(v) for v in a["kernel_shape"])
    strides = tuple(int(v) for v in a.get("strides", [1] * spatial))
    dilations = tuple(int(v) for v in a.get("dilations", [1] * spatial))
    if len(kernel) != spatial or len(strides) != spatial or len(dilations) != spatial:
        raise Unsupported(f"kernel_shape/strides/dilations do not match a {spatial}-D input")
    pads = resolve_pads(a.get("auto_pad", "NOTSET"), a.get("pads"), tuple(x.shape[2:]), kernel, strides, dilations)
    if spatial == 1:
        kernel, strides, dilations = (1,) + kernel, (1,) + strides, (1,) + dilations
        pads = (0, pads[0], 0, pads[1])
        x = ctx.emit1("Reshape", [x], {"shape": (x.shape[0], x.shape[1], 1, x.shape[2])})
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": tuple(pads),
             "ceil_mode": int(a.get("ceil_mode", 0))}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(a.get("count_include_pad", 0))
    y = ctx.emit1(op, [x], attrs)
    if spatial == 1:
        y = ctx.emit1("Reshape", [y], {"shape": (y.shape[0], y.shape[1], y.shape[3])})
    return [y]


@converter("MaxPool", since=1)
def maxpool(ctx, node, ins):
    return _pool(ctx, node, ins, "MaxPool")


@converter("AveragePool", since=1)
def averagepool(ctx, node, ins):
    return _pool(ctx, node, ins, "AveragePool")


def _global(reduce_op: str):
    def convert(ctx, node, ins):
        x = ins[0]
        if len(x.shape) < 3:
            raise Unsupported(f"global pooling of a rank-{len(x.shape)} tensor")
        if not (np.dtype(x.dtype).kind == "f" and np.dtype(x.dtype).itemsize >= 4):
            raise Unsupported(f"global pooling of {np.dtype(x.dtype).name} tensors")
        return [ctx.emit1(reduce_op, [x], {"axes": tuple(range(2, len(x.shape))), "keepdims": 1})]
    return convert


converter("GlobalAveragePool", since=1)(_global("ReduceMean"))
converter("GlobalMaxPool", since=1)(_global("ReduceMax"))
