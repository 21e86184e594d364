"""GridSample: sample X at the normalised coordinates a grid gives per output position.

Inputs X [N, C, *in] (2 or 3 spatial dims) and grid [N, *out, rank] (the last
axis lists x, y[, z]: innermost dim first). attrs: mode nearest / linear /
cubic (cubic for 2-D only), padding_mode zeros / border / reflection,
align_corners. The numpy reference follows the same per-dim tap rules as the
kernel (backend/cpu/gridsample.py)."""

from __future__ import annotations

import itertools

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op

CUBIC_A = -0.75


def _infer(node: Node) -> list[TensorType]:
    x, grid = node.inputs
    rank = len(x.shape) - 2
    if rank not in (2, 3) or len(grid.shape) != rank + 2 or grid.shape[-1] != rank or grid.shape[0] != x.shape[0]:
        raise ShapeError(f"GridSample needs X [N, C, *in] and grid [N, *out, {rank}], got {x.type} and {grid.type}")
    return [TensorType(x.dtype, tuple(x.shape[:2]) + tuple(grid.shape[1:-1]))]


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below = x < lo
    dx = np.where(below, lo - x, x - hi)
    folds = np.floor(dx / span)
    rest = dx - folds * span
    even = folds % 2 == 0
    outside = np.where(below, np.where(even, lo + rest, hi - rest), np.where(even, hi - rest, lo + rest))
    return np.where((x < lo) | (x > hi), outside, x)


def _cubic(d: np.ndarray) -> np.ndarray:
    a = CUBIC_A
    d = np.abs(d)
    return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a)


def axis_taps(x: np.ndarray, size: int, a: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    lo, hi = (0.0, size - 1.0) if a["align_corners"] else (-0.5, size - 0.5)
    if a["mode"] == "nearest":
        x = np.rint(x)
    outside = (x < lo) | (x > hi)
    if a["padding_mode"] == "border":
        x = np.where(outside, np.clip(x, 0, size - 1), x)
    elif a["padding_mode"] == "reflection":
        x = _reflect(x, lo, hi)
    if a["mode"] == "nearest":
        first, weights = x, [np.ones_like(x)]
    else:
        first = np.floor(x)
        t = x - first
        weights = [1 - t, t] if a["mode"] == "linear" else [_cubic(t + 1), _cubic(t), _cubic(1 - t), _cubic(2 - t)]
        first = first - (a["mode"] == "cubic")
    taps = []
    for k, w in enumerate(weights):
        i = first + k
        if a["padding_mode"] == "reflection":
            i = np.trunc(_reflect(i, lo, hi))
        elif a["padding_mode"] == "zeros":
            w = np.where((i >= 0) & (i < size), w, 0.0)
        taps.append((np.clip(i, 0, size - 1).astype(np.int64), w))
    return taps


def _reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, grid = ins[0], ins[1].astype(np.float64)
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    rank = len(sizes)
    out = np.zeros((n, c) + grid.shape[1:-1])
    per_dim = []
    for d in range(rank):
        v = grid[..., rank - 1 - d]
        coord = (v + 1) / 2 * (sizes[d] - 1) if a["align_corners"] else ((v + 1) * sizes[d] - 1) / 2
        per_dim.append(axis_taps(coord, sizes[d], a))
    batch = np.arange(n).reshape((n,) + (1,) * rank)
    for taps in itertools.product(*per_dim):
        weight = np.prod([w for _, w in taps], axis=0)
        values = x[(batch, slice(None)) + tuple(i for i, _ in taps)]  # [N, *out, C]
        out += np.moveaxis(values, -1, 1) * weight[:, None]
    return [out.astype(x.dtype)]


register_op(OpDef(
    "GridSample", infer=_infer, reference=_reference,
    attrs={"mode": "linear", "padding_mode": "zeros", "align_corners": 0},
    doc="sample X [N, C, *in] at grid [N, *out, rank] (normalised, x first); mode nearest/linear/cubic, "
        "padding_mode zeros/border/reflection; float dtypes (float16 computed in float32)"))
