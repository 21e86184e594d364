"""What the ONNX importer shares with its converters: element types as numpy dtypes and the
import-time sequence value (the exceptions a converter raises are in hobbit.errors).

Kept apart from the importer (importer.py) so that the converters (ops/) import
these without importing the importer, which imports them to fill its table."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx

from hobbit.errors import UnsupportedItem, UnsupportedModelError
from hobbit.graph.ir import Value

ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_,
    onnx.TensorProto.BFLOAT16: ml_dtypes.bfloat16,
}


def onnx_dtype(elem_type: int, where: str) -> np.dtype:
    if elem_type not in ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise UnsupportedModelError([UnsupportedItem("dtype", "", 0, where, f"element type {name} is not supported")])
    return np.dtype(ONNX_DTYPES[elem_type])


@dataclass
class Sequence:
    """An ONNX sequence during import: a list of tensors of one dtype, its length known at
    compile time (see ops/sequence.py). Only its tensors reach the graph."""

    items: list[Value]
    dtype: np.dtype
    const = None

