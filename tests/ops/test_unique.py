"""ONNX Unique against onnxruntime, bit-exact: a constant input folds, a run-time one runs
as BoundedUnique and run() returns Y, indices and counts cut to their extent."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import UnsupportedModelError
from tests.helpers import assert_ort_exact, assert_same, make_model, run_ort

OUTPUTS = ["y", "indices", "inverse", "counts"]


def _unique(axis: int | None, sorted_: int, source: str = "x"):
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    return helper.make_node("Unique", [source], OUTPUTS, **attrs)


def _duplicated(shape: tuple[int, ...], axis: int | None, dtype, seed: int) -> np.ndarray:
    """Random small values; along `axis`, slices drawn from three (so they repeat)."""
    rng = np.random.default_rng(seed)
    if axis is None:
        return rng.integers(-4, 5, size=shape).astype(dtype)
    axis %= len(shape)
    rows = rng.integers(-1, 2, size=(3,) + shape[:axis] + shape[axis + 1:])
    return np.ascontiguousarray(np.moveaxis(rows[rng.integers(0, 3, size=shape[axis])], 0, axis)).astype(dtype)


def test_constant_input_folds():
    data = np.array([[2, 1, 2], [3, 1, 2], [2, 1, 2]], dtype=np.int64)
    for sorted_, axis in ((1, None), (0, None), (1, 0), (0, 1)):
        nodes = [_unique(axis, sorted_, "c"), helper.make_node("Add", ["y", "z"], ["out"])]
        model = make_model(nodes, {"z": np.zeros((), np.int64)}, ["out"] + OUTPUTS[1:], {"c": data})
        compiled = hobbit.compile(model, cache=False)
        assert not [n for n in compiled.report.graph.nodes if "Unique" in n.op]
        assert_ort_exact(nodes, {"z": np.zeros((), np.int64)}, ["out"] + OUTPUTS[1:], {"c": data})


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_runtime_input_flattened(dtype, sorted_):
    x = _duplicated((6, 7), None, dtype, seed=1)
    got = assert_ort_exact([_unique(None, sorted_)], {"x": x}, OUTPUTS, opset=11)
    assert 1 < got[0].size < x.size


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("shape,axis", [((8, 3), 0), ((3, 8), 1), ((2, 6, 3), 1), ((2, 3, 5), -1), ((4, 2, 2), -3)])
def test_runtime_input_along_an_axis(shape, axis, sorted_):
    x = _duplicated(shape, axis, np.float32, seed=2)
    got = assert_ort_exact([_unique(axis, sorted_)], {"x": x}, OUTPUTS, opset=11)
    assert got[0].shape[axis] < shape[axis]


def test_one_compiled_model_gives_each_input_its_own_length():
    x = np.zeros(12, np.float32)
    model = make_model([_unique(None, 0)], {"x": x}, OUTPUTS, opset=11)
    compiled = hobbit.compile(model, threads=2, cache=False)
    rng = np.random.default_rng(3)
    for x in [np.zeros(12, np.float32), np.arange(12, dtype=np.float32)] + \
             [rng.integers(0, n, 12).astype(np.float32) for n in (2, 5, 9)]:
        got = compiled.run({"x": x})
        for g, w in zip(got, run_ort(model, {"x": x})):
            assert_same(g, w)
    assert [len(compiled.run({"x": x})[0]) for x in (np.zeros(12, np.float32), np.arange(12.0, dtype=np.float32))] \
        == [1, 12]


def test_a_bounded_input_is_refused():
    """Unique of NonZero's output would read the padding past its extent as data."""
    x = np.array([0, 1, 0, 2], np.float32)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), _unique(None, 1, "nz")]
    with pytest.raises(UnsupportedModelError, match="depends on the data"):
        hobbit.compile(make_model(nodes, {"x": x}, OUTPUTS, opset=11), cache=False)
