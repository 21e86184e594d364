"""The JIT runtime: thread safety of one compiled model, fresh result arrays,
input handling, and IEEE special values propagating like onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import (
    assert_matches_ort,
    make_model,
    rand,
    run_in_four_threads,
)


def _conv_chain():
    """Two convolutions with an arena-resident intermediate, so concurrent runs
    would corrupt each other if they shared scratch memory."""
    x = rand(1, 4, 16, 16)
    inits = {"w1": rand(8, 4, 3, 3, seed=1), "w2": rand(4, 8, 3, 3, seed=2), "b": rand(8, seed=3)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["d"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["d", "x"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits)


def test_concurrent_runs_on_one_model() -> None:
    model = _conv_chain()
    run_in_four_threads(hobbit.compile(model), model, [rand(1, 4, 16, 16, seed=100 + i) for i in range(4)], runs=30)


def test_results_are_fresh_arrays_per_call() -> None:
    compiled = hobbit.compile(_conv_chain())
    x = rand(1, 4, 16, 16)
    x_before = x.copy()
    first = compiled.run({"x": x})[0]
    expected = first.copy()
    first[...] = 12345.0
    second = compiled.run({"x": x})[0]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(second, expected)
    np.testing.assert_array_equal(x, x_before)  # inputs are read-only to the model


def test_output_equal_to_input_is_a_copy() -> None:
    x = rand(2, 3)
    compiled = hobbit.compile(make_model([helper.make_node("Identity", ["x"], ["y"])], {"x": x}, ["y"]))
    y = compiled(x)
    assert not np.shares_memory(x, y)
    y[...] = 0
    np.testing.assert_array_equal(compiled(x), x)


def test_constant_output_cannot_be_corrupted_by_the_caller() -> None:
    x = rand(2, 3)
    k = rand(2, 3, seed=1)
    model = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["k"], ["z"])],
                       {"x": x}, ["y", "z"], {"k": k})
    compiled = hobbit.compile(model)
    compiled.run({"x": x})[1][...] = 7.0
    np.testing.assert_array_equal(compiled.run({"x": x})[1], -k)


@pytest.mark.parametrize("layout", ["transposed", "strided", "fortran"])
def test_non_contiguous_inputs(layout: str) -> None:
    base = rand(6, 8)
    x = {"transposed": rand(8, 6).T, "strided": rand(6, 16)[:, ::2],
         "fortran": np.asfortranarray(base)}[layout]
    assert not x.flags.c_contiguous
    model = make_model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": np.zeros((6, 8), np.float32)}, ["y"])
    np.testing.assert_allclose(hobbit.compile(model)(x), 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)


def test_inputs_at_odd_addresses() -> None:
    """A row slice of a batch starts mid-buffer; a byte-offset view is not even element aligned."""
    model = make_model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": np.zeros((6, 8), np.float32)}, ["y"])
    compiled = hobbit.compile(model)
    batch = rand(7, 6, 8)
    raw = np.zeros(6 * 8 * 4 + 1, np.uint8)
    unaligned = np.ndarray((6, 8), np.float32, raw.data, offset=1)
    unaligned[...] = batch[0]
    assert not unaligned.flags.aligned
    for x in (batch[3], unaligned, np.broadcast_to(batch[1, :1], (6, 8))):
        np.testing.assert_allclose(compiled(x), 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)


def test_repeated_output_gets_two_buffers() -> None:
    x = rand(2, 3)
    compiled = hobbit.compile(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y", "y"]))
    first, second = compiled.run({"x": x})
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, np.maximum(x, 0))
    np.testing.assert_array_equal(second, np.maximum(x, 0))


def _with_specials(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    return x


def test_nan_and_inf_through_elementwise_ops() -> None:
    x = _with_specials(rand(4, 33))
    b = _with_specials(rand(4, 33, seed=1)[:, ::-1].copy())
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["s"]),
             helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Relu", ["n"], ["rn"]),
             helper.make_node("Mul", ["s", "rn"], ["y"])]
    model = make_model(nodes, {"x": x, "b": b}, ["r", "s", "y"])
    got = assert_matches_ort(model, {"x": x, "b": b})
    assert np.isnan(got[0]).any() and np.isinf(got[0]).any()
    assert np.isnan(got[2]).any()


def test_nan_and_inf_through_conv() -> None:
    x = rand(1, 3, 9, 9)
    x[0, 0, 2, 2] = np.nan
    x[0, 1, 6, 6] = np.inf
    x[0, 2, 0, 8] = -np.inf
    w = rand(4, 3, 3, 3, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": x}, ["c", "y"], {"w": w})
    got = assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-4)
    assert np.isnan(got[0]).sum() >= 9 * 4 and np.isinf(got[0]).any()
