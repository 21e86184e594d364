"""Det against numpy.linalg.det on runtime inputs: batches, pivoting, singular and 1x1 matrices."""

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import make_model, rand


def _det(x: np.ndarray, threads: int = 1) -> np.ndarray:
    node = helper.make_node("Det", ["x"], ["y"])
    return hobbit.compile(make_model([node], {"x": x}, ["y"], opset=11), threads=threads).run({"x": x})[0]


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3, 3), (1, 1), (7, 6, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_matches_numpy(shape, dtype):
    x = rand(*shape, dtype=dtype)
    got = _det(x)
    assert got.dtype == dtype and got.shape == shape[:-2]
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_det_needs_pivoting_and_handles_singular_matrices():
    x = np.array([[[0, 1, 2], [1, 0, 3], [4, -3, 8]],  # zero leading pivot
                  [[1, 2, 3], [2, 4, 6], [1, 1, 1]],  # singular
                  [[0, 0, 0], [0, 0, 0], [0, 0, 0]]], dtype=np.float32)
    np.testing.assert_allclose(_det(x), np.linalg.det(x), atol=1e-5)


def test_det_many_matrices_on_two_threads():
    x = rand(33, 5, 5, seed=3)
    np.testing.assert_allclose(_det(x, threads=2), np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_det_float16_is_computed_in_float32():
    x = rand(3, 4, 4, dtype=np.float16)
    got = _det(x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float32)).astype(np.float16), rtol=2e-3, atol=2e-3)
