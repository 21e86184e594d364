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


def exported(name: str) -> bytes:
    """The detector exported in a fresh interpreter (`python -m hobbit.zoo.detection`): torch's
    exporter imports triton, whose bundled LLVM crashes a process that already holds
    llvmlite's and TensorFlow's (a segfault in an xdist worker of the full suite)."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "hobbit.zoo.detection", folder, "--models", name],
                       check=True, capture_output=True, timeout=1200)
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


def check_detector(name: str, compiled, session, seeds=(0, 1)) -> list[int]:
    """Detections of hobbit and onnxruntime on the calibration image and other random images."""
    size = detection.DETECTORS[name].size
    counts = []
    for seed in seeds:
        feeds = {"image": detection.image(size, seed)}
        counts.append(assert_same_detections(compiled.run(feeds), session.run(None, feeds)))
    return counts
