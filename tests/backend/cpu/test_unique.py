"""The BoundedUnique kernel (hobbit/backend/cpu/unique.py) against the op's numpy reference
(hobbit/ops/unique.py), and the reference against numpy.unique and onnxruntime: every
output in its bound shape, padding included (the kernel writes zeros there, as the
reference does), bit-exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.frontend.common.source import Source
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import get_op
from hobbit.ops.unique import unique
from tests.helpers import BF16, assert_same, make_model, run_ort


@dataclass
class _Nodes(Source):
    """A graph of one BoundedUnique node per (axis, sorted) variant on input x, every
    output a graph output (one compile checks several variants)."""

    x: np.ndarray
    variants: list[tuple[int | None, int]]
    format: str = "graph"

    def import_graph(self, input_shapes=None, input_values=None) -> Graph:
        x = Value("x", TensorType(self.x.dtype, self.x.shape))
        nodes = []
        for n, (axis, sorted_) in enumerate(self.variants):
            node = Node("BoundedUnique", f"unique{n}", [x], [], {"axis": axis, "sorted": sorted_})
            node.outputs = [Value(f"unique{n}:{i}", t) for i, t in enumerate(get_op("BoundedUnique").infer(node))]
            nodes.append(node)
        return Graph("g", [x], [v for node in nodes for v in node.outputs], nodes)


def _check(x: np.ndarray, variants: list[tuple[int | None, int]], threads: int = 1) -> list[list[np.ndarray]]:
    """Each variant's five outputs, checked against the reference."""
    got = hobbit.compile(_Nodes(x, variants), threads=threads, cache=False).run({"x": x})
    assert len(got) == 5 * len(variants)
    results = []
    for n, (axis, sorted_) in enumerate(variants):
        want = get_op("BoundedUnique").reference([x], {"axis": axis, "sorted": sorted_})
        for g, w in zip(got[5 * n: 5 * n + 5], want):
            assert_same(g, np.asarray(w))
        results.append(got[5 * n: 5 * n + 5])
    return results


BOTH = [(None, 1), (None, 0)]

DTYPES = [np.float32, np.float64, np.float16, BF16, np.int8, np.uint16, np.int32, np.int64,
          np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_with_many_duplicates(dtype):
    low = 0 if np.dtype(dtype).kind == "u" else -5
    x = np.random.default_rng(1).integers(low, low + 11, size=(7, 9)).astype(dtype)
    x[:, 4] = x[:, 1]
    results = _check(x, BOTH + [(1, 1), (1, 0)])
    for y, first, inverse, counts, extent in results[:2]:
        assert 1 < int(extent) <= 11 and counts.sum() == x.size
    assert 1 < int(results[2][4]) <= 8


@pytest.mark.parametrize("shape,axis", [((6, 4), 0), ((5, 6), 1), ((3, 7, 2), 1), ((2, 3, 8), 2), ((9, 2, 2), 0)])
def test_slices_along_an_axis(shape, axis):
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 2, size=(3,) + shape[:axis] + shape[axis + 1:]).astype(np.float32)
    x = np.ascontiguousarray(np.moveaxis(rows[rng.integers(0, 3, size=shape[axis])], 0, axis))  # slices repeat
    for got in _check(x, [(axis, 1), (axis, 0)]):
        assert 1 <= int(got[4]) <= 3


@pytest.mark.parametrize("length", [1, 2, 17, 1000])
def test_lengths_around_the_merge_passes(length):
    x = np.random.default_rng(length).integers(0, max(length // 3, 1), size=length).astype(np.int32)
    _check(x, BOTH + [(0, 1)])


def test_no_duplicates_and_all_duplicates():
    _check(np.random.default_rng(3).permutation(300).astype(np.int64), BOTH)
    _check(np.full((4, 5), 7, np.int16), BOTH + [(1, 1), (0, 0)])


def test_nan_and_signed_zero_follow_numpy():
    x = np.array([2, np.nan, 1, np.nan, 3, -0.0, 0.0, -np.inf, np.inf], np.float32)
    _check(x, BOTH)
    _check(np.array([[1, np.nan], [0, 1], [1, np.nan], [1, 0]], np.float32), [(0, 1), (0, 0)])
    y, first, inverse, counts = unique(x, None, True)
    np.testing.assert_array_equal(y, np.unique(x))
    assert first.tolist() == [7, 5, 2, 0, 4, 8, 1]


def test_empty_inputs_and_empty_slices():
    assert int(_check(np.zeros((0,), np.float32), BOTH)[0][4]) == 0
    assert int(_check(np.zeros((0, 3), np.float32), [(0, 0)])[0][4]) == 0
    assert int(_check(np.zeros((3, 0), np.float32), [(0, 1)])[0][4]) == 1  # three empty slices, all equal


def test_one_thread_of_two_does_the_work():
    x = np.random.default_rng(4).integers(0, 50, size=5000).astype(np.float32)
    _check(x, BOTH, threads=2)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_reference_matches_numpy_and_onnxruntime(axis, sorted_):
    x = np.random.default_rng(5).integers(0, 3, size=(6, 3)).astype(np.float32)
    x[3] = x[1]
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    model = make_model([helper.make_node("Unique", ["x"], ["y", "i", "v", "c"], **attrs)], {"x": x},
                       ["y", "i", "v", "c"], opset=11)
    mine = unique(x, None if axis is None else axis % 2, bool(sorted_))
    for got, want in zip(mine, run_ort(model, {"x": x})):
        assert_same(got, want)
    if sorted_:
        want = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
        for got, w in zip(mine, want):
            np.testing.assert_array_equal(got, w.reshape(got.shape))
