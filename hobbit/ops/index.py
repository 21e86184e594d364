"""Ops that place, order or accumulate along positions: OneHot, Trilu,
ReverseSequence, CumSum/CumProd, TopK, and BitCast (a byte copy read as another
dtype of the same size). Unique has its own module (hobbit/ops/unique.py).

Canonical attributes: every axis is non-negative. Run-time values that decide
positions (OneHot indices, Trilu's k, sequence lengths) are normalised or
clamped by the kernels, never used as unchecked addresses."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample
from hobbit.ops.norm import axis_infer
from hobbit.ops.scatter import normalised_indices

# -- OneHot and Trilu ----------------------------------------------------------------

def _one_hot_infer(node: Node) -> list[TensorType]:
    indices, values = node.inputs
    axis, depth = node.attrs["axis"], node.attrs["depth"]
    numeric = indices.dtype.kind in "iuf" or indices.dtype == np.dtype(ml_dtypes.bfloat16)
    if not numeric or values.type.size != 2:
        raise ShapeError(f"OneHot needs numeric indices and two values, got {indices.type}, {values.type}")
    if not 0 <= axis <= len(indices.shape) or depth < 0:
        raise ShapeError(f"OneHot axis {axis} or depth {depth} does not fit {indices.type}")
    return [TensorType(values.dtype, tuple(indices.shape[:axis]) + (depth,) + tuple(indices.shape[axis:]))]


def _one_hot_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    indices, values = ins
    depth, axis = a["depth"], a["axis"]
    idx = normalised_indices(indices if indices.dtype.kind in "iu" else np.trunc(indices.astype(np.float64)), depth)
    positions = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (indices.ndim - axis))
    hit = np.expand_dims(idx, axis) == positions
    flat = values.reshape(-1)
    return [np.where(hit, flat[1], flat[0]).astype(values.dtype)]


register_op(OpDef(
    "OneHot", infer=_one_hot_infer, reference=_one_hot_reference,
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


register_op(OpDef(
    "Trilu", infer=_trilu_infer, reference=_trilu_reference, attrs={"upper": 1},
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
    bad = [int(n) for n in lengths.astype(np.int64) if not 0 <= n <= steps]
    if bad:
        raise ShapeError(f"sequence length {bad[0]} is out of range [0, {steps}]")
    for b, n in enumerate(lengths.astype(np.int64)):
        n = int(n)
        part = [slice(None)] * x.ndim
        part[batch_axis], part[time_axis] = b, slice(0, n)
        out[tuple(part)] = np.flip(x[tuple(part)], axis=time_axis - (batch_axis < time_axis))
    return [out]


register_op(OpDef(
    "ReverseSequence", infer=_reverse_sequence_infer, reference=_reverse_sequence_reference,
    attrs={"batch_axis": 1, "time_axis": 0}, checks_data=True,
    doc="reverse the first lengths[b] steps along time_axis of every batch entry b (lengths in [0, steps])"))


# -- CumSum and CumProd ---------------------------------------------------------------

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


for _name, _how in (("CumSum", "add"), ("CumProd", "mul")):
    register_op(OpDef(
        _name, infer=axis_infer, reference=_cumulative_reference(_how),
        attrs={"axis": 0, "exclusive": 0, "reverse": 0}, per_sample=per_sample.axis_not_batch(),
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


register_op(OpDef(
    "TopK", infer=_top_k_infer, reference=_top_k_reference,
    attrs={"axis": 0, "k": 1, "largest": 1}, per_sample=per_sample.axis_not_batch(),
    doc="the k largest (or smallest) values along `axis`, sorted, and their int64 indices; "
        "equal values in ascending index order"))


# -- BitCast ----------------------------------------------------------------------------

def _bit_cast_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    to = np.dtype(node.attrs["to"])
    if to.itemsize != np.dtype(x.dtype).itemsize:
        raise ShapeError(f"BitCast from {x.type} to {to.name} changes the element size")
    return [TensorType(to, x.shape)]


register_op(OpDef(
    "BitCast", infer=_bit_cast_infer, attrs={"to": "float32"},
    reference=lambda ins, a: [np.ascontiguousarray(ins[0]).view(np.dtype(a["to"]))],
    doc="the input's bits read as dtype `to` of the same size"))
