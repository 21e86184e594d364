"""Index-driven ops: GatherElements, GatherND, ScatterElements, ScatterND,
TensorScatter, OneHot, Trilu, ReverseSequence, CumSum/CumProd, TopK, the fold-only
Unique, and BitCast (a byte copy read as another dtype of the same size).

Canonical attributes: every axis is non-negative; `reduction` is one of none,
add, mul, max, min. Run-time indices are normalised and clamped by the kernels
(see lower/index.py); inference rejects shapes where no index could be valid,
such as gathering from an empty dim."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.graph.registry import OpDef, register_op
from hobbit.lower.half import compute_dtype
from hobbit.lower.index import (
    emit_gather_elements,
    emit_gather_nd,
    emit_reverse_sequence,
    emit_scatter_elements,
    emit_scatter_nd,
    emit_tensor_scatter,
)
from hobbit.lower.copy import emit_strided_copy
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.mask import emit_one_hot, emit_trilu, load_scalar_index
from hobbit.lower.scan import emit_cumulative
from hobbit.lower.topk import emit_top_k


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _check_indices(node: Node, indices: Value) -> None:
    if np.dtype(indices.dtype).kind not in "iu":
        raise ShapeError(f"{node.op} indices must be integers, got {indices.type}")


def _normalised(indices: np.ndarray, dim: int | np.ndarray) -> np.ndarray:
    idx = indices.astype(np.int64)
    return np.where(idx < 0, idx + dim, idx)


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
    return [np.take_along_axis(block, _normalised(indices, data.shape[axis]), axis=axis)]


def _lower_gather_elements(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    emit_gather_elements(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], data.dtype, indices.dtype,
                         tuple(data.shape), tuple(indices.shape), k.node.attrs["axis"], k.threads)


register_op(OpDef(
    "GatherElements", infer=_gather_elements_infer, reference=_gather_elements_reference,
    lower=_lower_gather_elements, attrs={"axis": 0},
    doc="out[i] = data[i with i[axis] = indices[i]]; run-time indices out of range are clamped"))


REDUCTIONS = ("none", "add", "mul", "max", "min")


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
    idx = _normalised(indices, data.shape[axis])
    for where in np.ndindex(*indices.shape):
        target = where[:axis] + (int(idx[where]),) + where[axis + 1:]
        _reduce_at(out, target, updates[where], a["reduction"])
    return [out]


def _lower_scatter_elements(k: KernelArgs) -> None:
    data, indices, _ = k.node.inputs
    emit_scatter_elements(k.kb, k.inputs[0], k.inputs[1], k.inputs[2], k.outputs[0], data.dtype, indices.dtype,
                          tuple(data.shape), tuple(indices.shape), k.node.attrs["axis"], k.node.attrs["reduction"])


register_op(OpDef(
    "ScatterElements", infer=_scatter_elements_infer, reference=_scatter_elements_reference,
    lower=_lower_scatter_elements, attrs={"axis": 0, "reduction": "none"},
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
    flat_data = data.reshape((_size(data.shape[:batch]),) + data.shape[batch:])
    flat_idx = _normalised(indices, np.array(data.shape[batch:batch + q], dtype=np.int64))
    flat_idx = flat_idx.reshape(flat_data.shape[0], -1, q)
    rows = [flat_data[b][tuple(flat_idx[b, n])] for b in range(flat_idx.shape[0]) for n in range(flat_idx.shape[1])]
    return [np.array(rows, dtype=data.dtype).reshape(out_shape)]


def _lower_gather_nd(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    batch, q = k.node.attrs["batch_dims"], indices.shape[-1]
    batches = _size(tuple(data.shape[:batch]))
    count = _size(tuple(indices.shape[batch:-1]))
    emit_gather_nd(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], data.dtype, indices.dtype, batches, count,
                   tuple(data.shape[batch:batch + q]), _size(tuple(data.shape[batch + q:])), k.threads)


register_op(OpDef(
    "GatherND", infer=_gather_nd_infer, reference=_gather_nd_reference, lower=_lower_gather_nd,
    attrs={"batch_dims": 0},
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
    idx = _normalised(indices, np.array(data.shape[:q], dtype=np.int64)).reshape(-1, q)
    flat_updates = updates.reshape((idx.shape[0],) + data.shape[q:])
    for n in range(idx.shape[0]):
        _reduce_at(out, tuple(int(i) for i in idx[n]), flat_updates[n], a["reduction"])
    return [out]


def _lower_scatter_nd(k: KernelArgs) -> None:
    data, indices, _ = k.node.inputs
    q = indices.shape[-1]
    emit_scatter_nd(k.kb, k.inputs[0], k.inputs[1], k.inputs[2], k.outputs[0], data.dtype, indices.dtype,
                    _size(tuple(indices.shape[:-1])), tuple(data.shape[:q]), _size(tuple(data.shape[q:])),
                    k.node.attrs["reduction"])


register_op(OpDef(
    "ScatterND", infer=_scatter_nd_infer, reference=_scatter_nd_reference, lower=_lower_scatter_nd,
    attrs={"reduction": "none"},
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
    out = np.array(cache)
    for prefix in np.ndindex(*cache.shape[:axis]):
        for s in range(steps):
            pos = int(starts[prefix[0]]) + s
            pos = pos % length if a["mode"] == "circular" else min(max(pos, 0), length - 1)
            out[prefix + (pos,)] = update[prefix + (s,)]
    return [out]


def _lower_tensor_scatter(k: KernelArgs) -> None:
    cache, update = k.node.inputs[:2]
    axis = k.node.attrs["axis"]
    starts = k.inputs[2] if len(k.inputs) > 2 else None
    outer, length, inner = _axis_view(tuple(cache.shape), axis)
    emit_tensor_scatter(k.kb, k.inputs[0], k.inputs[1], starts, k.outputs[0], cache.dtype, cache.shape[0], outer,
                        length, update.shape[axis], inner, k.node.attrs["mode"] == "circular")


register_op(OpDef(
    "TensorScatter", infer=_tensor_scatter_infer, reference=_tensor_scatter_reference, lower=_lower_tensor_scatter,
    attrs={"axis": 1, "mode": "linear"},
    doc="copy of the cache with each batch entry's update written from its write index along `axis` "
        "(linear: clamped, circular: modulo the axis)"))


# -- OneHot and Trilu ----------------------------------------------------------------

def _one_hot_infer(node: Node) -> list[TensorType]:
    indices, values = node.inputs
    axis, depth = node.attrs["axis"], node.attrs["depth"]
    if compute_dtype(indices.dtype).kind not in "iuf" or values.type.size != 2:
        raise ShapeError(f"OneHot needs numeric indices and two values, got {indices.type}, {values.type}")
    if not 0 <= axis <= len(indices.shape) or depth < 0:
        raise ShapeError(f"OneHot axis {axis} or depth {depth} does not fit {indices.type}")
    return [TensorType(values.dtype, tuple(indices.shape[:axis]) + (depth,) + tuple(indices.shape[axis:]))]


def _one_hot_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    indices, values = ins
    depth, axis = a["depth"], a["axis"]
    idx = _normalised(indices if indices.dtype.kind in "iu" else np.trunc(indices.astype(np.float64)), depth)
    positions = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (indices.ndim - axis))
    hit = np.expand_dims(idx, axis) == positions
    flat = values.reshape(-1)
    return [np.where(hit, flat[1], flat[0]).astype(values.dtype)]


def _lower_one_hot(k: KernelArgs) -> None:
    indices, values = k.node.inputs
    axis = k.node.attrs["axis"]
    emit_one_hot(k.kb, k.inputs[0], indices.dtype, k.inputs[1], k.outputs[0], values.dtype,
                 _size(tuple(indices.shape[:axis])), k.node.attrs["depth"], _size(tuple(indices.shape[axis:])),
                 k.threads)


register_op(OpDef(
    "OneHot", infer=_one_hot_infer, reference=_one_hot_reference, lower=_lower_one_hot,
    attrs={"depth": 0, "axis": 0},
    doc="values[1] where the position along the new `axis` equals the index (negatives count from the end), "
        "values[0] elsewhere"))


def _trilu_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    k = node.inputs[1] if len(node.inputs) > 1 else None
    if len(x.shape) < 2 or (k is not None and (k.type.size != 1 or np.dtype(k.dtype).kind not in "iu")):
        raise ShapeError(f"Trilu needs a matrix (or batch of them) and an integer k, got {x.type}")
    return [x.type]


def _trilu_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    k = int(np.asarray(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    k = min(max(k, -x.shape[-2] - 1), x.shape[-1] + 1)  # numpy overflows on extreme k
    return [np.triu(x, k) if a["upper"] else np.tril(x, k)]


def _lower_trilu(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    k_value = k.node.inputs[1] if len(k.node.inputs) > 1 else None
    shift = load_scalar_index(k.kb, k.inputs[1] if k_value is not None else None,
                              None if k_value is None else k_value.dtype, 0)
    rows, cols = x.shape[-2], x.shape[-1]
    emit_trilu(k.kb, k.inputs[0], k.outputs[0], x.dtype, shift, _size(tuple(x.shape[:-2])), rows, cols,
               bool(k.node.attrs["upper"]), k.threads)


register_op(OpDef(
    "Trilu", infer=_trilu_infer, reference=_trilu_reference, lower=_lower_trilu, attrs={"upper": 1},
    doc="upper (col - row >= k) or lower (col - row <= k) triangle of the last two dims; k may be a run-time input"))


# -- ReverseSequence -------------------------------------------------------------------

def _reverse_sequence_infer(node: Node) -> list[TensorType]:
    x, lengths = node.inputs
    batch_axis, time_axis = node.attrs["batch_axis"], node.attrs["time_axis"]
    if len(x.shape) < 2 or {batch_axis, time_axis} != {0, 1} or tuple(lengths.shape) != (x.shape[batch_axis],) \
            or np.dtype(lengths.dtype).kind not in "iu":
        raise ShapeError(f"ReverseSequence axes {batch_axis}, {time_axis} and lengths {lengths.type} "
                         f"do not fit {x.type}")
    return [x.type]


def _reverse_sequence_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, lengths = ins
    batch_axis, time_axis = a["batch_axis"], a["time_axis"]
    out = np.array(x)
    steps = x.shape[time_axis]
    for b, n in enumerate(lengths.astype(np.int64)):
        n = min(max(int(n), 0), steps)
        part = [slice(None)] * x.ndim
        part[batch_axis], part[time_axis] = b, slice(0, n)
        out[tuple(part)] = np.flip(x[tuple(part)], axis=time_axis - (batch_axis < time_axis))
    return [out]


def _lower_reverse_sequence(k: KernelArgs) -> None:
    x, lengths = k.node.inputs
    emit_reverse_sequence(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], x.dtype, lengths.dtype, tuple(x.shape),
                          k.node.attrs["batch_axis"], k.node.attrs["time_axis"], k.threads)


register_op(OpDef(
    "ReverseSequence", infer=_reverse_sequence_infer, reference=_reverse_sequence_reference,
    lower=_lower_reverse_sequence, attrs={"batch_axis": 1, "time_axis": 0},
    doc="reverse the first lengths[b] steps along time_axis of every batch entry b (lengths clamped)"))


# -- CumSum and CumProd ---------------------------------------------------------------

def _axis_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) of `shape` around `axis`."""
    return _size(shape[:axis]), shape[axis], _size(shape[axis + 1:])


def _cumulative_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    if not 0 <= node.attrs["axis"] < len(x.shape):
        raise ShapeError(f"{node.op} axis {node.attrs['axis']} does not fit {x.type}")
    return [x.type]


def _cumulative_reference(how: str):
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        x, axis = ins[0], a["axis"]
        if x.shape[axis] == 0:
            return [np.array(x)]
        scan = np.cumsum if how == "add" else np.cumprod
        if a["reverse"]:
            x = np.flip(x, axis)
        y = scan(x, axis=axis, dtype=x.dtype)
        if a["exclusive"]:
            first = np.full_like(np.take(y, [0], axis=axis), 0 if how == "add" else 1)
            y = np.concatenate([first, np.take(y, range(x.shape[axis] - 1), axis=axis)], axis=axis)
        if a["reverse"]:
            y = np.flip(y, axis)
        return [np.ascontiguousarray(y)]
    return reference


def _lower_cumulative(how: str):
    def lower(k: KernelArgs) -> None:
        x = k.node.inputs[0]
        a = k.node.attrs
        outer, length, inner = _axis_view(tuple(x.shape), a["axis"])
        emit_cumulative(k.kb, k.inputs[0], k.outputs[0], x.dtype, outer, length, inner, how,
                        bool(a["exclusive"]), bool(a["reverse"]), k.threads)
    return lower


for _name, _how in (("CumSum", "add"), ("CumProd", "mul")):
    register_op(OpDef(
        _name, infer=_cumulative_infer, reference=_cumulative_reference(_how), lower=_lower_cumulative(_how),
        attrs={"axis": 0, "exclusive": 0, "reverse": 0},
        doc=f"running {'sum' if _how == 'add' else 'product'} along `axis`; exclusive and reverse as in ONNX"))


# -- TopK -------------------------------------------------------------------------------

def _top_k_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axis, k = node.attrs["axis"], node.attrs["k"]
    if not 0 <= axis < len(x.shape) or not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"TopK k={k} on axis {axis} does not fit {x.type}")
    shape = tuple(x.shape[:axis]) + (k,) + tuple(x.shape[axis + 1:])
    return [TensorType(x.dtype, shape), TensorType(np.dtype(np.int64), shape)]


def _top_k_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, axis, k = ins[0], a["axis"], a["k"]
    if a["largest"]:
        key = ~x if x.dtype.kind in "iu" else -x  # order-reversing without integer overflow
    else:
        key = x
    order = np.argsort(key, axis=axis, kind="stable")  # stable: equal values keep ascending indices
    indices = np.take(order, range(k), axis=axis).astype(np.int64)
    return [np.take_along_axis(x, indices, axis=axis), indices]


def _lower_top_k(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    a = k.node.attrs
    outer, length, inner = _axis_view(tuple(x.shape), a["axis"])
    emit_top_k(k.kb, k.inputs[0], k.outputs[0], k.outputs[1], x.dtype, outer, length, inner, a["k"],
               bool(a["largest"]), k.threads)


register_op(OpDef(
    "TopK", infer=_top_k_infer, reference=_top_k_reference, lower=_lower_top_k,
    attrs={"axis": 0, "k": 1, "largest": 1},
    doc="the k largest (or smallest) values along `axis`, sorted, and their int64 indices; "
        "equal values in ascending index order"))


# -- Unique: its output shape depends on the data, so it only ever folds ----------------

def _folded_only(node: Node) -> list[TensorType]:
    raise ShapeError(f"{node.op} needs a compile-time constant input (its output shape depends on the data)")


def _unique_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, axis = ins[0], a["axis"]
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    if not a["sorted"]:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, inverse, counts = first[order], rank[inverse], counts[order]
        y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None else axis)
    return [y, first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)]


register_op(OpDef(
    "Unique", infer=_folded_only, reference=_unique_reference, lower=None, attrs={"axis": None, "sorted": 1},
    doc="unique values (or slices along `axis`), first indices, inverse indices and counts; always folded"))


# -- BitCast ----------------------------------------------------------------------------

def _bit_cast_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    to = np.dtype(node.attrs["to"])
    if to.itemsize != np.dtype(x.dtype).itemsize:
        raise ShapeError(f"BitCast from {x.type} to {to.name} changes the element size")
    return [TensorType(to, x.shape)]


def _lower_bit_cast(k: KernelArgs) -> None:
    """Same-size elements: copying them as the target dtype copies their bits."""
    out = k.node.outputs[0]
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], out.dtype, (out.type.size,), [1], 0, threads=k.threads)


register_op(OpDef(
    "BitCast", infer=_bit_cast_infer, lower=_lower_bit_cast, attrs={"to": "float32"},
    reference=lambda ins, a: [np.ascontiguousarray(ins[0]).view(np.dtype(a["to"]))],
    doc="the input's bits read as dtype `to` of the same size"))
