"""InstanceNormalization, LpNormalization, Hardmax and BatchNormalization with runtime
statistics or in training mode, against onnxruntime with runtime inputs."""

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import assert_matches_ort, make_model, rand


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 7), (2, 2, 3, 2, 2)])
def test_instance_normalization(shape):
    c = shape[1]
    feeds = {"x": rand(*shape), "s": rand(c, seed=1), "b": rand(c, seed=2)}
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=0.01)
    assert_matches_ort(make_model([node], feeds, ["y"], opset=6), feeds)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_lp_normalization(p, axis):
    feeds = {"x": rand(3, 4, 5)}
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis)
    assert_matches_ort(make_model([node], feeds, ["y"], opset=1), feeds)


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, 0), (13, 1), (13, -1), (13, 0)])
def test_hardmax_picks_the_first_maximum(opset, axis):
    x = np.round(rand(3, 4, 5) * 2)  # ties along every axis
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=axis)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=opset), {"x": x})


def test_hardmax_float64():
    """onnxruntime has no float64 Hardmax: numpy decides."""
    x = np.round(rand(4, 6, dtype=np.float64))
    node = helper.make_node("Hardmax", ["x"], ["y"])
    got, = hobbit.compile(make_model([node], {"x": x}, ["y"], opset=13)).run({"x": x})
    expected = np.zeros_like(x)
    expected[np.arange(4), np.argmax(x, axis=1)] = 1
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)


def _bn_feeds(shape):
    c = shape[1]
    return {"x": rand(*shape), "s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
            "v": np.abs(rand(c, seed=4)) + 0.5}


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (2, 3, 7)])
def test_batchnorm_with_runtime_statistics(shape):
    feeds = _bn_feeds(shape)
    node = helper.make_node("BatchNormalization", list(feeds), ["y"], epsilon=1e-3)
    assert_matches_ort(make_model([node], feeds, ["y"], opset=15), feeds)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (5, 3)])
def test_batchnorm_training_mode(shape):
    feeds = _bn_feeds(shape)
    outputs = ["y", "running_mean", "running_var"]
    node = helper.make_node("BatchNormalization", list(feeds), outputs, training_mode=1, momentum=0.8)
    assert_matches_ort(make_model([node], feeds, outputs, opset=15), feeds)


@pytest.mark.parametrize("op,attrs", [("Softmax", {"axis": 1}), ("LogSoftmax", {}), ("Hardmax", {}),
                                      ("LpNormalization", {"axis": 0})])
def test_float16_is_computed_in_float32(op, attrs):
    x = rand(3, 4, 5, dtype=np.float16)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, rtol=2e-3, atol=2e-3)


def test_float16_layernorm_statistics_are_float32():
    feeds = {"x": rand(2, 3, 8, dtype=np.float16), "s": rand(8, seed=1, dtype=np.float16),
             "b": rand(8, seed=2, dtype=np.float16)}
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"])
    assert_matches_ort(make_model([node], feeds, ["y", "mean", "inv_std"], opset=17), feeds, rtol=2e-3, atol=2e-3)


def test_float16_instance_and_batch_normalization():
    feeds = {"x": rand(2, 3, 4, 5, dtype=np.float16), "s": rand(3, seed=1, dtype=np.float16),
             "b": rand(3, seed=2, dtype=np.float16)}
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])
    assert_matches_ort(make_model([node], feeds, ["y"], opset=6), feeds, rtol=2e-3, atol=2e-3)
    feeds.update(m=rand(3, seed=3, dtype=np.float16), v=np.abs(rand(3, seed=4, dtype=np.float16)) + 1)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    assert_matches_ort(make_model([node], feeds, ["y"], opset=15), feeds, rtol=2e-3, atol=2e-3)
