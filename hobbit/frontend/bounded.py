"""Bounded values: the frontend's side of data-dependent dims (see hobbit.graph.ir.Bounded).

An op whose output length depends on the data (NonZero, NonMaxSuppression, Unique,
Compress on a run-time condition, TopK with a run-time k) becomes a Bounded* graph op:
its data outputs have a static upper-bound shape, derived from the input shapes, and
its last output is the int64 extent. The converter marks each data output with
`mark_bounded`; what consumes such a value then either maps elements (and inherits the
mark) or reads along the dim and takes the extent as an input. The static part of a
model never sees any of this: its kernels, plans and speed are those of a model
without data-dependent ops."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Bounded, Value


def mark_bounded(value: Value, axis: int, extent: Value) -> Value:
    """Declare that `value` holds data only in [0, extent) along `axis` of its static shape."""
    if not 0 <= axis < len(value.shape):
        raise ShapeError(f"'{value.name}' has no dim {axis} to bound (shape {value.shape})")
    if extent.dtype != np.dtype(np.int64) or extent.shape != ():
        raise ShapeError(f"the extent of '{value.name}' must be an int64 scalar, got {extent.type}")
    value.bounded = Bounded(axis, extent)
    return value
