"""Resize as graph ops, for ONNX's Resize and Upsample and TensorFlow's image resizes.

Resize is separable: along each resized axis every output index reads a few
input indices with fixed weights. Scales, sizes and roi are known at compile
time, so the per-axis tables are computed here with ONNX's coordinate rules
(TensorFlow's are among them). Nearest mode becomes one table-driven gather of the
whole tensor (`ResizeNearest`); linear and cubic (with antialias, exclude_outside
and crop-and-resize extrapolation) become one `ResampleAxis` op per resized
axis, applied in the order ONNX applies them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.errors import Unsupported


@dataclass(frozen=True)
class ResizeMode:
    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation_value: float = 0.0


@dataclass(frozen=True)
class AxisTable:
    """Output index j of one axis reads input indices[j] with weights[j]; outside[j]
    marks crop-and-resize positions that take the extrapolation value instead."""

    indices: np.ndarray  # [out, taps] int, inside [0, in)
    weights: np.ndarray  # [out, taps] float64
    outside: np.ndarray  # [out] bool

    def is_identity(self, size: int) -> bool:
        out, taps = self.indices.shape
        if out != size:
            return False
        dense = np.zeros((out, size))
        np.add.at(dense, (np.repeat(np.arange(out), taps), self.indices.reshape(-1)), self.weights.reshape(-1))
        return np.array_equal(dense, np.eye(out)) and not self.outside.any()


def source_coordinates(m: ResizeMode, out: int, size: int, scale: float,
                       roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Input coordinate of each output index, and which ones fall outside (crop-and-resize)."""
    y = np.arange(out, dtype=np.float64)
    length = scale * size  # the unrounded output length
    outside = np.zeros(out, dtype=bool)
    if m.coordinates == "align_corners":
        x = np.zeros(out) if length == 1 else y * (size - 1) / (length - 1)
    elif m.coordinates == "asymmetric":
        x = y / scale
    elif m.coordinates == "tf_crop_and_resize":
        if length == 1:
            x = np.full(out, (roi[1] - roi[0]) * (size - 1) / 2)
        else:
            x = y * (roi[1] - roi[0]) * (size - 1) / (length - 1)
        x = x + roi[0] * (size - 1)
        outside = (x < 0) | (x > size - 1)
    elif m.coordinates == "pytorch_half_pixel":
        x = np.full(out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    elif m.coordinates == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric: the centre of the input maps to the centre of the output
        offset = size / 2 * (1 - out / length)
        x = offset + (y + 0.5) / scale - 0.5
    return x, outside


def _coefficients(m: ResizeMode, ratio: np.ndarray, scale: float) -> np.ndarray:
    """[out, taps] weights of the taps around each coordinate, ratio in (0, 1] past the left tap."""
    r = ratio[:, None]
    if m.mode == "nearest":
        right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                 "floor": np.zeros_like(ratio, dtype=bool), "ceil": np.ones_like(ratio, dtype=bool)}[m.nearest]
        right = right | (ratio == 1.0)
        return np.stack([~right, right], axis=1).astype(np.float64)
    if m.antialias:
        s = min(scale, 1.0)
        reach = 1 if m.mode == "linear" else 2
        start = int(np.floor(-reach / s) + 1)
        dist = np.abs((np.arange(start, 1 - start + 1)[None, :] - r) * s)
        weights = np.clip(1 - dist, 0, 1) if m.mode == "linear" else _cubic(dist, m.cubic_a)
        return weights / weights.sum(axis=1, keepdims=True)
    if m.mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    return _cubic(np.abs(np.concatenate([r + 1, r, 1 - r, 2 - r], axis=1)), m.cubic_a)


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel at distances d >= 0."""
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def axis_table(m: ResizeMode, out: int, size: int, scale: float, roi: tuple[float, float]) -> AxisTable:
    x, outside = source_coordinates(m, out, size, scale, roi)
    base = np.floor(x)
    integral = x == base
    ratio = np.where(integral, 1.0, x - base)
    weights = _coefficients(m, ratio, scale)
    taps = weights.shape[1]
    # Taps are the `taps` nearest indices, the left one preferred on a tie: with an
    # integral coordinate the window starts one further left (its ratio is 1).
    first = base.astype(np.int64) - taps // 2 + np.where(integral, 0, 1)
    indices = first[:, None] + np.arange(taps)[None, :]
    if m.exclude_outside:
        weights = np.where((indices < 0) | (indices >= size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    indices = np.clip(indices, 0, size - 1)
    if m.mode == "nearest":
        pick = np.argmax(weights, axis=1)
        indices = indices[np.arange(out), pick][:, None]
        weights = np.ones((out, 1))
    return AxisTable(indices, weights, outside)


def resize(ctx, x, m: ResizeMode, scales: list[float] | None, sizes: list[int] | None,
           roi: list[float] | None, axes: list[int] | None, policy: str = "stretch"):
    """Emit the resize of x (scales or sizes given per entry of `axes`) and return its value."""
    rank = len(x.shape)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise Unsupported(f"axes {axes} are not distinct axes of a rank-{rank} input")
    given = scales if scales is not None else sizes
    if given is None or len(given) != len(axes):
        raise Unsupported("Resize needs exactly one of scales and sizes, one entry per axis")
    in_sizes = [int(x.shape[a]) for a in axes]
    if scales is not None:
        if any(s <= 0 for s in scales):
            raise Unsupported(f"scales {scales} must be positive")
        outs = [int(np.float64(s) * n) for s, n in zip(scales, in_sizes)]
    else:
        scales = [o / n if n else 1.0 for o, n in zip(sizes, in_sizes)]
        outs = list(sizes)
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise Unsupported(f"keep_aspect_ratio_policy={policy!r}")
            common = min(scales) if policy == "not_larger" else max(scales)
            scales = [common] * len(axes)
            outs = [int(common * n + 0.5) for n in in_sizes]
    if any(o <= 0 < n or (n == 0 and o != 0) for o, n in zip(outs, in_sizes)):
        raise Unsupported(f"Resize output sizes {outs} must be positive (zero only where the input "
                          f"size {in_sizes} is zero)")
    if 0 in in_sizes:  # an empty tensor resizes to an empty tensor: nothing to compute
        shape = list(x.shape)
        for axis, out in zip(axes, outs):
            shape[axis] = out
        return ctx.const(np.zeros(shape, dtype=x.dtype))
    if roi is not None and len(roi) != 2 * len(axes):
        if len(roi) != 2 * rank:
            raise Unsupported(f"roi has {len(roi)} entries, expected {2 * len(axes)}")
        roi = [roi[a] for a in axes] + [roi[rank + a] for a in axes]
    tables = {}
    for i, axis in enumerate(axes):
        pair = (roi[i], roi[len(axes) + i]) if roi is not None else (0.0, 1.0)
        table = axis_table(m, outs[i], in_sizes[i], float(scales[i]), pair)
        if not table.is_identity(in_sizes[i]):
            tables[axis] = table
    if not tables:
        return ctx.emit1("Copy", [x])
    if m.mode == "nearest" and not any(t.outside.any() for t in tables.values()):
        sources = tuple(tuple(int(v) for v in tables[d].indices[:, 0]) if d in tables else tuple(range(x.shape[d]))
                        for d in range(rank))
        return ctx.emit1("ResizeNearest", [x], {"sources": sources})
    if np.dtype(x.dtype).kind != "f":
        raise Unsupported(f"{m.mode} Resize of {np.dtype(x.dtype).name} tensors")
    for axis in axes:
        if axis in tables:
            t = tables[axis]
            x = ctx.emit1("ResampleAxis", [x], {
                "axis": axis, "taps": t.indices.shape[1],
                "indices": tuple(int(v) for v in t.indices.reshape(-1)),
                "weights": tuple(float(v) for v in t.weights.reshape(-1)),
                "outside": tuple(int(v) for v in t.outside) if t.outside.any() else (),
                "extrapolation_value": m.extrapolation_value})
    return x
