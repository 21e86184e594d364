"""Converters for ConvTranspose and the convolutions the 2-D Conv op does not cover.

1-D float32 convolutions become the tuned 2-D Conv over a height-1 view (the
same arithmetic); 3-D ones, other float dtypes and every ConvTranspose become
the direct ConvND op."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.padding import resolve_pads, split_same_padding
from hobbit.frontend.onnx.converters import converter


def _window(a: dict, w, rank: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """kernel, strides and dilations, checked against the weight shape."""
    kernel = tuple(int(k) for k in w.shape[2:])
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != kernel:
        raise Unsupported(f"kernel_shape {a['kernel_shape']} disagrees with weight shape {w.shape}")
    strides = tuple(int(s) for s in a.get("strides", (1,) * rank))
    dilations = tuple(int(d) for d in a.get("dilations", (1,) * rank))
    if len(kernel) != rank or len(strides) != rank or len(dilations) != rank:
        raise Unsupported(f"kernel/strides/dilations do not fit a {rank}-D input")
    if min(strides + dilations, default=1) < 1:
        raise Unsupported(f"strides {strides} and dilations {dilations} must be positive")
    return kernel, strides, dilations


def _check(x, w) -> int:
    rank = len(x.shape) - 2
    if rank < 1 or len(w.shape) != rank + 2:
        raise Unsupported(f"convolution of a rank-{len(x.shape)} input with a rank-{len(w.shape)} weight")
    if np.dtype(x.dtype).kind != "f":
        raise Unsupported(f"convolution of {np.dtype(x.dtype).name} tensors")
    return rank


def _inputs(ins: list) -> list:
    return [ins[0], ins[1]] + ([ins[2]] if len(ins) > 2 and ins[2] is not None else [])


def conv_general(ctx, node, ins) -> list:
    """Conv for inputs the 2-D float32 Conv op does not take (called by the Conv converter)."""
    a = ctx.attrs(node)
    x, w = ins[0], ins[1]
    rank = _check(x, w)
    kernel, strides, dilations = _window(a, w, rank)
    pads = resolve_pads(a.get("auto_pad", "NOTSET"), a.get("pads"), tuple(x.shape[2:]), kernel, strides, dilations)
    group = int(a.get("group", 1))
    if rank == 1 and np.dtype(x.dtype) == np.float32:
        n, c, length = x.shape
        x2 = ctx.emit1("Reshape", [x], {"shape": (n, c, 1, length)})
        w2 = ctx.emit1("Reshape", [w], {"shape": tuple(w.shape[:2]) + (1, kernel[0])})
        bias = _inputs(ins)[2:]
        y = ctx.emit1("Conv", [x2, w2] + bias, {"strides": (1,) + strides, "dilations": (1,) + dilations,
                                                "pads": (0, pads[0], 0, pads[1]), "group": group})
        return [ctx.emit1("Reshape", [y], {"shape": (y.shape[0], y.shape[1], y.shape[3])})]
    return [ctx.emit1("ConvND", _inputs(ins), {"strides": strides, "dilations": dilations, "pads": tuple(pads),
                                               "group": group, "transposed": 0, "output_padding": (0,) * rank})]


def transpose_pads(a: dict, in_sizes: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...],
                   dilations: tuple[int, ...], output_padding: tuple[int, ...]) -> tuple[int, ...]:
    """ConvTranspose pads (begins..., ends...): from output_shape or SAME_* when given, else `pads`."""
    rank = len(kernel)
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER", ""):
        raise Unsupported(f"auto_pad={auto_pad!r}")
    target = a.get("output_shape")
    if target is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [n * s for n, s in zip(in_sizes, strides)]
    if target is None:
        if auto_pad == "VALID":
            return (0,) * (2 * rank)
        pads = tuple(int(p) for p in a.get("pads", (0,) * (2 * rank)))
        if len(pads) != 2 * rank:
            raise Unsupported(f"pads {pads} do not have {2 * rank} entries")
        return pads
    target = [int(t) for t in target][-rank:]
    if len(target) != rank:
        raise Unsupported(f"output_shape {a.get('output_shape')} does not fit a {rank}-D input")
    totals = [s * (n - 1) + extra + (k - 1) * d + 1 - out
              for n, k, s, d, extra, out in zip(in_sizes, kernel, strides, dilations, output_padding, target)]
    return split_same_padding(totals, auto_pad)


@converter("ConvTranspose", since=1)
def conv_transpose(ctx, node, ins):
    a = ctx.attrs(node)
    x, w = ins[0], ins[1]
    rank = _check(x, w)
    kernel, strides, dilations = _window(a, w, rank)
    output_padding = tuple(int(p) for p in a.get("output_padding", (0,) * rank))
    if len(output_padding) != rank:
        raise Unsupported(f"output_padding {output_padding} does not fit a {rank}-D input")
    pads = transpose_pads(a, tuple(x.shape[2:]), kernel, strides, dilations, output_padding)
    return [ctx.emit1("ConvND", _inputs(ins), {"strides": strides, "dilations": dilations, "pads": pads,
                                               "group": int(a.get("group", 1)), "transposed": 1,
                                               "output_padding": output_padding})]
