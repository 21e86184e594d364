"""Ops that read or write at indices given as data: GatherElements, GatherND,
ScatterElements, ScatterND and TensorScatter.

Canonical attributes: every axis is non-negative; `reduction` is one of none,
add, mul, max, min. Run-time indices are normalised and clamped by the kernels
(see backend/cpu/index.py); inference rejects shapes where no index could be valid,
such as gathering from an empty dim. Scatters apply their updates in index
order, so repeated targets combine (or, without a reduction, the last wins)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.registry import OpDef, register_op


def size_of(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _check_indices(node: Node, indices: Value) -> None:
    if np.dtype(indices.dtype).kind not in "iu":
        raise ShapeError(f"{node.op} indices must be integers, got {indices.type}")


def normalised_indices(indices: np.ndarray, dim: int | np.ndarray) -> np.ndarray:
    idx = indices.astype(np.int64)
    return np.where(idx < 0, idx + dim, idx)


def valid_indices(indices: np.ndarray, dim: int | np.ndarray) -> np.ndarray:
    """normalised_indices, refusing one outside [-dim, dim) as the generated code does
    (hobbit.backend.cpu.index), so folding never answers where a run would raise."""
    idx = indices.astype(np.int64)
    bad = (idx < -np.asarray(dim)) | (idx >= np.asarray(dim))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        limit = int(np.broadcast_to(dim, idx.shape)[where])
        raise ShapeError(f"index {int(idx[where])} at {where} is out of range [{-limit}, {limit - 1}]")
    return normalised_indices(idx, dim)


# -- GatherElements and ScatterElements --------------------------------------------

def _elements_infer(node: Node, indices: Value, updates: Value | None = None) -> None:
    data = node.inputs[0]
    axis = node.attrs["axis"]
    _check_indices(node, indices)
    if len(indices.shape) != len(data.shape) or not 0 <= axis < len(data.shape):
        raise ShapeError(f"{node.op} indices {indices.type} and axis {axis} do not fit data {data.type}")
    if any(i > d for ax, (i, d) in enumerate(zip(indices.shape, data.shape)) if ax != axis):
        raise ShapeError(f"{node.op} indices {indices.type} exceed data {data.type} outside axis {axis}")
    if indices.type.size and data.shape[axis] == 0:
        raise ShapeError(f"{node.op} indexes the empty axis {axis} of {data.type}")
    if updates is not None and (tuple(updates.shape) != tuple(indices.shape) or updates.dtype != data.dtype):
        raise ShapeError(f"{node.op} updates {updates.type} must match indices {indices.type} and data {data.type}")


def _gather_elements_infer(node: Node) -> list[TensorType]:
    data, indices = node.inputs
    _elements_infer(node, indices)
    return [TensorType(data.dtype, tuple(indices.shape))]


def _leading_block(data: np.ndarray, shape: tuple[int, ...], axis: int) -> tuple[slice, ...]:
    """The part of `data` an indices tensor of `shape` ranges over (all of `axis`)."""
    return tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(shape))


def _gather_elements_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices = ins
    axis = a["axis"]
    block = data[_leading_block(data, indices.shape, axis)]
    return [np.take_along_axis(block, valid_indices(indices, data.shape[axis]), axis=axis)]


register_op(OpDef(
    "GatherElements", infer=_gather_elements_infer, reference=_gather_elements_reference,
    attrs={"axis": 0}, checks_data=True,
    doc="out[i] = data[i with i[axis] = indices[i]]; an index out of range is a RunError"))


REDUCTIONS = ("none", "add", "mul", "max", "min")  # what _reduce_at implements; the importer checks against it


def _reduce_at(out: np.ndarray, where: tuple, value: np.ndarray, reduction: str) -> None:
    if reduction == "none":
        out[where] = value
    elif reduction == "add":
        out[where] = out[where] + value
    elif reduction == "mul":
        out[where] = out[where] * value
    elif reduction == "max":
        out[where] = np.maximum(out[where], value)
    else:
        out[where] = np.minimum(out[where], value)


def _scatter_elements_infer(node: Node) -> list[TensorType]:
    data, indices, updates = node.inputs
    _elements_infer(node, indices, updates)
    return [data.type]


def _scatter_elements_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices, updates = ins
    axis = a["axis"]
    out = np.array(data)
    idx = valid_indices(indices, data.shape[axis])
    for where in np.ndindex(*indices.shape):
        target = where[:axis] + (int(idx[where]),) + where[axis + 1:]
        _reduce_at(out, target, updates[where], a["reduction"])
    return [out]


register_op(OpDef(
    "ScatterElements", infer=_scatter_elements_infer, reference=_scatter_elements_reference,
    attrs={"axis": 0, "reduction": "none"}, checks_data=True,
    doc="copy of data with out[i with i[axis] = indices[i]] (reduction)= updates[i], in index order"))


# -- GatherND and ScatterND --------------------------------------------------------

def _gather_nd_infer(node: Node) -> list[TensorType]:
    data, indices = node.inputs
    batch = node.attrs["batch_dims"]
    _check_indices(node, indices)
    if not indices.shape:
        raise ShapeError(f"GatherND indices must have rank >= 1, got {indices.type}")
    q = indices.shape[-1]
    if tuple(indices.shape[:batch]) != tuple(data.shape[:batch]) or batch + q > len(data.shape) \
            or batch >= len(indices.shape):
        raise ShapeError(f"GatherND indices {indices.type} with batch_dims {batch} do not fit data {data.type}")
    if indices.type.size and 0 in data.shape[batch:batch + q]:
        raise ShapeError(f"GatherND indexes an empty dim of {data.type}")
    return [TensorType(data.dtype, tuple(indices.shape[:-1]) + tuple(data.shape[batch + q:]))]


def _gather_nd_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices = ins
    batch, q = a["batch_dims"], indices.shape[-1]
    out_shape = indices.shape[:-1] + data.shape[batch + q:]
    flat_data = data.reshape((size_of(data.shape[:batch]),) + data.shape[batch:])
    flat_idx = valid_indices(indices, np.array(data.shape[batch:batch + q], dtype=np.int64))
    flat_idx = flat_idx.reshape(flat_data.shape[0], -1, q)
    rows = [flat_data[b][tuple(flat_idx[b, n])] for b in range(flat_idx.shape[0]) for n in range(flat_idx.shape[1])]
    return [np.array(rows, dtype=data.dtype).reshape(out_shape)]


register_op(OpDef(
    "GatherND", infer=_gather_nd_infer, reference=_gather_nd_reference,
    attrs={"batch_dims": 0}, checks_data=True,
    doc="slices of data picked by the index tuples in indices' last dim, after `batch_dims` shared dims"))


def _scatter_nd_infer(node: Node) -> list[TensorType]:
    data, indices, updates = node.inputs
    _check_indices(node, indices)
    q = indices.shape[-1] if indices.shape else 0
    expected = tuple(indices.shape[:-1]) + tuple(data.shape[q:])
    if not indices.shape or q > len(data.shape) or tuple(updates.shape) != expected or updates.dtype != data.dtype:
        raise ShapeError(f"ScatterND indices {indices.type} and updates {updates.type} do not fit data {data.type}")
    if indices.type.size and 0 in data.shape[:q]:
        raise ShapeError(f"ScatterND indexes an empty dim of {data.type}")
    return [data.type]


def _scatter_nd_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    data, indices, updates = ins
    q = indices.shape[-1]
    out = np.array(data)
    idx = valid_indices(indices, np.array(data.shape[:q], dtype=np.int64)).reshape(-1, q)
    flat_updates = updates.reshape((idx.shape[0],) + data.shape[q:])
    for n in range(idx.shape[0]):
        _reduce_at(out, tuple(int(i) for i in idx[n]), flat_updates[n], a["reduction"])
    return [out]


register_op(OpDef(
    "ScatterND", infer=_scatter_nd_infer, reference=_scatter_nd_reference,
    attrs={"reduction": "none"}, checks_data=True,
    doc="copy of data with the slices named by indices' last dim (reduction)= updates, in index order"))


# -- TensorScatter: a KV-cache update ------------------------------------------------

def _tensor_scatter_infer(node: Node) -> list[TensorType]:
    cache, update = node.inputs[:2]
    starts = node.inputs[2] if len(node.inputs) > 2 else None
    axis = node.attrs["axis"]
    fits = len(update.shape) == len(cache.shape) and 1 <= axis < len(cache.shape) and update.dtype == cache.dtype \
        and all(u == c for d, (u, c) in enumerate(zip(update.shape, cache.shape)) if d != axis) \
        and update.shape[axis] <= cache.shape[axis]
    if not fits or (starts is not None and tuple(starts.shape) != (cache.shape[0],)):
        raise ShapeError(f"TensorScatter update {update.type} (axis {axis}) does not fit cache {cache.type}")
    return [cache.type]


def _tensor_scatter_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    cache, update = ins[:2]
    axis, length, steps = a["axis"], cache.shape[a["axis"]], update.shape[a["axis"]]
    starts = ins[2] if len(ins) > 2 and ins[2] is not None else np.zeros(cache.shape[0], np.int64)
    if a["mode"] != "circular":
        bad = [int(v) for v in starts if not 0 <= v <= length - steps]
        if bad:
            raise ShapeError(f"write position {bad[0]} is out of range [0, {length - steps}] "
                             f"({steps} steps into a cache of {length})")
    out = np.array(cache)
    for prefix in np.ndindex(*cache.shape[:axis]):
        for s in range(steps):
            pos = int(starts[prefix[0]]) + s
            pos = pos % length if a["mode"] == "circular" else pos
            out[prefix + (pos,)] = update[prefix + (s,)]
    return [out]


register_op(OpDef(
    "TensorScatter", infer=_tensor_scatter_infer, reference=_tensor_scatter_reference,
    attrs={"axis": 1, "mode": "linear"},
    checks_data=True,
    doc="copy of the cache with each batch entry's update written from its write index along `axis` "
        "(linear: must fit, circular: modulo the axis)"))
