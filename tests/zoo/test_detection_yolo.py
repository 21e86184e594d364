"""A YOLO-style detector built with onnx.helper (hobbit.zoo.detection.yolo_nms): conv head,
NonMaxSuppression on centre-point boxes, GatherND of the kept boxes and scores."""

import numpy as np
import onnxruntime as ort
import pytest

import hobbit
from hobbit.zoo import detection
from tests.zoo.detection_cases import assert_same_detections


@pytest.fixture(scope="module")
def model():
    return detection.yolo_nms()


@pytest.mark.parametrize("threads", [1, 2])
def test_yolo_nms_matches_onnxruntime(model, threads):
    compiled = hobbit.compile(model, threads=threads, cache=False)
    session = ort.InferenceSession(model.SerializeToString())
    counts = []
    for seed in range(4):
        feeds = {"image": detection.image(detection.YOLO_SIZE, seed)[None]}
        counts.append(assert_same_detections(compiled.run(feeds), session.run(None, feeds)))
    assert counts[0] > 0
    assert all(c <= detection.YOLO_CLASSES * 20 for c in counts)


def test_a_constant_image_matches_onnxruntime(model):
    """A flat image: every cell sees the same input, so all boxes tie and overlap."""
    feeds = {"image": np.full((1, 3, 64, 64), 0.5, np.float32)}
    compiled = hobbit.compile(model, cache=False)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert_same_detections(compiled.run(feeds), want)
