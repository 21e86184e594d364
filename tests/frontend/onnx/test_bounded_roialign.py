"""RoiAlign on rois bounded along dim 0 (hobbit.frontend.common.bounded): the rois a score
threshold keeps, as a detector pools the boxes left after NonMaxSuppression. One compile
serves every threshold; each run's output is cut to the kept rois and matches
onnxruntime, none kept included."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from tests.helpers import make_model, rand, run_ort

K = 12


def _model(feeds: dict[str, np.ndarray]):
    """Two poolings of the kept rois: batch indices gathered beside them, and (as torchvision
    exports roi_align) taken from column 0 of [K, 5] rois whose other columns are the box."""
    const = {"zero": np.array([0], np.int64), "box": np.array([1, 2, 3, 4], np.int64)}
    nodes = [
        helper.make_node("Greater", ["scores", "t"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "zero"], ["sel"]),
        helper.make_node("Gather", ["rois", "sel"], ["kept"], axis=0),
        helper.make_node("Gather", ["idx", "sel"], ["kept_idx"], axis=0),
        helper.make_node("RoiAlign", ["x", "kept", "kept_idx"], ["y"], output_height=3, output_width=3,
                         sampling_ratio=2, spatial_scale=0.5, coordinate_transformation_mode="output_half_pixel"),
        helper.make_node("Cast", ["idx"], ["idx_f"], to=1),
        helper.make_node("Unsqueeze", ["idx_f", "zero"], ["idx_row"]),
        helper.make_node("Transpose", ["idx_row"], ["idx_col"], perm=[1, 0]),
        helper.make_node("Concat", ["idx_col", "rois"], ["rois5"], axis=1),
        helper.make_node("Gather", ["rois5", "sel"], ["kept5"], axis=0),
        helper.make_node("Gather", ["kept5", "zero"], ["col0"], axis=1),
        helper.make_node("Cast", ["col0"], ["col0_i"], to=7),
        helper.make_node("Squeeze", ["col0_i", "one"], ["batch"]),
        helper.make_node("Gather", ["kept5", "box"], ["boxes"], axis=1),
        helper.make_node("RoiAlign", ["x", "boxes", "batch"], ["z"], mode="max", output_height=2, output_width=2),
    ]
    return make_model(nodes, feeds, ["y", "z"], initializers={**const, "one": np.array([1], np.int64)}, opset=16)


@pytest.mark.parametrize("threads", [1, 2])
def test_roialign_of_rois_kept_by_a_threshold(threads):
    rng = np.random.default_rng(0)
    x1, y1 = rng.uniform(-2, 14, K), rng.uniform(-2, 12, K)
    rois = np.stack([x1, y1, x1 + rng.uniform(1, 8, K), y1 + rng.uniform(1, 8, K)], 1).astype(np.float32)
    feeds = {"x": rand(2, 4, 6, 7, seed=1), "rois": rois, "idx": rng.integers(0, 2, K).astype(np.int64),
             "scores": rng.uniform(0, 1, K).astype(np.float32), "t": np.array(0.5, np.float32)}
    model = _model(feeds)
    compiled = hobbit.compile(model, threads=threads)
    kept = []
    for t in (0.5, -1.0, 0.9, 2.0, 0.2):
        feeds["t"] = np.array(t, np.float32)
        got, want = compiled.run(feeds), run_ort(model, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (t, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        kept.append(want[0].shape[0])
    assert kept[1] == K and kept[3] == 0 and 0 < kept[0] < K
