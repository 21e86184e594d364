"""Equality of attribute values and constants between two imports of one model.

Batch separability (hobbit.ops.separable) and run-time extents (hobbit.graph.extents) both
compare a model imported at two sizes, attribute by attribute: arrays by dtype, shape and
content (NaN equal to NaN), sequences and mappings element by element, anything else by
type and value."""

from __future__ import annotations

from typing import Any

import numpy as np


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
