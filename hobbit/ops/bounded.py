"""The ops of the bounded-dynamic path (hobbit.graph.ir.Bounded) that other ops' bounded
forms are built from: padding a bounded value, checking a run-time length, and the
gathers, scatter and concatenation that read along a data-dependent dim.

Each takes the run-time extents it needs as int64 scalar inputs (None where a dim is
static) and writes its output in its static bound shape. The frontend
(hobbit.frontend.common.bounded) decides the extents of their outputs."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, get_op, register_op


def _cut(x: np.ndarray, axis: int, extent: int) -> np.ndarray:
    return x[(slice(None),) * axis + (slice(0, extent),)]


def _pad_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, extent = ins[0], int(ins[1])
    out = np.full_like(x, a["value"])
    _cut(out, a["axis"], extent)[...] = _cut(x, a["axis"], extent)
    return [out]


register_op(OpDef(
    "BoundedPad", infer=lambda n: [n.inputs[0].type], reference=_pad_reference,
    attrs={"axis": 0, "value": 0.0},
    doc="a copy of a bounded value with the positions past its extent along `axis` set to "
        "`value` (a reduction's identity, -inf before TopK), so a static kernel can read the "
        "whole bound"))


def _check_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    value, limit = int(ins[0]), int(ins[1])
    if not (value <= limit if a["relation"] == "le" else value == limit) or value < 0:
        raise ShapeError(f"data-dependent length {value} does not fit {limit}")
    return [np.asarray(value, np.int64)]


register_op(OpDef(
    "BoundedCheck", infer=lambda n: [TensorType(np.dtype(np.int64), ())], reference=_check_reference,
    attrs={"relation": "le"}, checks_data=True,
    doc="its first input (a run-time length), checked to be in [0, second] (relation 'le': "
        "TopK's k against the values it ranks) or equal to the second ('eq': two bounded "
        "values combined element by element); a length that does not fit is a RunError"))


def _gather_infer(node: Node) -> list[TensorType]:
    data, indices = node.inputs[:2]
    axis = node.attrs["axis"]
    shape = tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:])
    return [TensorType(data.dtype, shape)]


def _gather_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices, count, dim = ins
    axis = a["axis"]
    dim = data.shape[axis] if dim is None else int(dim)
    out = np.zeros(_gather_infer_shape(data, indices, axis), data.dtype)
    valid = indices if count is None else indices[:int(count)]
    if valid.size and (valid.min() < -dim or valid.max() >= dim):
        raise ShapeError(f"index out of range [{-dim}, {dim})")
    taken = np.take(data, np.where(valid < 0, valid + dim, valid), axis=axis)
    out[(slice(None),) * axis + (slice(0, valid.shape[0]),)] = taken
    return [out]


def _gather_infer_shape(data: np.ndarray, indices: np.ndarray, axis: int) -> tuple[int, ...]:
    return data.shape[:axis] + indices.shape + data.shape[axis + 1:]


register_op(OpDef(
    "BoundedGather", infer=_gather_infer, reference=_gather_reference, attrs={"axis": 0},
    checks_data=True,
    doc="Gather(data, indices) where the indices are bounded along their dim 0 (input 2, their "
        "extent: only that many index rows are read) and/or the data is bounded along `axis` "
        "(input 3: indices are checked against that extent, not the bound)"))


def _gather_nd_infer(node: Node) -> list[TensorType]:
    data, indices = node.inputs[:2]
    q = indices.shape[-1]
    return [TensorType(data.dtype, tuple(indices.shape[:-1]) + tuple(data.shape[q:]))]


def _gather_nd_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices, count = ins
    q = indices.shape[-1]
    out = np.zeros(indices.shape[:-1] + data.shape[q:], data.dtype)
    for row in range(int(count)):
        out[row] = data[tuple(indices[row])]
    return [out]


register_op(OpDef(
    "BoundedGatherND", infer=_gather_nd_infer, reference=_gather_nd_reference, checks_data=True,
    doc="GatherND (batch_dims 0) whose index tuples are bounded along dim 0 (input 2: how many "
        "rows hold tuples); NonZero -> Transpose -> GatherND is how exports filter by score"))


def _concat_infer(node: Node) -> list[TensorType]:
    count, axis = node.attrs["count"], node.attrs["axis"]
    parts = node.inputs[:count]
    shape = list(parts[0].shape)
    shape[axis] = sum(v.shape[axis] for v in parts)
    return [TensorType(parts[0].dtype, tuple(shape))]


def _concat_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    count, axis = a["count"], a["axis"]
    parts, extents = ins[:count], ins[count:]
    valid = [p if e is None else _cut(p, axis, int(e)) for p, e in zip(parts, extents)]
    joined = np.concatenate(valid, axis=axis)
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    out = np.zeros(shape, parts[0].dtype)
    _cut(out, axis, joined.shape[axis])[...] = joined
    return [out]


register_op(OpDef(
    "BoundedConcat", infer=_concat_infer, reference=_concat_reference, attrs={"axis": 0, "count": 0},
    doc="Concat along a bounded dim: `count` parts, then one extent per part (None for a static "
        "part); each part's valid rows follow the previous parts' at a run-time offset"))


def _scatter_infer(node: Node) -> list[TensorType]:
    """ScatterElements' checks of the three tensors' shapes, in their bound shapes."""
    inner = Node("ScatterElements", node.name, list(node.inputs[:3]), node.outputs, node.attrs)
    return get_op("ScatterElements").infer(inner)


def _scatter_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices, updates, count, dim = ins
    rows = indices.shape[0] if count is None else int(count)
    dim = data.shape[a["axis"]] if dim is None else int(dim)
    valid = indices[:rows]
    if valid.size and (valid.min() < -dim or valid.max() >= dim):
        raise ShapeError(f"index out of range [{-dim}, {dim})")
    valid = np.where(valid < 0, valid + dim, valid)  # negatives count from the extent, not the bound
    return get_op("ScatterElements").reference([data, valid, updates[:rows]], a)


register_op(OpDef(
    "BoundedScatterElements", infer=_scatter_infer, reference=_scatter_reference,
    attrs={"axis": 0, "reduction": "none"}, checks_data=True,
    doc="ScatterElements(data, indices, updates) where the indices and updates are bounded along "
        "their dim 0 (input 3, their extent: only that many rows are scattered) and/or the data "
        "is bounded along `axis` (input 4: indices are checked against that extent, not the "
        "bound); torchvision's MultiScaleRoIAlign merges its levels' rows this way"))
