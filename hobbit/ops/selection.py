"""Bounded selection ops: BoundedNonZero and BoundedCompress, the run-time forms of
ONNX NonZero and Compress (constant inputs still fold through NonZero and Gather).

How many elements they select depends on the data, so each data output has a static
bound shape (its largest possible size) and only positions [0, extent) along one
axis hold data; the op's last output is that extent, an int64 scalar. Storage is
row-major in the bound shape, so consumers index with static strides. The numpy
references pad with zeros; kernels leave the padding unspecified."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op

EXTENT = TensorType(np.dtype(np.int64), ())


def nonzero_rank(shape: tuple[int, ...]) -> int:
    """Rows of NonZero's output: a 0-d input is one element of a 1-d one, as onnxruntime
    answers (ONNX's shape inference and reference evaluator give 0 rows instead)."""
    return max(len(shape), 1)


def nonzero_coordinates(x: np.ndarray) -> np.ndarray:
    """int64 [rank, count]: the coordinates of x's non-zero elements (NaN is not zero),
    row-major; a 0-d x counts as a 1-d one."""
    return np.array(np.nonzero(np.atleast_1d(x)), dtype=np.int64).reshape(nonzero_rank(x.shape), -1)


# -- BoundedNonZero ---------------------------------------------------------------------

def _nonzero_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    return [TensorType(np.dtype(np.int64), (nonzero_rank(tuple(x.shape)), x.type.size)), EXTENT]


def _nonzero_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    found = nonzero_coordinates(x)
    out = np.zeros((nonzero_rank(x.shape), x.size), dtype=np.int64)
    out[:, :found.shape[1]] = found
    return [out, np.array(found.shape[1], dtype=np.int64)]


register_op(OpDef(
    "BoundedNonZero", infer=_nonzero_infer, reference=_nonzero_reference,
    doc="coordinates of the non-zero elements (NaN included) in row-major order, int64 [rank, x.size] "
        "bounded along axis 1, and their count"))


# -- BoundedCompress --------------------------------------------------------------------

def compress_view(shape: tuple[int, ...], axis: int | None) -> tuple[int, int, int]:
    """(outer, length, inner) of the input around the compressed axis (None: flattened)."""
    size = int(np.prod(shape, dtype=np.int64))
    if axis is None:
        return 1, size, 1
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _compress_infer(node: Node) -> list[TensorType]:
    x, condition = node.inputs
    axis = node.attrs["axis"]
    if axis is not None and not 0 <= axis < len(x.shape):
        raise ShapeError(f"BoundedCompress axis {axis} does not fit {x.type}")
    if condition.dtype != np.bool_ or len(condition.shape) != 1:
        raise ShapeError(f"BoundedCompress needs a 1-d bool condition, got {condition.type}")
    shape = (x.type.size,) if axis is None else tuple(x.shape)
    return [TensorType(x.dtype, shape), EXTENT]


def _compress_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, condition = ins
    axis = a["axis"]
    data = x.reshape(-1) if axis is None else x
    along = 0 if axis is None else axis
    keep = np.flatnonzero(condition[:data.shape[along]])
    out = np.zeros_like(data)
    index = [slice(None)] * data.ndim
    index[along] = slice(0, len(keep))
    out[tuple(index)] = np.take(data, keep, axis=along)
    return [out, np.array(len(keep), dtype=np.int64)]


register_op(OpDef(
    "BoundedCompress", infer=_compress_infer, reference=_compress_reference, attrs={"axis": None},
    doc="the slices along `axis` (None: elements of the flattened input) where the condition holds, "
        "bounded along that axis by its length, and their count; condition entries past the axis are ignored"))
