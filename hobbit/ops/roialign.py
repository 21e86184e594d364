"""RoiAlign: each region of interest of a feature map pooled to a fixed grid of bins.

Inputs X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2, scaled to X by spatial_scale),
batch_indices [R] (the image of X each roi is on), and an int64 extent (None when R is
static): a detector's rois come after NonMaxSuppression, bounded along dim 0
(hobbit.graph.ir.Bounded), and only the first `extent` rois are read and written.
Output [R, C, output_height, output_width].

The rules are onnxruntime's, which the ONNX reference shares: a bin is sampled on a
grid of sampling_ratio x sampling_ratio points (ceil(roi size / bins) per side when 0);
a sample more than one pixel outside the map counts as 0; the others are clamped to the
map and interpolated from their four neighbours; 'max' takes the largest *weighted*
neighbour of each sample, not the largest interpolated value. Coordinates are computed
in the input's float type and in onnxruntime's order, so that the grid sizes (a ceil)
and the edge tests agree with it to the bit."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op


def _infer(node: Node) -> list[TensorType]:
    x, rois, indices = node.inputs[:3]
    if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4 or tuple(indices.shape) != rois.shape[:1]:
        raise ShapeError(f"RoiAlign needs X [N, C, H, W], rois [R, 4] and batch_indices [R], got "
                         f"{x.type}, {rois.type} and {indices.type}")
    n, c, h, w = x.shape
    if rois.shape[0] and n * h * w == 0:
        raise ShapeError(f"RoiAlign of rois on an empty feature map {x.type}")
    a = node.attrs
    if a["output_height"] < 1 or a["output_width"] < 1:
        raise ShapeError(f"RoiAlign output size {a['output_height']}x{a['output_width']} must be positive")
    return [TensorType(x.dtype, (rois.shape[0], c, a["output_height"], a["output_width"]))]


def _flops(node: Node) -> int:
    """Four multiply-adds per sample; an adaptive grid is counted as 2x2 samples per bin."""
    side = node.attrs["sampling_ratio"] or 2
    return node.outputs[0].type.size * side * side * 8


def roi_grid(roi: np.ndarray, a: dict) -> tuple[tuple, tuple]:
    """Per axis (y, then x) of one roi: its start, bin size and samples per bin, in the
    roi's float type."""
    t = roi.dtype.type
    offset = t(0.5) if a["half_pixel"] else t(0.0)
    scale = t(a["spatial_scale"])
    start_w, start_h, end_w, end_h = (v * scale - offset for v in roi)
    sizes = [end_h - start_h, end_w - start_w]
    if not a["half_pixel"]:
        sizes = [max(s, t(1.0)) for s in sizes]  # malformed rois become 1x1, as onnxruntime
    axes = []
    for start, size, bins in zip((start_h, start_w), sizes, (a["output_height"], a["output_width"])):
        grid = a["sampling_ratio"] if a["sampling_ratio"] > 0 else int(np.ceil(size / t(bins)))
        axes.append((start, size / t(bins), grid))
    return axes[0], axes[1]


def axis_samples(start, bin_size, grid: int, bins: int, size: int) -> tuple[np.ndarray, ...]:
    """Sample positions [bins, grid] along one axis: whether each is outside the map, its
    low and high neighbours, and the weights of those (1 - frac, frac)."""
    t = type(start)
    i = np.arange(max(grid, 0), dtype=t)[None, :] + t(0.5)
    coord = (start + np.arange(bins, dtype=t)[:, None] * bin_size) + i * bin_size / t(grid)
    outside = (coord < -1.0) | (coord > size)
    coord = np.where(coord <= 0, t(0), coord)
    low = np.clip(coord, 0, size).astype(np.int64)
    edge = low >= size - 1
    high = np.where(edge, size - 1, low + 1)
    low = np.where(edge, size - 1, low)
    coord = np.where(edge, low.astype(t), coord)
    frac = coord - low.astype(t)
    return outside, low, high, t(1) - frac, frac


def _greater(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """std::max(a, b): b where a < b, else a (a NaN in a is kept)."""
    return np.where(a < b, b, a)


def _one_roi(image: np.ndarray, roi: np.ndarray, a: dict) -> np.ndarray:
    c, h, w = image.shape
    (start_h, bin_h, grid_h), (start_w, bin_w, grid_w) = roi_grid(roi, a)
    t = roi.dtype.type
    oh, ow = a["output_height"], a["output_width"]
    out_y, y_lo, y_hi, hy, ly = axis_samples(start_h, bin_h, grid_h, oh, h)
    out_x, x_lo, x_hi, hx, lx = axis_samples(start_w, bin_w, grid_w, ow, w)
    inside = ~(out_y[:, :, None, None] | out_x[None, None])  # [oh, gh, ow, gw]
    flat = image.reshape(c, h * w)
    terms = []
    for ys, wy in ((y_lo, hy), (y_hi, ly)):
        for xs, wx in ((x_lo, hx), (x_hi, lx)):
            pos = np.where(inside, ys[:, :, None, None] * w + xs[None, None], 0)
            weight = np.where(inside, wy[:, :, None, None] * wx[None, None], t(0))
            terms.append(weight * flat[:, pos])  # [C, oh, gh, ow, gw]
    samples = np.moveaxis(terms[0] + terms[1] + terms[2] + terms[3] if a["mode"] == "avg" else
                          _greater(_greater(_greater(terms[0], terms[1]), terms[2]), terms[3]), 2, 3)
    samples = samples.reshape(c, oh, ow, -1)
    if samples.shape[-1] == 0:
        return np.zeros((c, oh, ow), image.dtype)
    if a["mode"] == "avg":
        return samples.sum(axis=-1, dtype=image.dtype) / t(max(grid_h * grid_w, 1))
    out = samples[..., 0]
    for s in range(1, samples.shape[-1]):
        out = _greater(out, samples[..., s])
    return out


def _reference(ins: list[np.ndarray | None], a: dict) -> list[np.ndarray]:
    x, rois, indices, extent = ins
    n = x.shape[0]
    count = rois.shape[0] if extent is None else int(np.clip(extent, 0, rois.shape[0]))
    out = np.zeros((rois.shape[0], x.shape[1], a["output_height"], a["output_width"]), x.dtype)
    rois = rois.astype(x.dtype)
    for r in range(count):
        b = int(indices[r])
        if not 0 <= b < n:
            raise ShapeError(f"RoiAlign batch index {b} of roi {r} is outside [0, {n})")
        out[r] = _one_roi(x[b], rois[r], a)
    return [out]


register_op(OpDef(
    "RoiAlign", infer=_infer, reference=_reference, flops=_flops, checks_data=True,
    attrs={"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0,
           "spatial_scale": 1.0, "half_pixel": 0},
    doc="pool each roi [R, 4] of X [N, C, H, W] (on image batch_indices [R]) to [C, output_height, "
        "output_width] bins of bilinear samples, mode avg/max, half_pixel offsets (opset 16's "
        "default); input 3: the number of valid rois when they are bounded (None: all)"))
