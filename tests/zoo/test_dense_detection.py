"""A detector at several image sizes from one compile (issue 28): RetinaNet's network from a
resized image to every anchor's scores and decoded boxes (hobbit.zoo.dense_detection),
compiled ONCE with run-time height and width and compared with onnxruntime at sizes from
the low bound to the bound, square, oblong and odd.

On its path: ResNet-50's strided convs and ceil-less MaxPool, the FPN's nearest 2x
upsampling of a coarser level to the finer one's size (its index tables at an odd size are
a prefix of the bound's), P6/P7's stride-2 convs, the heads, a reshape splitting the
channels, and the box decode whose anchor grid (a Range over the feature map's width,
times the stride) is folded per size and checked to be a prefix of the bound's. A silent
fall back to one compile per shape fails the test.

Tolerances: hobbit.zoo.detection's (boxes are pixels of images up to 384 wide: 1e-2
absolute; scores are sigmoids to float32 rounding: 1e-4)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import hobbit
from hobbit.zoo.dense_detection import output_names

pytestmark = pytest.mark.slow

BOUNDS = {"height": (64, 384), "width": (64, 384)}
SIZES = [(64, 64), (97, 130), (256, 384), (384, 384), (320, 224)]


@pytest.fixture(scope="module")
def engines():
    """Exported in a fresh interpreter, as tests/zoo/detection_cases.py says why."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dense.onnx"
        subprocess.run([sys.executable, "-m", "hobbit.zoo.dense_detection", str(path)], check=True,
                       capture_output=True, timeout=1200)
        model = path.read_bytes()
    compiled = hobbit.compile(model, dynamic_shapes=BOUNDS, threads=2, cache=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return compiled, ort.InferenceSession(model, options)


def test_one_module_matches_onnxruntime_at_every_size(engines) -> None:
    compiled, session = engines
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    for h, w in SIZES:
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        got = compiled.run({"image": x})
        want = session.run(None, {"image": x})
        assert len(got) == len(want) == len(output_names())
        for name, g, r in zip(output_names(), got, want):
            assert g.shape == r.shape, f"{name} at {h}x{w}"
            atol = 1e-4 if name.startswith("scores") else 1e-2
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=atol, err_msg=f"{name} at {h}x{w}")


def test_feature_maps_follow_the_image(engines) -> None:
    """P3 is the image / 8 and P7 the image / 128, rounded up through each stride-2 conv."""
    compiled, _ = engines
    got = compiled.run({"image": np.zeros((1, 3, 97, 130), np.float32)})
    assert got[0].shape == (1, 9, 91, 13, 17)
    assert got[-1].shape == (1, 9, 4, 1, 2)
