"""GatherElements, GatherND, ScatterElements (and Scatter), ScatterND and
TensorScatter against onnxruntime (indices out of range: tests/backend/cpu/test_status.py).

Indices are graph inputs, so the generated kernels are what runs; results are
exact except where a scatter reduction adds or multiplies floats."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ShapeError
from tests.helpers import BF16, DATA_DTYPES, assert_ort_exact, assert_same, make_model, rand, run_hobbit, sample

OPSET = 18  # ScatterElements/ScatterND max and min


def _hobbit(nodes, inputs, outputs, inits=None, opset: int = OPSET) -> list[np.ndarray]:
    return run_hobbit(nodes, inputs, outputs, inits, opset)


# -- GatherElements ------------------------------------------------------------------

@pytest.mark.parametrize("shape,index_shape,axis,index_dtype", [
    ((5,), (7,), 0, np.int64), ((3, 4), (3, 6), 1, np.int32), ((3, 4), (5, 2), -2, np.int64),
    ((2, 3, 5), (2, 2, 4), 1, np.int32), ((2, 3, 4, 5), (1, 3, 2, 5), 3, np.int64),
])
def test_gather_elements(shape, index_shape, axis, index_dtype):
    dim = shape[axis]
    idx = np.random.default_rng(1).integers(-dim, dim, size=index_shape).astype(index_dtype)
    assert_ort_exact([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
                     {"x": rand(*shape), "i": idx}, ["y"])


@pytest.mark.parametrize("dtype", DATA_DTYPES)
def test_gather_elements_dtypes(dtype):
    x = sample((4, 5), dtype)
    idx = np.array([[3, -1, 0, 2, 1], [0, 0, -4, 3, 3]], dtype=np.int64)
    got, = _hobbit([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)], {"x": x, "i": idx}, ["y"])
    assert_same(got, np.take_along_axis(x, idx % 4, axis=0))


def test_gather_elements_constant_indices_out_of_range_is_an_error():
    with pytest.raises(ShapeError, match="out of range"):
        hobbit.compile(make_model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
                              {"x": rand(2, 3)}, ["y"], {"i": np.array([[0, 3]], dtype=np.int64)}))


@pytest.mark.parametrize("op,index_shape", [("Gather", (2,)), ("GatherElements", (3, 2)), ("GatherND", (2, 2))])
def test_indexing_an_empty_dim_is_an_error(op, index_shape):
    """No index into an empty dim is valid, and clamping would have nowhere to go."""
    feeds = {"x": np.zeros((3, 0), np.float32), "i": np.zeros(index_shape, np.int64)}
    attrs = {} if op == "GatherND" else {"axis": 1}
    with pytest.raises(ShapeError, match="empty"):
        hobbit.compile(make_model([helper.make_node(op, ["x", "i"], ["y"], **attrs)], feeds, ["y"]))


# -- GatherND ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,index_shape,batch_dims", [
    ((4, 3), (5, 1), 0), ((4, 3), (2, 3, 2), 0), ((2, 3, 4), (2,), 0), ((2, 3, 4, 5), (2, 4, 2), 1),
    ((2, 3, 4, 5), (2, 3, 2, 1), 2), ((3, 2, 4), (3, 1, 2), 1),
])
def test_gather_nd(shape, index_shape, batch_dims):
    q = index_shape[-1]
    dims = np.array(shape[batch_dims:batch_dims + q])
    rng = np.random.default_rng(2)
    idx = (rng.integers(0, 1 << 20, size=index_shape) % dims - rng.integers(0, 2, size=index_shape) * dims)
    assert_ort_exact([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
                     {"x": rand(*shape), "i": idx.astype(np.int64)}, ["y"])


# -- ScatterElements and Scatter ------------------------------------------------------

REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("shape,index_shape,axis", [((6,), (4,), 0), ((3, 5), (2, 5), 0), ((2, 4, 3), (2, 3, 2), -2)])
def test_scatter_elements(shape, index_shape, axis):
    """One model, one output per reduction; "none" gets distinct targets per scatter line
    (the order among duplicates is undefined there), the reductions get repeats."""
    dim = shape[axis]
    rng = np.random.default_rng(3)
    distinct = np.argsort(rng.random(shape), axis=axis)
    distinct = np.take(distinct, range(index_shape[axis]), axis=axis)[tuple(slice(0, n) for n in index_shape)]
    feeds = {"x": rand(*shape), "distinct": distinct.astype(np.int64),
             "i": rng.integers(-dim, dim, size=index_shape).astype(np.int64), "u": rand(*index_shape, seed=4)}
    nodes = [helper.make_node("ScatterElements", ["x", "distinct" if r == "none" else "i", "u"], [r], axis=axis,
                              reduction=r) for r in REDUCTIONS]
    assert_ort_exact(nodes, feeds, REDUCTIONS, rtol=1e-6, atol=1e-6)


def test_scatter_elements_duplicates_in_order_and_intsample():
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    idx = np.array([[1, 1, -1], [0, 0, 0]], dtype=np.int32)
    updates = np.array([[7, 8, 9], [5, -6, 2]], dtype=np.int32)
    assert_ort_exact([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")],
                     {"x": x, "i": idx, "u": updates}, ["y"])
    got, = _hobbit([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
                   {"x": x, "i": idx, "u": updates}, ["y"])
    assert_same(got, np.array([[0, 8, 2, 3, 9], [2, 6, 7, 8, 9]], dtype=np.int32))


def test_scatter_opset10():
    feeds = {"x": rand(3, 3), "i": np.array([[1, 0, 2], [0, 2, 1]], dtype=np.int64), "u": rand(2, 3, seed=1)}
    assert_ort_exact([helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=0)], feeds, ["y"], opset=10)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_scatter_elements_half_reductions(dtype):
    """16-bit floats combine in float32 and round once per update."""
    x = np.array([[1.5, 2.25, -3.0]], dtype=dtype)
    idx = np.array([[2, 2, 0]], dtype=np.int64)
    u = np.array([[0.5, 4.0, 3.0]], dtype=dtype)
    for reduction, want in (("add", [4.5, 2.25, 1.5]), ("mul", [4.5, 2.25, -6.0]), ("max", [3.0, 2.25, 4.0])):
        got, = _hobbit([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)],
                       {"x": x, "i": idx, "u": u}, ["y"])
        assert_same(got, np.array([want], dtype=dtype))


# -- ScatterND -----------------------------------------------------------------------

@pytest.mark.parametrize("shape,index_shape", [((5, 3), (2, 1)), ((4, 3, 2), (2, 2, 2)), ((3, 4), (4, 2))])
def test_scatter_nd(shape, index_shape):
    """One output per reduction: distinct targets for "none", repeated ones for the rest;
    every other index counts from the end."""
    q = index_shape[-1]
    count = int(np.prod(index_shape[:-1]))
    negative = (np.arange(count) % 2)[:, None]

    def indices(flat: np.ndarray) -> np.ndarray:
        coords = np.stack(np.unravel_index(flat, shape[:q]), axis=-1)
        return (coords - negative * np.array(shape[:q])).reshape(index_shape).astype(np.int64)

    feeds = {"x": rand(*shape), "u": rand(*(index_shape[:-1] + shape[q:]), seed=6),
             "distinct": indices(np.random.default_rng(5).permutation(int(np.prod(shape[:q])))[:count]),
             "i": indices(np.resize([0, 0, 1], count))}
    nodes = [helper.make_node("ScatterND", ["x", "distinct" if r == "none" else "i", "u"], [r], reduction=r)
             for r in REDUCTIONS]
    assert_ort_exact(nodes, feeds, REDUCTIONS, rtol=1e-6, atol=1e-6)


# -- TensorScatter ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,steps,axis", [((2, 6, 3), 2, 1), ((2, 3, 5, 4), 3, -2), ((3, 2, 2, 7), 4, 3)])
@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(shape, steps, axis, mode):
    length = shape[axis]
    update_shape = list(shape)
    update_shape[axis] = steps
    starts = np.arange(shape[0], dtype=np.int64) % (length - steps + 1)
    if mode == "circular":
        starts = starts + length - 1  # wraps around the end
    nodes = [helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], axis=axis, mode=mode),
             helper.make_node("TensorScatter", ["c", "u"], ["z"], axis=axis, mode=mode)]
    assert_ort_exact(nodes, {"c": rand(*shape), "u": rand(*update_shape, seed=1), "w": starts}, ["y", "z"], opset=24)
