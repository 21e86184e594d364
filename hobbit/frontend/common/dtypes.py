"""Element types by their ONNX numbers, and the names models' tensor types are shown with.

The ONNX reader decodes tensors with this table; and every model, whatever its format,
describes its inputs and outputs to users as onnxruntime does (NodeArg's 'tensor(float)',
hobbit.runtime.nodearg), in ONNX's vocabulary. One table serves both, so the two cannot
disagree on which dtypes hobbit has."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx

ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_,
    onnx.TensorProto.BFLOAT16: ml_dtypes.bfloat16,
}

_ELEM_TYPES = {np.dtype(dtype): elem for elem, dtype in ONNX_DTYPES.items()}


def elem_name(elem_type: int) -> str:
    """'float' for TensorProto.FLOAT: onnxruntime's spelling is the lower-cased ONNX enum name."""
    return onnx.TensorProto.DataType.Name(elem_type).lower()


def tensor_type(dtype: np.dtype) -> str:
    """'tensor(float)' for float32."""
    return f"tensor({elem_name(_ELEM_TYPES[np.dtype(dtype)])})"
