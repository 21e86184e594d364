"""The NonMaxSuppression converter (hobbit/frontend/onnx/ops/nms.py): run-time inputs become
BoundedNonMaxSuppression, whose selected_indices comes back from run() cut to the rows
selected and feeds the usual post-processing (Gather of the box column, then of the
boxes); constant inputs fold to the exact selection; an input with a data-dependent dim
is refused. Every selection is compared with onnxruntime's, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import UnsupportedModelError
from tests.helpers import make_model, run_ort
from tests.backend.cpu.nms_data import detections

NMS_INPUTS = ["boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"]


def _assert_same(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    want = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    return got


def test_selected_boxes_gathered_after_nms_match_onnxruntime():
    """A constant limit of 50 bounds the rows by 3 classes * 50; Gather reads the bounded rows."""
    boxes, scores = detections(np.random.default_rng(0), 1, 3, 1000, 0)
    nodes = [helper.make_node("Squeeze", ["boxes", "zero"], ["image_boxes"]),
             helper.make_node("NonMaxSuppression", NMS_INPUTS, ["selected"]),
             helper.make_node("Gather", ["selected", "two"], ["index"], axis=1),
             helper.make_node("Gather", ["image_boxes", "index"], ["picked"], axis=0)]
    constants = {"max_output_boxes_per_class": np.array([50], np.int64), "iou_threshold": np.array([0.5], np.float32),
                 "score_threshold": np.array([0.2], np.float32), "two": np.array(2, np.int64),
                 "zero": np.array([0], np.int64)}
    model = make_model(nodes, {"boxes": boxes, "scores": scores}, ["selected", "picked"], constants, opset=13)
    selected, picked = _assert_same(model, {"boxes": boxes, "scores": scores})
    assert selected.shape == (150, 3) and picked.shape == (150, 4)


@pytest.mark.parametrize("center_point_box, opset", [(0, 10), (1, 11)])
def test_thresholds_and_limit_as_graph_inputs(center_point_box, opset):
    boxes, scores = detections(np.random.default_rng(center_point_box), 2, 2, 500, center_point_box)
    feeds = {"boxes": boxes, "scores": scores, "max_output_boxes_per_class": np.array([40], np.int64),
             "iou_threshold": np.array([0.4], np.float32), "score_threshold": np.array([0.3], np.float32)}
    node = helper.make_node("NonMaxSuppression", NMS_INPUTS, ["selected"], center_point_box=center_point_box)
    model = make_model([node], feeds, ["selected"], opset=opset)
    compiled = hobbit.compile(model)
    for limit, iou, rows in ((40, 0.4, None), (3, 0.9, 12), (0, 0.5, 0)):  # 2 batches * 2 classes
        feeds["max_output_boxes_per_class"][0], feeds["iou_threshold"][0] = limit, iou
        got, = compiled.run(feeds)
        np.testing.assert_array_equal(got, run_ort(model, feeds)[0])
        assert len(got) == rows if rows is not None else 4 < len(got) <= 4 * limit


def test_constant_inputs_fold_to_the_selection():
    boxes, scores = detections(np.random.default_rng(2), 1, 2, 200, 0)
    nodes = [helper.make_node("NonMaxSuppression", ["b", "s", "m"], ["selected"]),
             helper.make_node("Add", ["selected", "x"], ["y"])]
    x = np.zeros((1, 3), np.int64)
    model = make_model(nodes, {"x": x}, ["y"], {"b": boxes, "s": scores, "m": np.array([30], np.int64)})
    compiled = hobbit.compile(model)
    assert "BoundedNonMaxSuppression" not in [n.op for n in compiled.report.graph.nodes]
    np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])


def test_boxes_with_a_data_dependent_dim_are_refused():
    boxes, scores = detections(np.random.default_rng(3), 1, 1, 20, 0)
    keep = np.ones(20, bool)
    nodes = [helper.make_node("NonZero", ["keep"], ["where"]),
             helper.make_node("Squeeze", ["where", "zero"], ["kept"]),
             helper.make_node("Gather", ["boxes", "kept"], ["some"], axis=1),
             helper.make_node("NonMaxSuppression", ["some", "scores"], ["selected"])]
    model = make_model(nodes, {"boxes": boxes, "scores": scores, "keep": keep}, ["selected"],
                       {"zero": np.array([0], np.int64)}, opset=13)
    with pytest.raises(UnsupportedModelError, match="NonMaxSuppression .*data-dependent dim"):
        hobbit.compile(model)
