"""The element types hobbit has, by their ONNX numbers, and the names models' tensor types are
shown with.

The ONNX reader decodes tensors with this table (hobbit.frontend.onnx.types), and every model,
whatever its format, describes its inputs and outputs to users as onnxruntime does (NodeArg's
'tensor(float)', hobbit.runtime.nodearg), in ONNX's vocabulary. One table serves both, so the
two cannot disagree on which dtypes hobbit has.

It is written out (numbers and names from onnx.proto's TensorProto.DataType, checked against
the onnx package by tests/frontend/common/test_dtypes.py) rather than read from `onnx` and
`ml_dtypes`, and keyed by numpy's dtype names: a worker that unpickles a compiled model
describes its tensors with it, and importing those two packages took 0.9-1.1 s of such a
worker's start on the Zen 3 VM of BENCHMARKS.md's issue-30 section."""

from __future__ import annotations

import numpy as np

# ONNX number: (numpy's dtype name, ONNX's name lower-cased: onnxruntime's spelling)
ELEMENT_TYPES: dict[int, tuple[str, str]] = {
    1: ("float32", "float"), 2: ("uint8", "uint8"), 3: ("int8", "int8"), 4: ("uint16", "uint16"),
    5: ("int16", "int16"), 6: ("int32", "int32"), 7: ("int64", "int64"), 9: ("bool", "bool"),
    10: ("float16", "float16"), 11: ("float64", "double"), 12: ("uint32", "uint32"),
    13: ("uint64", "uint64"), 16: ("bfloat16", "bfloat16"),
}

_SHOWN = dict(ELEMENT_TYPES.values())


def tensor_type(dtype: np.dtype) -> str:
    """'tensor(float)' for float32."""
    return f"tensor({_SHOWN[np.dtype(dtype).name]})"
