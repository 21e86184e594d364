"""Work sharing: Threads.bands deals out rows so every thread's share differs by at most
one row, in bands of static heights, and still covers every row when the OpenMP
runtime starts fewer threads than the model was compiled for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hobbit.lower.parallel import band_heights


@pytest.mark.parametrize("total,max_band,threads,heights", [
    (14, 4, 2, [3, 4]),      # 7 rows each: 4 + 3, not 4 + 4 against 4 + 2
    (224, 21, 2, [18, 19]),  # 112 rows each in 6 bands
    (224, 21, 1, [20, 21]),
    (8, 4, 2, [4]),
    (5, 8, 2, [2, 3]),       # shares of 2 and 3 rows, one band each
    (1, 4, 2, [1]),          # one thread gets nothing
])
def test_band_heights_are_near_equal_and_bounded(total, max_band, threads, heights):
    assert band_heights(total, max_band, threads) == heights
    assert max(heights) <= max_band


_FEWER_THREADS = r"""
import numpy as np
from onnx import helper
import hobbit
from tests.helpers import make_model, rand, run_ort

x = rand(1, 3, 70, 67)
nodes = [
    helper.make_node("Conv", ["x", "W0"], ["a"], pads=[1, 1, 1, 1], name="stem"),        # im2col blocks
    helper.make_node("Relu", ["a"], ["r"]),
    helper.make_node("Conv", ["r", "W1"], ["b"], pads=[1, 1, 1, 1], name="winograd"),    # bands of tiles
    helper.make_node("Conv", ["b", "E"], ["e"], name="expand"),
    helper.make_node("Conv", ["e", "D"], ["y"], pads=[1, 1, 1, 1], group=96, name="dw"),  # fused bands
]
inits = {"W0": rand(16, 3, 3, 3, seed=1), "W1": rand(16, 16, 3, 3, seed=2) * 0.2,
         "E": rand(96, 16, 1, 1, seed=3) * 0.2, "D": rand(96, 1, 3, 3, seed=4)}
model = make_model(nodes, {"x": x}, ["y"], inits)
m = hobbit.compile(model, threads=2)
ops = [n.op for n in m.report.graph.nodes]
assert "ConvWinograd" in ops and "ExpandDepthwise" in ops, ops
np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)

x = rand(2, 64, 14, 14)  # a whole-image Winograd conv: phases of claimed jobs, then a claimed GEMM
nodes = [helper.make_node("Conv", ["x", "W"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["a", "P"], ["y"])]
model = make_model(nodes, {"x": x}, ["y"], {"W": rand(64, 64, 3, 3, seed=5) * 0.1, "P": rand(512, 64, 1, 1, seed=6)})
m = hobbit.compile(model, threads=2)
assert [n.op for n in m.report.graph.nodes] == ["ConvWinograd", "Conv"]
np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)
print("ok")
"""


def test_kernels_compiled_for_two_threads_cover_all_rows_on_one():
    """OMP_THREAD_LIMIT=1 makes libgomp start one thread where two were asked for: that
    thread must also run the second thread's share."""
    env = {**os.environ, "OMP_THREAD_LIMIT": "1", "HOBBIT_CACHE": "0"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", _FEWER_THREADS], env=env, cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_claimed_bands_cover_every_image_on_every_call():
    """Bands are claimed from counters zeroed at each call; the claims span the images of
    a batch (and the groups of a grouped conv), so every call computes every row once."""
    import numpy as np
    from onnx import helper

    import hobbit
    from tests.helpers import make_model, rand, run_ort

    conv = helper.make_node("Conv", ["x", "W", "B"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], group=2)
    model = make_model([conv], {"x": rand(3, 8, 40, 40)}, ["y"], {"W": rand(16, 4, 3, 3, seed=1), "B": rand(16, seed=2)})
    compiled = hobbit.compile(model, threads=2, cache=False)
    for call in range(3):  # new data each call: rows a call failed to claim would keep stale values
        x = rand(3, 8, 40, 40, seed=10 + call)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["pointwise", "matmul"])
def test_claimed_gemm_runs_cover_every_pass(case):
    """A large GEMM inside a loop (images of a batch, matrices of a batched MatMul) is shared
    by runs claimed from one counter that is never reset: every pass, on every call, must
    be computed whole."""
    import numpy as np
    from onnx import helper

    import hobbit
    from hobbit.lower.gemm import MIN_CLAIMED_MACS
    from tests.helpers import make_model, rand, run_ort

    if case == "pointwise":
        shape, init = (3, 128, 28, 28), {"W": rand(256, 128, 1, 1, seed=1)}
        node, macs = helper.make_node("Conv", ["x", "W"], ["y"]), 256 * 128 * 28 * 28
    else:
        shape, init = (4, 256, 192), {"W": rand(4, 192, 320, seed=1)}
        node, macs = helper.make_node("MatMul", ["x", "W"], ["y"]), 256 * 192 * 320
    assert macs >= MIN_CLAIMED_MACS
    model = make_model([node], {"x": rand(*shape)}, ["y"], init)
    compiled = hobbit.compile(model, threads=2, cache=False)
    for call in range(3):
        x = rand(*shape, seed=10 + call)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)
