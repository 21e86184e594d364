"""Reduction ops: ReduceSum, ReduceMean, ReduceMax, ... over a set of axes.

Canonical attributes: `axes` is a sorted tuple of non-negative dims (empty means
nothing is reduced, though pre/post maps such as the square of ReduceSumSquare
still apply) and `keepdims` is 0 or 1. Converters resolve ONNX's attribute vs
input forms, negative axes and noop_with_empty_axes into this."""

from __future__ import annotations

from typing import Callable

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample

# The ReduceX ops; each backend's kernel table says how it combines (hobbit/backend/cpu/reduce.py).
REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
              "ReduceL2", "ReduceLogSum")


def identity(dtype: np.dtype, combine: str) -> float | int:
    """The neutral element of `combine` ("add", "mul", "max", "min") in `dtype`."""
    if combine == "add":
        return 0
    if combine == "mul":
        return 1
    if np.dtype(dtype).kind == "f":
        return -np.inf if combine == "max" else np.inf
    info = np.iinfo(dtype)
    return int(info.min) if combine == "max" else int(info.max)


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def _infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axes = tuple(node.attrs["axes"])
    if any(not 0 <= a < len(x.shape) for a in axes) or len(set(axes)) != len(axes):
        raise ShapeError(f"{node.op} axes {axes} do not fit rank {len(x.shape)}")
    return [TensorType(x.dtype, reduced_shape(tuple(x.shape), axes, bool(node.attrs["keepdims"])))]


_NUMPY: dict[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    "ReduceSum": lambda x, ax: np.sum(x, axis=ax),
    "ReduceMean": lambda x, ax: np.mean(x, axis=ax),
    "ReduceMax": lambda x, ax: np.max(x, axis=ax, initial=identity(x.dtype, "max")),
    "ReduceMin": lambda x, ax: np.min(x, axis=ax, initial=identity(x.dtype, "min")),
    "ReduceProd": lambda x, ax: np.prod(x, axis=ax),
    "ReduceSumSquare": lambda x, ax: np.sum(x * x, axis=ax),
    "ReduceL1": lambda x, ax: np.sum(np.abs(x), axis=ax),
    "ReduceL2": lambda x, ax: np.sqrt(np.sum(x * x, axis=ax)),
    "ReduceLogSum": lambda x, ax: np.log(np.sum(x, axis=ax)),
}


def _reference(op: str):
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        x = ins[0]
        wide = x.astype(np.float64) if x.dtype.kind == "f" else x
        axes = tuple(a["axes"])
        y = _NUMPY[op](wide, axes)
        y = np.reshape(y, reduced_shape(x.shape, axes, bool(a["keepdims"])))
        return [np.asarray(y).astype(x.dtype)]
    return reference


for _name in REDUCE_OPS:
    register_op(OpDef(
        _name, infer=_infer, reference=_reference(_name),
        attrs={"axes": (), "keepdims": 1}, per_sample=per_sample.reduce_not_batch,
        doc=f"{_name} over static axes (sorted, non-negative), keepdims 0/1"))


def _arg_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axis = node.attrs["axis"]
    if not 0 <= axis < len(x.shape):
        raise ShapeError(f"{node.op} axis {axis} does not fit rank {len(x.shape)}")
    shape = reduced_shape(tuple(x.shape), (axis,), bool(node.attrs["keepdims"]))
    if x.shape[axis] == 0 and int(np.prod(shape, dtype=np.int64)):
        raise ShapeError(f"{node.op} over axis {axis} of {x.type}: an empty axis has no position to return")
    return [TensorType(np.dtype(np.int64), shape)]


def _arg_reference(op: str):
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        x, axis = ins[0], a["axis"]
        pick = np.argmax if op == "ArgMax" else np.argmin
        if a["select_last_index"]:
            y = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
        else:
            y = pick(x, axis=axis)
        shape = reduced_shape(x.shape, (axis,), bool(a["keepdims"]))
        return [np.reshape(y, shape).astype(np.int64)]
    return reference


for _name in ("ArgMax", "ArgMin"):
    register_op(OpDef(
        _name, infer=_arg_infer, reference=_arg_reference(_name),
        attrs={"axis": 0, "keepdims": 1, "select_last_index": 0}, per_sample=per_sample.axis_not_batch(),
        doc=f"{_name} over one non-negative axis, int64 indices; ties pick the first (or last) index"))
