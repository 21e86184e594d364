"""Einsum (composed of Transpose/Reshape/Slice/ReduceSum/MatMul) against numpy.einsum,
with runtime operands so every generated kernel runs."""

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import make_model, rand

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("->", [()]),
    ("ij,kj", [(2, 3), (4, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
    ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 3)]),
    ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("abc->cab", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
]


@pytest.mark.parametrize("equation,shapes", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_einsum_matches_numpy(equation, shapes, dtype):
    feeds = {f"x{i}": rand(*s, seed=i, dtype=dtype) for i, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(feeds), ["y"], equation=equation)
    got, = hobbit.compile(make_model([node], feeds, ["y"], opset=12)).run(feeds)
    expected = np.einsum(equation, *feeds.values())
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_einsum_integer_operands():
    feeds = {"a": np.arange(12, dtype=np.int64).reshape(3, 4), "b": np.arange(8, dtype=np.int64).reshape(4, 2)}
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")
    got, = hobbit.compile(make_model([node], feeds, ["y"], opset=12)).run(feeds)
    np.testing.assert_array_equal(got, feeds["a"] @ feeds["b"])


def test_einsum_rejects_malformed_equation():
    feeds = {"a": rand(3, 4)}
    node = helper.make_node("Einsum", ["a"], ["y"], equation="ijk->i")
    with pytest.raises(hobbit.errors.UnsupportedModelError, match="does not match"):
        hobbit.compile(make_model([node], feeds, ["y"], opset=12))
