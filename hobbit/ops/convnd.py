"""ConvND: direct N-D convolution and transposed convolution.

The tuned 2-D float32 Conv (im2col + GEMM microkernel, Winograd, depthwise)
stays the path for 2-D convolutions; ConvND covers what it does not: 3-D (and
other rank) convolutions and every ConvTranspose. It is a plain direct loop
nest, correct for any strides, dilations, pads (negative end pads included:
they crop), groups and output padding.

Inputs X [N, C, *in], W, optional B [OC]. W is [OC, C/group, *k] for a
convolution and [C, OC/group, *k] when `transposed` (ONNX's layouts). pads are
(begins..., ends...)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample


def out_channels(node: Node) -> int:
    w = node.inputs[1].shape
    return w[1] * node.attrs["group"] if node.attrs["transposed"] else w[0]


def spatial_out(a: dict, in_sizes: tuple[int, ...], kernel: tuple[int, ...]) -> tuple[int, ...]:
    rank = len(kernel)
    pads = a["pads"]
    out = []
    for d in range(rank):
        span = (kernel[d] - 1) * a["dilations"][d] + 1
        total = pads[d] + pads[rank + d]
        if a["transposed"]:
            out.append(a["strides"][d] * (in_sizes[d] - 1) + a["output_padding"][d] + span - total)
        else:
            out.append((in_sizes[d] + total - span) // a["strides"][d] + 1)
    return tuple(out)


def _infer(node: Node) -> list[TensorType]:
    x, w = node.inputs[0], node.inputs[1]
    a = node.attrs
    rank = len(x.shape) - 2
    g = a["group"]
    if rank < 1 or len(w.shape) != rank + 2:
        raise ShapeError(f"ConvND expects X and W of equal rank >= 3, got {x.type} and {w.type}")
    if any(len(a[k]) != rank for k in ("strides", "dilations")) or len(a["pads"]) != 2 * rank:
        raise ShapeError(f"ConvND strides/dilations/pads do not fit a {rank}-D convolution")
    c = x.shape[1]
    fits = w.shape[0] == c and c % g == 0 if a["transposed"] else w.shape[0] % g == 0 and w.shape[1] * g == c
    if not fits:
        raise ShapeError(f"ConvND channels of {x.type} do not match W {w.type} with group {g}")
    if len(node.inputs) > 2 and node.inputs[2] is not None and tuple(node.inputs[2].shape) != (out_channels(node),):
        raise ShapeError(f"ConvND bias {node.inputs[2].type} does not match {out_channels(node)} output channels")
    out = spatial_out(a, tuple(x.shape[2:]), tuple(w.shape[2:]))
    if any(o <= 0 for o in out):
        raise ShapeError(f"ConvND output would be empty ({out}) for input {x.type}")
    return [TensorType(x.dtype, (x.shape[0], out_channels(node)) + out)]


def _reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    """The same gather-form sum as the kernel, vectorised over batch and channels."""
    x, w = ins[0].astype(np.float64), ins[1].astype(np.float64)
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    rank, g, transposed = x.ndim - 2, a["group"], a["transposed"]
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    if transposed:  # to [OC, C/g, *k] per group
        w = w.reshape((g, c // g, -1) + kernel).swapaxes(1, 2).reshape((-1, c // g) + kernel)
    oc = w.shape[0]
    out = spatial_out(a, x.shape[2:], kernel)
    y = np.zeros((n, oc) + out)
    ocg, cg = oc // g, c // g
    for taps in np.ndindex(*kernel):
        picks, masks = [], []
        for d in range(rank):
            o = np.arange(out[d])
            if transposed:
                t = o + a["pads"][d] - taps[d] * a["dilations"][d]
                pos, ok = t // a["strides"][d], (t >= 0) & (t % a["strides"][d] == 0)
            else:
                pos = o * a["strides"][d] - a["pads"][d] + taps[d] * a["dilations"][d]
                ok = pos >= 0
            ok &= pos < x.shape[2 + d]
            picks.append(np.clip(pos, 0, x.shape[2 + d] - 1))
            masks.append(ok)
        patch = x[(slice(None), slice(None)) + np.ix_(*picks)]
        patch = patch * _outer(masks)
        for gi in range(g):
            wg = w[(slice(gi * ocg, (gi + 1) * ocg), slice(None)) + taps]
            y[:, gi * ocg:(gi + 1) * ocg] += np.einsum("nc...,oc->no...", patch[:, gi * cg:(gi + 1) * cg], wg)
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * rank)
    return [y.astype(ins[0].dtype)]


def _outer(masks: list[np.ndarray]) -> np.ndarray:
    grid = np.ones((), dtype=bool)
    for m in masks:
        grid = grid[..., None] & m
    return grid


def _flops(node: Node) -> int:
    w = node.inputs[1].shape
    per_output = int(np.prod(w[2:])) * (node.inputs[0].shape[1] // node.attrs["group"])
    return 2 * node.outputs[0].type.size * per_output


register_op(OpDef(
    "ConvND", infer=_infer, reference=_reference, flops=_flops,
    attrs={"strides": (), "dilations": (), "pads": (), "group": 1, "transposed": 0, "output_padding": ()},
    per_sample=per_sample.first_input,
    doc="direct N-D convolution (transposed=1: ConvTranspose, W [C, OC/group, *k]); pads (begins..., ends...), "
        "float dtypes (float16 accumulated in float32)"))
