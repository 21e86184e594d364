"""Shared checks of the detection-model tests: one torchvision export per test file (each
file runs on one xdist worker, so the export and compile happen once per CI run)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

import hobbit
from hobbit.zoo import detection

# Box corners are pixels of a 300-320 image: 1e-2 absolute is 1/30000 of the image; the
# scores come from a softmax/sigmoid computed to float32 rounding in both engines.
BOX_ATOL, SCORE_ATOL = 1e-2, 1e-4
# How far apart (relative) the two engines' float32 scores for one detection may be: twice
# the most measured on SSDlite with torchvision's thresholds (8.7e-6, 110 float32 ulps, over
# 1,200 detections of 4 images); the backbone's convolutions sum in another order in each.
SCORE_RTOL = 2e-5


def exported(name: str, thresholds: str = "calibrated") -> bytes:
    """The detector exported in a fresh interpreter (`python -m hobbit.zoo.detection`): torch's
    exporter imports triton, whose bundled LLVM crashes a process that already holds
    llvmlite's and TensorFlow's (a segfault in an xdist worker of the full suite).
    `thresholds` as hobbit.zoo.detection.export's."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "hobbit.zoo.detection", folder, "--models", name,
                        "--thresholds", thresholds], check=True, capture_output=True, timeout=1200)
        return (Path(folder) / f"{name}.onnx").read_bytes()


def compile_both(model: bytes, threads: int = 2):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return hobbit.compile(model, threads=threads, cache=False), ort.InferenceSession(model, options)


def assert_same_detections(got: list[np.ndarray], want: list[np.ndarray]) -> int:
    """As many detections, and each of hobbit's matches one of onnxruntime's: same label,
    box and score within the tolerances. Matched as sets: two detections whose scores agree
    to float32 rounding may come out in either order (onnxruntime's own order between
    them follows its rounding), and neither order is wrong."""
    boxes, scores, labels = got
    assert [a.shape for a in got] == [a.shape for a in want]
    unmatched = list(range(len(want[1])))
    for box, score, label in zip(boxes, scores, labels):
        found = [j for j in unmatched if want[2][j] == label and abs(want[1][j] - score) <= SCORE_ATOL
                 and np.abs(want[0][j] - box).max() <= BOX_ATOL]
        assert found, f"hobbit's detection {label} {score} {box} is not among onnxruntime's"
        unmatched.remove(found[0])
    np.testing.assert_allclose(np.sort(scores), np.sort(want[1]), rtol=0, atol=SCORE_ATOL)
    return len(scores)


def _same(a: tuple, b: tuple) -> bool:
    """One detection (box, score, label) of each engine: the same label and box, and scores
    within SCORE_RTOL."""
    return a[2] == b[2] and np.abs(a[0] - b[0]).max() <= BOX_ATOL and abs(a[1] - b[1]) <= SCORE_RTOL * b[1]


def assert_detections_in_order(got: list[np.ndarray], want: list[np.ndarray]) -> list[tuple[int, int]]:
    """Hobbit's detections are onnxruntime's, position by position, except where the engines'
    scores do not decide the order. Both lists must be sorted by their own scores (NMS
    outputs them so). Where position i holds another detection, the run of differing
    positions must hold the same detections in another order, and every score in it (of
    either engine) lie within 2 * SCORE_RTOL of the run's first: two detections whose scores
    each engine computes within SCORE_RTOL of the other can be ordered either way only if
    they are that close, and neither float32 order is more right than the other. A run
    that reaches the end (the detections-per-image cut) may hold different detections, as
    near in score. Returns the runs as (first, end) positions."""
    assert [a.shape for a in got] == [a.shape for a in want]
    for name, scores in (("hobbit", got[1]), ("onnxruntime", want[1])):
        assert (np.diff(scores) <= 0).all(), f"{name}'s detections are not sorted by score"
    ours, theirs = list(zip(*got)), list(zip(*want))
    runs, i = [], 0
    while i < len(ours):
        if _same(ours[i], theirs[i]):
            i += 1
            continue
        end = i + 1
        while end < len(ours) and not _same(ours[end], theirs[end]):
            end += 1
        unmatched = list(theirs[i:end])
        for mine in ours[i:end]:
            found = [j for j, other in enumerate(unmatched) if _same(mine, other)]
            assert found or end == len(ours), (f"positions {i}-{end - 1}: hobbit's detection {mine} "
                                              f"is not among onnxruntime's {theirs[i:end]}")
            if found:
                unmatched.pop(found[0])
        scores = np.concatenate([got[1][i:end], want[1][i:end]])
        assert scores.max() - scores.min() <= 2 * SCORE_RTOL * scores.max(), (
            f"positions {i}-{end - 1} differ between the engines, but their scores are not tied to float32 "
            f"rounding: hobbit {got[1][i:end]} {got[2][i:end]}, onnxruntime {want[1][i:end]} {want[2][i:end]}")
        runs.append((i, end))
        i = end
    return runs


def check_detector(name: str, compiled, session, seeds=(0, 1), compare=assert_same_detections) -> list:
    """Detections of hobbit and onnxruntime on the calibration image and other random images,
    compared by `compare`; what it returned for each image."""
    size = detection.DETECTORS[name].size
    results = []
    for seed in seeds:
        feeds = {"image": detection.image(size, seed)}
        results.append(compare(compiled.run(feeds), session.run(None, feeds)))
    return results
