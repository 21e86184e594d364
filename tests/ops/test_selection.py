"""The numpy references of BoundedNonZero and BoundedCompress against onnxruntime's
NonZero and Compress: the bound shapes, the extent, and the data before it (exactly).
The kernels are held to these references in tests/lower/test_selection.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.registry import get_op
from tests.helpers import make_model, run_ort


def _infer(op: str, arrays: list[np.ndarray], attrs: dict) -> list[TensorType]:
    node = Node(op, "n", [Value(f"v{i}", TensorType(a.dtype, a.shape)) for i, a in enumerate(arrays)], [], attrs)
    return get_op(op).infer(node)


def _reference(op: str, arrays: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """The reference's outputs, checked to have the shapes and dtypes the op infers."""
    results = get_op(op).reference(arrays, attrs)
    assert [(r.dtype, r.shape) for r in results] == [(t.dtype, t.shape) for t in _infer(op, arrays, attrs)]
    return results


@pytest.mark.parametrize("x", [
    np.array(3.0, np.float32), np.array(0, np.int64), np.zeros((0, 3), np.float32), np.zeros((2, 3), np.bool_),
    np.array([np.nan, -0.0, 0.0, 2.0, -np.inf], np.float32), np.array([[0, 1], [1, 0]], np.float16),
    np.arange(-5, 19, dtype=np.int32).reshape(2, 3, 1, 4) % 3, np.ones((2, 2, 2), np.uint8)],
    ids=lambda x: f"{x.dtype.name}{list(x.shape)}")
def test_nonzero_reference_matches_onnxruntime(x):
    """A 0-d input gives one row, as in onnxruntime (ONNX's shape inference says 0 rows)."""
    want, = run_ort(make_model([helper.make_node("NonZero", ["x"], ["y"])], {"x": x}, ["y"], opset=13), {"x": x})
    data, extent = _reference("BoundedNonZero", [x], {})
    assert data.shape[0] == want.shape[0] and int(extent) == want.shape[1]
    np.testing.assert_array_equal(data[:, :int(extent)], want)


@pytest.mark.parametrize("shape,axis,condition", [
    ((4, 3), 0, [1, 0, 1, 1]), ((4, 3), 1, [0, 1]), ((4, 3), -1, [1, 1, 0, 1, 1]), ((2, 3, 2), None, [0, 1, 1]),
    ((2, 3, 2), None, [1] * 15), ((2, 3, 2), 1, [0, 0, 0]), ((0, 3), 1, [1, 0, 1])])
def test_compress_reference_matches_onnxruntime(shape, axis, condition):
    """Conditions shorter than the axis drop its end; entries past it are ignored, selected or not."""
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    feeds = {"x": x, "c": np.array(condition, bool)}
    attrs = {} if axis is None else {"axis": axis}
    want, = run_ort(make_model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)], feeds, ["y"]), feeds)
    canonical = None if axis is None else axis % len(shape)
    data, extent = _reference("BoundedCompress", [x, feeds["c"]], {"axis": canonical})
    along = 0 if axis is None else canonical
    assert data.shape[:along] + data.shape[along + 1:] == want.shape[:along] + want.shape[along + 1:]
    assert int(extent) == want.shape[along]
    np.testing.assert_array_equal(np.take(data, range(int(extent)), axis=along), want)
