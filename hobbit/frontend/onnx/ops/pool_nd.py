"""Pools of any spatial rank on top of the 2-D pool ops, and the ops built from pools.

Max and average pools are separable: a 3-D window is a 2-D (H, W) window
followed by a 1-D window along D, because the max of a box is the max of its
row maxima and the mean over a box is the mean of the row means (the element
counts of the box, padded or not, are products of per-axis counts). So a 3-D
pool is two 2-D pools over reshaped views, a 1-D pool one 2-D pool over a
height-1 view. LpPool is a pad-counting average of |x|^p scaled back to a sum,
LRN an average of squares over a window of channels."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.padding import resolve_pads
from hobbit.frontend.onnx.converters import converter
from hobbit.graph.shapes import pool_out_size


def emit_pool(ctx, x, op: str, kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...],
              pads: tuple[int, ...], ceil_mode: int, count_include_pad: int = 0):
    """MaxPool/AveragePool of a [N, C, *spatial] value with 1 to 3 spatial dims, pads (begins..., ends...)."""
    rank = len(kernel)
    attrs = {"ceil_mode": ceil_mode}
    if op == "AveragePool":
        attrs["count_include_pad"] = count_include_pad

    def pool2d(v, k, s, d, p):
        return ctx.emit1(op, [v], {**attrs, "kernel_shape": k, "strides": s, "dilations": d, "pads": p})

    n, c = x.shape[:2]
    if rank == 2:
        return pool2d(x, kernel, strides, dilations, tuple(pads))
    if rank == 1:
        v = ctx.emit1("Reshape", [x], {"shape": (n, c, 1, x.shape[2])})
        y = pool2d(v, (1,) + kernel, (1,) + strides, (1,) + dilations, (0, pads[0], 0, pads[1]))
        return ctx.emit1("Reshape", [y], {"shape": (n, c, y.shape[3])})
    if rank != 3:
        raise Unsupported(f"{rank}-D pooling (1-D to 3-D are supported)")
    depth, h, w = x.shape[2:]
    planes = ctx.emit1("Reshape", [x], {"shape": (n, c * depth, h, w)})
    hw = pool2d(planes, kernel[1:], strides[1:], dilations[1:], (pads[1], pads[2], pads[4], pads[5]))
    oh, ow = hw.shape[2:]
    columns = ctx.emit1("Reshape", [hw], {"shape": (n, c, depth, oh * ow)})
    y = pool2d(columns, (kernel[0], 1), (strides[0], 1), (dilations[0], 1), (pads[0], 0, pads[3], 0))
    return ctx.emit1("Reshape", [y], {"shape": (n, c, y.shape[2], oh, ow)})


def window_attrs(a: dict, x, op: str) -> tuple[tuple[int, ...], ...]:
    """kernel, strides, dilations and explicit pads of a pooling node."""
    spatial = len(x.shape) - 2
    if "kernel_shape" not in a:
        raise Unsupported(f"{op} without kernel_shape")
    kernel = tuple(int(v) for v in a["kernel_shape"])
    strides = tuple(int(v) for v in a.get("strides", [1] * spatial))
    dilations = tuple(int(v) for v in a.get("dilations", [1] * spatial))
    if spatial < 1 or len(kernel) != spatial or len(strides) != spatial or len(dilations) != spatial:
        raise Unsupported(f"kernel_shape/strides/dilations do not match a {spatial}-D input")
    pads = resolve_pads(a.get("auto_pad", "NOTSET"), a.get("pads"), tuple(x.shape[2:]), kernel, strides, dilations)
    return kernel, strides, dilations, tuple(pads)


def _float(x, what: str) -> None:
    dtype = np.dtype(x.dtype)
    if not (dtype.kind == "f" and dtype.itemsize >= 4):
        raise Unsupported(f"{what} of {dtype.name} tensors")


def _power(ctx, x, p: float):
    """|x|^p, as a product for p = 1 and 2."""
    if p == 2:
        return ctx.emit1("Mul", [x, x])
    ax = ctx.emit1("Abs", [x])
    return ax if p == 1 else ctx.emit1("Pow", [ax, ctx.const(p, x.dtype)])


def _root(ctx, x, p: float):
    if p == 1:
        return x
    if p == 2:
        return ctx.emit1("Sqrt", [x])
    return ctx.emit1("Pow", [x, ctx.const(1.0 / p, x.dtype)])


@converter("LpPool", since=1)
def lp_pool(ctx, node, ins):
    a = ctx.attrs(node)
    x = ins[0]
    _float(x, "LpPool")
    p = float(a.get("p", 2))
    if p <= 0:
        raise Unsupported(f"LpPool p={p}")
    kernel, strides, dilations, pads = window_attrs(a, x, "LpPool")
    rank = len(kernel)
    ceil_mode = int(a.get("ceil_mode", 0))
    for d in range(rank):
        sizes = [pool_out_size(x.shape[2 + d], kernel[d], strides[d], dilations[d], pads[d], pads[rank + d], m)
                 for m in (False, True)]
        if ceil_mode and sizes[0] != sizes[1]:
            raise Unsupported("LpPool with ceil_mode windows past the padded input")
    mean = emit_pool(ctx, _power(ctx, x, p), "AveragePool", kernel, strides, dilations, pads, 0, 1)
    total = ctx.emit1("Mul", [mean, ctx.const(float(np.prod(kernel)), x.dtype)])
    return [_root(ctx, total, p)]


@converter("GlobalLpPool", since=1)
def global_lp_pool(ctx, node, ins):
    x = ins[0]
    _float(x, "GlobalLpPool")
    if len(x.shape) < 3:
        raise Unsupported(f"global pooling of a rank-{len(x.shape)} tensor")
    p = float(ctx.attrs(node).get("p", 2))
    if p <= 0:
        raise Unsupported(f"GlobalLpPool p={p}")
    total = ctx.emit1("ReduceSum", [_power(ctx, x, p)], {"axes": tuple(range(2, len(x.shape))), "keepdims": 1})
    return [_root(ctx, total, p)]


@converter("LRN", since=1)
def lrn(ctx, node, ins):
    """x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels)^beta."""
    a = ctx.attrs(node)
    x = ins[0]
    _float(x, "LRN")
    if len(x.shape) < 3:
        raise Unsupported(f"LRN of a rank-{len(x.shape)} tensor")
    size = int(a["size"]) if "size" in a else 0
    if size < 1:
        raise Unsupported("LRN needs a positive size")
    n, c = x.shape[:2]
    rest = int(np.prod(x.shape[2:], dtype=np.int64))
    squares = ctx.emit1("Reshape", [ctx.emit1("Mul", [x, x])], {"shape": (n, 1, c, rest)})
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    mean = emit_pool(ctx, squares, "AveragePool", (size, 1), (1, 1), (1, 1), (before, 0, after, 0), 0, 1)
    mean = ctx.emit1("Reshape", [mean], {"shape": tuple(x.shape)})
    scaled = ctx.emit1("Mul", [mean, ctx.const(float(a.get("alpha", 1e-4)), x.dtype)])
    base = ctx.emit1("Add", [scaled, ctx.const(float(a.get("bias", 1.0)), x.dtype)])
    return [ctx.emit1("Div", [x, ctx.emit1("Pow", [base, ctx.const(float(a.get("beta", 0.75)), x.dtype)])])]
