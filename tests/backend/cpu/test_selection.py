"""The BoundedNonZero and BoundedCompress kernels against the ops' numpy references
(which tests/ops/test_selection.py holds to onnxruntime), on one-node graphs whose data
inputs are graph inputs, so the generated code is what runs.

Only the extent and the data before it are compared: the padding is unspecified. Each
compiled model runs several inputs (sparse with NaN and -0.0, all zero, all non-zero),
so the chunked path's three cases (empty, full and mixed masks) and the element-wise
edge all run on every dtype width."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hobbit
from hobbit.frontend.common.source import Source
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import get_op

BF16 = np.dtype(ml_dtypes.bfloat16)
NONZERO_DTYPES = [np.float32, np.float16, BF16, np.float64, np.int8, np.uint16, np.int32, np.int64, np.uint64,
                  np.bool_]


class _OneNode(Source):
    """A graph built by hand, as a compile() source: one op over graph inputs."""

    format = "graph"

    def __init__(self, op: str, inputs: dict[str, TensorType], attrs: dict):
        self.model, self.op, self.inputs, self.attrs = None, op, inputs, attrs

    def import_graph(self, input_shapes=None, input_values=None) -> Graph:
        opdef = get_op(self.op)
        ins = [Value(name, ty) for name, ty in self.inputs.items()]
        node = Node(self.op, "selection", ins, [Value("data"), Value("extent")], {**opdef.attrs, **self.attrs})
        for out, ty in zip(node.outputs, opdef.infer(node)):
            out.type = ty
        return Graph("one_node", ins, node.outputs, [node])


def _compile(op: str, arrays: dict[str, np.ndarray], **attrs) -> hobbit.CompiledModel:
    types = {n: TensorType(a.dtype, tuple(a.shape)) for n, a in arrays.items()}
    return hobbit.compile(_OneNode(op, types, attrs), threads=1, cache=False)


def _valid(data: np.ndarray, extent: np.ndarray, axis: int) -> np.ndarray:
    return np.take(data, range(int(extent)), axis=axis)


def _assert_bounded(got: list[np.ndarray], want: list[np.ndarray], axis: int) -> None:
    (data, extent), (want_data, want_extent) = got, want
    assert data.shape == want_data.shape and data.dtype == want_data.dtype, (data.shape, want_data.shape)
    assert extent.shape == () and extent.dtype == np.int64
    assert int(extent) == int(want_extent)
    got_valid, want_valid = _valid(data, extent, axis), _valid(want_data, want_extent, axis)
    if got_valid.dtype.itemsize == 2 and got_valid.dtype.kind == "f" or got_valid.dtype == BF16:
        got_valid, want_valid = got_valid.view(np.uint16), want_valid.view(np.uint16)
    np.testing.assert_array_equal(got_valid, want_valid)


def _patterns(shape: tuple[int, ...], dtype, seed: int = 0) -> list[np.ndarray]:
    """Sparse (about one in four non-zero, NaN and -0.0 among floats), all zero, all non-zero."""
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 100, size=shape)
    keep = rng.random(shape) < 0.25
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        sparse = keep
    else:
        sparse = np.where(keep, values, 0).astype(dtype)
        if dtype.kind == "f" or dtype == BF16:
            flat = sparse.reshape(-1)
            flat[::7] = np.nan
            flat[3::11] = -0.0
    return [np.asarray(sparse, dtype), np.zeros(shape, dtype), np.ones(shape, dtype)]


def _check_nonzero(shape: tuple[int, ...], dtype) -> None:
    inputs = _patterns(shape, dtype)
    model = _compile("BoundedNonZero", {"x": inputs[0]})
    reference = get_op("BoundedNonZero").reference
    for x in inputs:
        _assert_bounded(model.run({"x": x}), reference([x], {}), axis=1)


@pytest.mark.parametrize("dtype", NONZERO_DTYPES, ids=lambda d: np.dtype(d).name)
def test_nonzero_every_dtype(dtype):
    """70 = whole chunks plus a ragged edge at every element width (chunks of 16 to 64)."""
    _check_nonzero((2, 3, 70), dtype)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3234,), (5, 3), (2, 1, 130), (2, 3, 2, 5), (0,), (2, 0, 3), (4, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_], ids=lambda d: np.dtype(d).name)
def test_nonzero_ranks_0_to_4_and_empty(shape, dtype):
    _check_nonzero(shape, dtype)


def test_nonzero_coordinates_in_row_major_order():
    x = np.zeros((3, 4, 40), np.float32)
    x[2, 3, 39] = x[0, 0, 0] = x[1, 2, 33] = x[1, 2, 5] = 1
    (data, extent), = [_compile("BoundedNonZero", {"x": x}).run({"x": x})]
    assert int(extent) == 4
    np.testing.assert_array_equal(data[:, :4], [[0, 1, 1, 2], [0, 2, 2, 3], [0, 5, 33, 39]])


# -- BoundedCompress --------------------------------------------------------------------

def _conditions(length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(length)
    return [rng.random(length) < 0.5, np.zeros(length, bool), np.ones(length, bool)]


def _check_compress(x: np.ndarray, condition_length: int, axis: int | None) -> None:
    conditions = _conditions(condition_length)
    model = _compile("BoundedCompress", {"x": x, "condition": conditions[0]}, axis=axis)
    reference = get_op("BoundedCompress").reference
    for condition in conditions:
        _assert_bounded(model.run({"x": x, "condition": condition}), reference([x, condition], {"axis": axis}),
                        axis=0 if axis is None else axis)


@pytest.mark.parametrize("shape,axis,condition_length", [
    ((9, 5), 0, 9), ((9, 5), 1, 5), ((9, 5), 0, 4), ((9, 5), 1, 8), ((3, 6, 4), 1, 6), ((3, 6, 4), 2, 2),
    ((3, 6, 20), 1, 6), ((3, 6, 4), None, 70), ((3, 6, 4), None, 10), ((7,), 0, 7), ((), None, 1),
    ((0, 3), 1, 3), ((3, 0), 0, 3), ((3, 4), 1, 0)])
def test_compress_axes_and_condition_lengths(shape, axis, condition_length):
    """Conditions shorter than the axis drop its end; longer ones only count up to it."""
    _check_compress(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), condition_length, axis)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64, np.int8, np.uint64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_compress_every_dtype(dtype):
    x = (np.arange(4 * 5 * 33) % 7).astype(dtype).reshape(4, 5, 33)
    _check_compress(x, 5, 1)
