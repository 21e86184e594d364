"""Resampling ops whose source positions are known at compile time.

`ResizeNearest` gathers the whole tensor through one source-index table per
dim (nearest-neighbour Resize and Upsample). `ResampleAxis` interpolates along
one axis: output index j is the weighted sum of `taps` input indices, the
tables flattened row by row; positions flagged in `outside` take the
extrapolation value instead (Resize's tf_crop_and_resize)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample


def _nearest_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    sources = node.attrs["sources"]
    if len(sources) != len(x.shape):
        raise ShapeError(f"ResizeNearest has {len(sources)} index tables for {x.type}")
    for size, table in zip(x.shape, sources):
        if any(not 0 <= i < size for i in table):
            raise ShapeError(f"ResizeNearest index outside an axis of length {size}")
    return [TensorType(x.dtype, tuple(len(t) for t in sources))]


def _nearest_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    return [ins[0][np.ix_(*[np.asarray(t, dtype=np.int64) for t in a["sources"]])]]


register_op(OpDef(
    "ResizeNearest", infer=_nearest_infer, reference=_nearest_reference,
    attrs={"sources": ()},
    doc="y[i0, i1, ...] = x[sources[0][i0], sources[1][i1], ...] (nearest-neighbour resampling)"))


def resample_out_size(node: Node) -> int:
    return len(node.attrs["indices"]) // node.attrs["taps"]


def _resample_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    a = node.attrs
    axis = a["axis"]
    if not 0 <= axis < len(x.shape) or a["taps"] < 1 or len(a["indices"]) % a["taps"]:
        raise ShapeError(f"ResampleAxis tables do not fit {x.type} along axis {axis}")
    if len(a["weights"]) != len(a["indices"]) or any(not 0 <= i < x.shape[axis] for i in a["indices"]):
        raise ShapeError(f"ResampleAxis indices outside axis {axis} of {x.type}")
    shape = list(x.shape)
    shape[axis] = resample_out_size(node)
    return [TensorType(x.dtype, tuple(shape))]


def _resample_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    axis, taps = a["axis"], a["taps"]
    indices = np.asarray(a["indices"], dtype=np.int64).reshape(-1, taps)
    weights = np.asarray(a["weights"], dtype=np.float64).reshape(-1, taps)
    gathered = np.take(x.astype(np.float64), indices, axis=axis)  # axis -> (out, taps)
    shape = (1,) * axis + weights.shape + (1,) * (x.ndim - axis - 1)
    y = (gathered * weights.reshape(shape)).sum(axis=axis + 1)
    if a["outside"]:
        mask = np.asarray(a["outside"], dtype=bool).reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        y = np.where(mask, a["extrapolation_value"], y)
    return [y.astype(x.dtype)]


register_op(OpDef(
    "ResampleAxis", infer=_resample_infer, reference=_resample_reference,
    flops=lambda n: 2 * n.outputs[0].type.size * n.attrs["taps"],
    attrs={"axis": 0, "taps": 1, "indices": (), "weights": (), "outside": (), "extrapolation_value": 0.0},
    per_sample=per_sample.axis_not_batch(),
    doc="interpolation along one axis: y[.., j, ..] = sum_t weights[j*taps+t] * x[.., indices[j*taps+t], ..]; "
        "y = extrapolation_value where outside[j] (float dtypes; float16 computed in float32)"))
