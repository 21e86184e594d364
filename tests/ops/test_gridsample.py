"""GridSample against onnxruntime: modes, padding modes, align_corners, 2-D and 3-D, far-out grids."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import hobbit

from tests.helpers import assert_matches_ort, make_model, rand


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_gridsample_2d(mode, padding):
    x = rand(2, 3, 4, 5, seed=1)
    grid = (np.random.default_rng(2).uniform(-2.5, 2.5, (2, 3, 6, 2))).astype(np.float32)
    nodes = [helper.make_node("GridSample", ["x", "grid"], [f"y{a}"], mode=mode, padding_mode=padding,
                              align_corners=a) for a in (0, 1)]
    feeds = {"x": x, "grid": grid}
    model = make_model(nodes, feeds, ["y0", "y1"], opset=20)
    if (mode, padding) != ("cubic", "border"):
        assert_matches_ort(model, feeds)
        return
    # onnxruntime's bicubic border sampling differs from the ONNX reference, which the node tests follow.
    for got, want in zip(hobbit.compile(model).run(feeds), ReferenceEvaluator(model).run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_gridsample_3d(mode):
    x = rand(1, 2, 3, 4, 5, seed=3)
    grid = (np.random.default_rng(4).uniform(-1.3, 1.3, (1, 2, 3, 4, 3))).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode="border")
    feeds = {"x": x, "grid": grid}
    assert_matches_ort(make_model([node], feeds, ["y"], opset=20), feeds)


def test_non_finite_grid_stays_in_bounds():
    """NaN and infinite coordinates give some value, never a read outside X."""
    x = rand(1, 1, 3, 3)
    grid = np.array([[[[np.nan, 0.0], [np.inf, -np.inf], [1e30, -1e30]]]], dtype=np.float32)
    feeds = {"x": x, "grid": grid}
    for padding in ("zeros", "border", "reflection"):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic", padding_mode=padding)
        y, = hobbit.compile(make_model([node], feeds, ["y"], opset=20)).run(feeds)
        assert y.shape == (1, 1, 1, 3)
