"""Work sharing: Threads.bands deals out rows so every thread's share differs by at most
one row, in bands of static heights; claimed work covers every row on every call, and
a sync only follows claimed work. (tests/runtime/test_pool.py runs these kernels with
fewer, late and descheduled threads.)"""

from __future__ import annotations

import pytest

from hobbit.plan.bands import band_heights


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


def test_sync_refuses_to_follow_a_static_split():
    """Ids are claimed: a sync after split() could wait for a share no thread has started."""
    from llvmlite import ir

    from hobbit.errors import CodegenError
    from hobbit.emit.builder import I64, PTR, KernelBuilder
    from hobbit.backend.cpu.parallel import Threads

    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name="k")
    kb = KernelBuilder(fn)
    threads = Threads(kb, fn.args[1], fn.args[2], 2, fn.args[0])
    threads.runs(64, lambda lo, hi: None)
    threads.sync()  # claimed work: fine
    threads.split(64)
    with pytest.raises(CodegenError, match="static split"):
        threads.sync()


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
    from hobbit.backend.cpu.gemm import MIN_CLAIMED_MACS
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
