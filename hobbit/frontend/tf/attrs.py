"""AttrValue and TensorProto messages as the plain Python values graph.py promises.

Why here and not in each reader: GraphDef nodes, function bodies, SignatureDef
TensorInfos and checkpoint entries all carry the same DataType, shape and tensor
encodings; one decoder keeps the rules in one place, notably TensorFlow's rule for
typed value fields: fewer values than elements repeat the last one (none at all means
zeros), the way a splatted constant such as tf.zeros([1000]) is stored."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hobbit.errors import CorruptModelError
from hobbit.frontend.tf.graph import TFDType
from hobbit.frontend.tf.protos import DATA_TYPES, DT_STRING

_NUMPY_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32),
    2: np.dtype(np.float64),
    3: np.dtype(np.int32),
    4: np.dtype(np.uint8),
    5: np.dtype(np.int16),
    6: np.dtype(np.int8),
    9: np.dtype(np.int64),
    10: np.dtype(np.bool_),
    14: np.dtype(ml_dtypes.bfloat16),
    17: np.dtype(np.uint16),
    19: np.dtype(np.float16),
    22: np.dtype(np.uint32),
    23: np.dtype(np.uint64),
}

# Which typed TensorProto field holds the values of each dtype (tensor.proto's comments).
_VALUE_FIELDS: dict[int, str] = {
    1: "float_val",
    2: "double_val",
    3: "int_val",
    4: "int_val",
    5: "int_val",
    6: "int_val",
    9: "int64_val",
    10: "bool_val",
    14: "half_val",
    17: "int_val",
    19: "half_val",
    22: "uint32_val",
    23: "uint64_val",
}


def dtype_of(enum: int) -> np.dtype | TFDType:
    """TensorFlow's DataType enum as a numpy dtype, or a TFDType for the rest (string,
    resource, complex, quantized, an enum value this table does not know)."""
    if enum in _NUMPY_DTYPES:
        return _NUMPY_DTYPES[enum]
    if enum in DATA_TYPES:
        return TFDType(enum, DATA_TYPES[enum])
    if enum - 100 in DATA_TYPES:
        return TFDType(enum, DATA_TYPES[enum - 100] + "_REF")
    return TFDType(enum, f"DT_UNKNOWN_{enum}")


def shape_of(shape, where: str) -> tuple[int | None, ...] | None:
    """A TensorShapeProto as a tuple with None for unknown dims, or None for an unknown
    rank. Only -1 means unknown (TensorFlow refuses other negative sizes): a dim of -7 is
    a damaged or hand-made file, an error naming `where`, not one more unknown dim."""
    if shape.unknown_rank:
        return None
    dims = tuple(dim.size for dim in shape.dim)
    bad = [d for d in dims if d < -1]
    if bad:
        raise CorruptModelError(f"{where}: the shape {list(dims)} has the dim {bad[0]}; a dim is a size >= 0, "
                                "or -1 for an unknown size")
    return tuple(None if d == -1 else d for d in dims)


def tensor_of(tensor, where: str) -> np.ndarray | TFDType:
    """A TensorProto as a numpy array (a view on the message's bytes where it stores
    them raw); a tensor of a dtype numpy lacks is its TFDType, for the converter to
    report. `where` names the file and node for errors."""
    dtype = dtype_of(tensor.dtype)
    shape = shape_of(tensor.tensor_shape, where)
    if shape is None or any(dim is None for dim in shape):
        raise CorruptModelError(f"{where}: a tensor value with an unknown shape {shape}")
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.dtype == DT_STRING:
        return _filled(np.array(list(tensor.string_val), dtype=object), count, where).reshape(shape)
    if isinstance(dtype, TFDType):
        return dtype
    if tensor.tensor_content:
        if len(tensor.tensor_content) != count * dtype.itemsize:
            raise CorruptModelError(
                f"{where}: tensor_content has {len(tensor.tensor_content)} bytes, "
                f"shape {shape} of {dtype} needs {count * dtype.itemsize}"
            )
        return np.frombuffer(tensor.tensor_content, dtype=dtype).reshape(shape)
    field = _VALUE_FIELDS[tensor.dtype]
    if field == "half_val":
        values = np.array(tensor.half_val, dtype=np.int32).astype(np.uint16).view(dtype)
    else:
        values = np.array(getattr(tensor, field), dtype=dtype)
    return _filled(values, count, where).reshape(shape)


def _filled(values: np.ndarray, count: int, where: str) -> np.ndarray:
    if len(values) == count:
        return values
    if len(values) > count:
        raise CorruptModelError(f"{where}: a tensor with {len(values)} values for {count} elements")
    if len(values) == 0:
        return np.zeros(count, dtype=values.dtype) if values.dtype != object else np.full(count, b"", dtype=object)
    return np.concatenate([values, np.full(count - len(values), values[-1], dtype=values.dtype)])


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def attr_value(value, where: str) -> Any:
    """One AttrValue as int, float, bool, str/bytes, dtype, shape tuple, numpy array,
    function name, or a list of these."""
    kind = value.WhichOneof("value")
    if kind == "list":
        return _list_value(value.list, where)
    if kind is None:
        return None
    return _scalar(kind, getattr(value, kind), where)


def _scalar(kind: str, item, where: str) -> Any:
    if kind == "s":
        return _text(item)
    if kind == "type":
        return dtype_of(item)
    if kind == "shape":
        return shape_of(item, where)
    if kind == "tensor":
        return tensor_of(item, where)
    if kind == "func":
        return item.name
    return item


def _list_value(values, where: str) -> list:
    for kind in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
        items = getattr(values, kind)
        if len(items):
            return [_scalar(kind, item, where) for item in items]
    return []


def decode_attrs(attrs, where: str) -> dict[str, Any]:
    """A NodeDef's attr map, decoded; `where` ("file: node 'n'") prefixes errors."""
    return {name: attr_value(value, f"{where} attr '{name}'") for name, value in attrs.items()}
