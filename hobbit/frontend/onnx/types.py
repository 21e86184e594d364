"""What the ONNX importer shares with its converters: element types as numpy dtypes (the
table itself, which also names every model's tensor types, is hobbit.frontend.common.dtypes)
and the import-time sequence value (the exceptions a converter raises are in hobbit.errors).

Kept apart from the importer (importer.py) so that the converters (ops/) import
these without importing the importer, which imports them to fill its table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from hobbit.errors import UnsupportedItem, UnsupportedModelError
from hobbit.frontend.common.dtypes import ONNX_DTYPES
from hobbit.graph.ir import Value


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

