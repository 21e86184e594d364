"""Unique: the distinct elements (or slices along an axis) of a tensor, with the index of
each one's first occurrence, every element's group (inverse indices) and the counts.

Two ops share one meaning: `Unique` for a constant input, which only ever folds, and
`BoundedUnique` for a run-time input, a bounded op (its output length depends on the
data): Y, indices and counts are stored in their bound shape (the unique axis, or the
flattened input, at full length), hold data in [0, extent) along that axis and zeros
past it; inverse_indices has the static length of the axis; the last output is the
int64 extent.

The order is a total one, the same for the fold and the kernel: sorted=1 sorts slices
lexicographically (their elements in row-major order, the unique axis left out), with
-0.0 equal to 0.0 and every NaN equal to every other and after all numbers (numpy's
`unique`; onnxruntime's map-based kernel gives NaNs no consistent place); sorted=0
keeps the groups in order of first occurrence. A group's representative in Y is its
first occurrence, which is what `indices` points at."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op

_INT64 = np.dtype(np.int64)


def unique_rows(x: np.ndarray, axis: int | None) -> np.ndarray:
    """The slices Unique compares, one row each: [length, slice size] (a column when flattened)."""
    if axis is None:
        return x.reshape(-1, 1)
    size = int(np.prod(x.shape[:axis] + x.shape[axis + 1:], dtype=np.int64))
    return np.moveaxis(x, axis, 0).reshape(x.shape[axis], size)


def _sorted_groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): a stable sort of the rows, and where in it each group starts."""
    keys = rows.astype(np.float32) if rows.dtype == np.dtype(ml_dtypes.bfloat16) else rows
    n = keys.shape[0]
    # lexsort is stable and puts NaNs last; its last key is the primary one.
    order = np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(n)
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    if keys.dtype.kind == "f":
        same |= np.isnan(ordered[1:]) & np.isnan(ordered[:-1])
    starts = np.concatenate([[True], ~np.all(same, axis=1)]) if n else np.zeros(0, bool)
    return order, starts


def unique(x: np.ndarray, axis: int | None, sorted_: bool) -> list[np.ndarray]:
    """[Y, indices, inverse_indices, counts], at their true (data-dependent) lengths."""
    order, starts = _sorted_groups(unique_rows(x, axis))
    group = np.cumsum(starts) - 1
    n = int(starts.sum())
    first = order[starts].astype(np.int64)  # the sort is stable: a group starts at its lowest index
    counts = np.bincount(group, minlength=n).astype(np.int64)
    inverse = np.empty(order.size, np.int64)
    inverse[order] = group
    if not sorted_:
        by_first = np.argsort(first, kind="stable")
        rank = np.empty(n, np.int64)
        rank[by_first] = np.arange(n)
        first, counts, inverse = first[by_first], counts[by_first], rank[inverse]
    y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None else axis)
    return [y, first, inverse, counts]


def _unique_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    return unique(ins[0], a["axis"], bool(a["sorted"]))


def _folded_only(node: Node) -> list[TensorType]:
    raise ShapeError(f"{node.op} needs a compile-time constant input (its output shape depends on the data)")


register_op(OpDef(
    "Unique", infer=_folded_only, reference=_unique_reference, kernel=None, attrs={"axis": None, "sorted": 1},
    doc="unique values (or slices along `axis`), first indices, inverse indices and counts; always folded"))


def unique_length(shape: tuple[int, ...], axis: int | None) -> int:
    """How many elements (flattened) or slices (along `axis`) Unique compares: the bound."""
    return int(np.prod(shape, dtype=np.int64)) if axis is None else shape[axis]


def _bounded_unique_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axis = node.attrs["axis"]
    if not all(isinstance(d, int) for d in x.shape):
        raise ShapeError(f"BoundedUnique needs a static input shape (its bounds come from it), got {x.type}")
    if axis is not None and not 0 <= axis < len(x.shape):
        raise ShapeError(f"BoundedUnique axis {axis} does not fit {x.type}")
    length = unique_length(tuple(x.shape), axis)
    y = tuple(x.shape) if axis is not None else (length,)
    return [TensorType(x.dtype, y), TensorType(_INT64, (length,)), TensorType(_INT64, (length,)),
            TensorType(_INT64, (length,)), TensorType(_INT64, ())]


def _bounded_unique_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, axis = ins[0], a["axis"]
    y, first, inverse, counts = unique(x, axis, bool(a["sorted"]))
    length = unique_length(x.shape, axis)
    along = 0 if axis is None else axis

    def padded(v: np.ndarray, along: int) -> np.ndarray:
        widths = [(0, 0)] * v.ndim
        widths[along] = (0, length - v.shape[along])
        return np.pad(v, widths)

    return [padded(y, along), padded(first, 0), inverse, padded(counts, 0), np.array(first.size, np.int64)]


register_op(OpDef(
    "BoundedUnique", infer=_bounded_unique_infer, reference=_bounded_unique_reference,
    attrs={"axis": None, "sorted": 1},
    doc="Unique of a run-time input: Y, indices and counts at their bound length (data in [0, extent), "
        "zeros past it), inverse indices, and the int64 extent (the number of unique elements or slices)"))
