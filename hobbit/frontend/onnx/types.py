"""What the ONNX importer shares with its converters: element types as numpy dtypes (from the
table that also names every model's tensor types, hobbit.frontend.common.dtypes) and their
names, and the import-time sequence value (the exceptions a converter raises are in hobbit.errors).

Kept apart from the importer (importer.py) so that the converters (ops/) import
these without importing the importer, which imports them to fill its table."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx

from hobbit.errors import UnsupportedItem, UnsupportedModelError
from hobbit.frontend.common.dtypes import ELEMENT_TYPES
from hobbit.graph.ir import Value

# ONNX element type -> numpy dtype (bfloat16 is ml_dtypes', which names its dtype for numpy)
ONNX_DTYPES = {number: np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
               for number, (name, _) in ELEMENT_TYPES.items()}


def elem_name(elem_type: int) -> str:
    """'float' for TensorProto.FLOAT, of any element type, hobbit's or not: onnxruntime's
    spelling is the lower-cased ONNX enum name."""
    return onnx.TensorProto.DataType.Name(elem_type).lower()


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

