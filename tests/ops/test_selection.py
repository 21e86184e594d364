"""ONNX NonZero and Compress on run-time inputs (the bounded ops BoundedNonZero and
BoundedCompress) against onnxruntime, exactly: the numpy references (bound shapes, extent
and the data before it), and compiled models, whose bounded outputs run() cuts to the
extent. The kernels are held to the references over more dtypes and shapes in
tests/backend/cpu/test_selection.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.registry import get_op
from tests.helpers import assert_same, make_model, run_ort


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


# -- ONNX NonZero and Compress on run-time inputs, compiled, against onnxruntime ------------

def _sparse(shape: tuple[int, ...], dtype, seed: int = 0) -> list[np.ndarray]:
    """About one in four non-zero (NaN and -0.0 among floats), all zero, all non-zero."""
    rng = np.random.default_rng(seed)
    keep = rng.random(shape) < 0.25
    sparse = np.where(keep, rng.integers(1, 100, size=shape), 0).astype(dtype)
    if sparse.dtype.kind == "f" and sparse.size:
        sparse.reshape(-1)[::7] = np.nan
        sparse.reshape(-1)[3::11] = -0.0
    return [sparse, np.zeros(shape, dtype), np.ones(shape, dtype)]


def _assert_runs_like_ort(model, feeds_list: list[dict[str, np.ndarray]], threads: int = 1) -> None:
    compiled = hobbit.compile(model, threads=threads)
    for feeds in feeds_list:
        for got, want in zip(compiled.run(feeds), run_ort(model, feeds)):
            assert_same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.int32, np.int64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_nonzero_of_runtime_input_every_dtype(dtype):
    """Every dtype onnxruntime's NonZero implements (the rest: tests/backend/cpu/test_selection.py)."""
    inputs = _sparse((3, 70), dtype)
    model = make_model([helper.make_node("NonZero", ["x"], ["y"])], {"x": inputs[0]}, ["y"], opset=13)
    _assert_runs_like_ort(model, [{"x": x} for x in inputs])


@pytest.mark.parametrize("shape", [(), (3234,), (4, 9), (2, 3, 17), (2, 1, 3, 5), (0,), (3, 0, 2)],
                         ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_nonzero_of_runtime_input_ranks_0_to_4_and_empty(shape):
    inputs = _sparse(shape, np.float32)
    model = make_model([helper.make_node("NonZero", ["x"], ["y"])], {"x": inputs[0]}, ["y"], opset=13)
    _assert_runs_like_ort(model, [{"x": x} for x in inputs])


def test_nonzero_of_a_computed_mask_on_two_threads():
    """The detection pattern, NonZero(scores > threshold), beside a NonZero of the scores
    themselves: two kernels of one module share the lane table."""
    scores = np.random.default_rng(3).random((1, 3234), dtype=np.float32)
    nodes = [helper.make_node("Greater", ["s", "t"], ["m"]), helper.make_node("NonZero", ["m"], ["y"]),
             helper.make_node("NonZero", ["s"], ["z"])]
    model = make_model(nodes, {"s": scores}, ["y", "z"], {"t": np.array(0.9, np.float32)}, opset=13)
    _assert_runs_like_ort(model, [{"s": scores}, {"s": scores * 0}, {"s": scores + 1}], threads=2)


@pytest.mark.parametrize("shape,axis,length", [
    ((6, 4), 0, 6), ((6, 4), 1, 4), ((6, 4), -1, 2), ((6, 4), -2, 9), ((2, 5, 3), 1, 3), ((2, 5, 3), None, 30),
    ((2, 5, 3), None, 7), ((2, 5, 40), 1, 5), ((5,), 0, 5), ((0, 4), 1, 4)])
def test_compress_on_runtime_condition(shape, axis, length):
    """Axes 0, 1, negative and none; conditions shorter than the axis, as long, and longer."""
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    rng = np.random.default_rng(length)
    conditions = [rng.random(length) < 0.5, np.zeros(length, bool), np.ones(length, bool)]
    attrs = {} if axis is None else {"axis": axis}
    model = make_model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)], {"x": x, "c": conditions[0]},
                       ["y"], opset=13)
    _assert_runs_like_ort(model, [{"x": x, "c": c} for c in conditions])


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_compress_on_runtime_condition_every_dtype(dtype):
    """Boxes of a constant table kept where run-time scores pass a threshold."""
    boxes = (np.arange(40 * 4) % 5).astype(dtype).reshape(40, 4)
    scores = np.random.default_rng(5).random(40, dtype=np.float32)
    nodes = [helper.make_node("Greater", ["s", "t"], ["c"]), helper.make_node("Compress", ["b", "c"], ["y"], axis=0)]
    model = make_model(nodes, {"s": scores}, ["y"], {"t": np.array(0.5, np.float32), "b": boxes}, opset=13)
    _assert_runs_like_ort(model, [{"s": scores}, {"s": scores * 0}])


def test_compress_constant_condition_longer_than_the_axis_folds_to_a_gather():
    """The fold path ignores entries past the axis as the bounded op and onnxruntime do."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = make_model([helper.make_node("Compress", ["x", "c"], ["y"], axis=0)], {"x": x}, ["y"],
                       {"c": np.array([1, 0, 1, 1, 1], bool)}, opset=13)
    compiled = hobbit.compile(model)
    assert [n.op for n in compiled.report.graph.nodes] == ["Gather"]
    assert_same(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
