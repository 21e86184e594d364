"""Softmax, LogSoftmax and LayerNormalization against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from tests.helpers import assert_matches_ort, make_model, rand, run_ort


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("shape,axis", [((2, 3, 5, 7), 1), ((2, 3, 5, 7), -1), ((2, 3, 5, 7), 0), ((2, 37, 3), -2),
                                        ((3, 100), 1), ((4, 19, 33), 2), ((3, 5), None)])
def test_softmax_family(opset, shape, axis):
    """Opset < 13 coerces to 2-D at axis (default 1); from 13 a single axis (default -1)."""
    feeds = {"x": rand(*shape) * 4}
    extra = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], **extra),
             helper.make_node("LogSoftmax", ["x"], ["lsm"], **extra)]
    assert_matches_ort(make_model(nodes, feeds, ["sm", "lsm"], opset=opset), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,axis", [((1, 16, 40, 40), 1), ((3, 7, 40), 1), ((1, 5, 3), 1), ((64, 100), 1)])
def test_softmax_threads_share_rows_or_columns(shape, axis):
    """Two threads split the rows, the outer slices, or one slice's columns (with a ragged tail)."""
    x = rand(*shape) * 4
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], axis=axis), helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=axis)]
    model = make_model(nodes, {"x": x}, ["sm", "lsm"], opset=13)
    expected = run_ort(model, {"x": x})
    got = hobbit.compile(model, threads=2, cache=False).run({"x": x})
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_softmax_large_logits_are_stable():
    x = np.array([[1000.0, 1001.0, 999.0, -1000.0], [-500.0, -501.0, -502.0, -503.0]], np.float32)
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], axis=1), helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=0)]
    got = assert_matches_ort(make_model(nodes, {"x": x}, ["sm", "lsm"], opset=13), {"x": x})
    assert np.all(np.isfinite(got[0])) and np.all(np.isfinite(got[1]))


def test_softmax_float64():
    x = rand(3, 6, 5, dtype=np.float64)
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], axis=1), helper.make_node("LogSoftmax", ["x"], ["lsm"])]
    assert_matches_ort(make_model(nodes, {"x": x}, ["sm", "lsm"], opset=13), {"x": x}, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("shape,axis", [((2, 3, 5, 7), -1), ((2, 3, 5, 7), 1), ((4, 37), -1), ((2, 5, 3), 2),
                                        ((2, 5, 3), -2), ((3, 768), 1)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layernorm(shape, axis, with_bias):
    x = rand(*shape) * 2 + 0.5
    norm = shape[axis:]
    inits = {"s": rand(*norm, seed=1)}
    if with_bias:
        inits["b"] = rand(*norm, seed=2)
    node = helper.make_node("LayerNormalization", ["x", "s"] + (["b"] if with_bias else []), ["y"], axis=axis,
                            epsilon=1e-3)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], inits, opset=17), {"x": x}, rtol=1e-4, atol=1e-4)


def test_layernorm_runtime_scale_and_default_axis():
    feeds = {"x": rand(3, 4, 10), "s": rand(10, seed=1), "b": rand(10, seed=2)}
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"])
    assert_matches_ort(make_model([node], feeds, ["y"], opset=17), feeds, rtol=1e-4, atol=1e-4)


def test_layernorm_broadcast_constant_scale():
    x = rand(2, 3, 4, 6)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=2)
    inits = {"s": rand(6, seed=1), "b": rand(1, 6, seed=2)}
    assert_matches_ort(make_model([node], {"x": x}, ["y"], inits, opset=17), {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_layernorm_mean_and_inv_std_dev_outputs(axis):
    feeds = {"x": rand(3, 4, 5), "s": rand(*(3, 4, 5)[axis:], seed=1)}
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv_std"], axis=axis, epsilon=0.1)
    assert_matches_ort(make_model([node], feeds, ["y", "mean", "inv_std"], opset=17), feeds)


def test_constant_inputs_are_folded():
    w = rand(3, 8)
    nodes = [helper.make_node("Softmax", ["w"], ["p"]),
             helper.make_node("LayerNormalization", ["w", "s"], ["q"]),
             helper.make_node("Add", ["p", "q"], ["pq"]),
             helper.make_node("Mul", ["x", "pq"], ["y"])]
    feeds = {"x": rand(3, 8, seed=4)}
    model = make_model(nodes, feeds, ["y"], {"w": w, "s": rand(8, seed=5)}, opset=17)
    assert not any(n.op in ("Softmax", "LayerNormalization") for n in lower_to_llvm(model).graph.nodes)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)
