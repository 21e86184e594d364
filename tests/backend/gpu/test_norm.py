"""Softmax, LogSoftmax and LayerNormalization on the GPU against onnxruntime (grid
emulation, ptxas, ld.lld): rows (the last axis) and columns (an inner axis), statistics
outputs, ragged row lengths, and the primitives the frontend builds InstanceNormalization
from."""

from __future__ import annotations

import pytest
from onnx import helper

from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort
from tests.helpers import make_model, rand


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", [((2, 1000), -1), ((2, 5, 7), 1), ((3, 4, 37), 0)])
def test_softmax(op, shape, axis) -> None:
    x = rand(*shape, seed=1) * 4
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"])
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)


def test_softmax_long_rows_are_read_per_pass() -> None:
    """20000 per row: more than a thread keeps in registers, so each pass reads them again."""
    x = rand(2, 20000, seed=2)
    model = make_model([helper.make_node("Softmax", ["x"], ["y"])], {"x": x}, ["y"])
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-8, targets=("cuda:sm_90", "rocm:gfx942"))


@pytest.mark.parametrize("shape,axis", [((4, 7, 768), -1), ((3, 10), -1), ((2, 3, 4, 5), 2)])
def test_layernorm(shape, axis) -> None:
    x = rand(*shape, seed=3) + 0.5
    normalised = shape[axis:]
    scale, bias = rand(*normalised, seed=4), rand(*normalised, seed=5)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=axis, epsilon=1e-3)
    model = make_model([node], {"x": x}, ["y"], {"s": scale, "b": bias})
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_layernorm_statistics_outputs_without_bias() -> None:
    x, scale = rand(6, 33, seed=6), rand(33, seed=7)
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"])
    model = make_model([node], {"x": x}, ["y", "mean", "inv"], {"s": scale})
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_instance_normalization() -> None:
    """The frontend's LayerNormalization over a reshaped view, then a per-channel affine."""
    x = rand(2, 3, 5, 6, seed=8)
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])
    model = make_model([node], {"x": x}, ["y"], {"s": rand(3, seed=9), "b": rand(3, seed=10)})
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)
