"""Shared checks of the detection-model tests: one torchvision export per test file (each
file runs on one xdist worker, so the export and compile happen once per CI run)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import hobbit
from hobbit.zoo import detection

# Box corners are pixels of a 300-320 image: 1e-2 absolute is 1/30000 of the image; the
# scores come from a softmax/sigmoid computed to float32 rounding in both engines.
BOX_ATOL, SCORE_ATOL = 1e-2, 1e-4


def compile_both(model: bytes, threads: int = 2):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return hobbit.compile(model, threads=threads, cache=False), ort.InferenceSession(model, options)


def assert_same_detections(got: list[np.ndarray], want: list[np.ndarray]) -> int:
    """Boxes, scores and labels equal (to the tolerances) and as many; returns the count."""
    boxes, scores, labels = got
    assert [a.shape for a in got] == [a.shape for a in want]
    np.testing.assert_allclose(boxes, want[0], rtol=0, atol=BOX_ATOL)
    np.testing.assert_allclose(scores, want[1], rtol=0, atol=SCORE_ATOL)
    np.testing.assert_array_equal(labels, want[2])
    return len(scores)


def check_detector(name: str, compiled, session, seeds=(0, 1)) -> list[int]:
    """Detections of hobbit and onnxruntime on the calibration image and other random images."""
    size = detection.DETECTORS[name].size
    counts = []
    for seed in seeds:
        feeds = {"image": detection.image(size, seed)}
        counts.append(assert_same_detections(compiled.run(feeds), session.run(None, feeds)))
    return counts
