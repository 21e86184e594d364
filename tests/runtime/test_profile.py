"""Per-kernel profiling: every kernel is listed once with its fused ONNX nodes,
its flops, and times that add up to (about) the inference time."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import HobbitError
from hobbit.runtime.profile import format_profile
from tests.helpers import make_model, rand


def _model():
    x = rand(1, 8, 32, 32)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")]
    return make_model(nodes, {"x": x}, ["y"], {"W": rand(16, 8, 3, 3, seed=1)}), x


def test_profile_lists_each_kernel_with_flops_and_time():
    model, x = _model()
    m = hobbit.compile(model, profile=True, threads=1)
    times = m.profile({"x": x}, runs=5)
    assert [t.nodes for t in times] == [("conv", "relu"), ("gap",)]
    conv = times[0]
    assert conv.flops == 2 * 16 * 32 * 32 * 8 * 9 + 16 * 32 * 32  # MACs*2 + one Relu per output
    assert all(t.seconds > 0 for t in times)
    start = time.perf_counter()
    for _ in range(5):
        m.run({"x": x})
    wall = (time.perf_counter() - start) / 5
    assert sum(t.seconds for t in times) < wall * 3
    table = format_profile(times, peak_gflops=100.0)
    assert "Conv+Relu[conv]" in table and "%peak" in table


def test_profiled_model_computes_the_same_outputs():
    model, x = _model()
    plain = hobbit.compile(model).run({"x": x})[0]
    profiled = hobbit.compile(model, profile=True).run({"x": x})[0]
    np.testing.assert_array_equal(plain, profiled)


def test_profile_without_instrumentation_is_an_error():
    model, x = _model()
    with pytest.raises(HobbitError, match="profile=True"):
        hobbit.compile(model).profile({"x": x})


@pytest.mark.parametrize("size, tile, executed", [
    # F(2x2) on 8x8 outputs, 16 tiles: the GEMMs 2*4^2*16*16*16, the input transform 40 and
    # the output transform 28 per tile and channel (B^T and A^T's nonzero terms, counted by hand).
    (8, 2, 2 * 16 * 16 * 16 * 16 + 16 * 16 * 40 + 16 * 16 * 28),
    # F(4x4) on 20x20 outputs, 25 tiles: GEMMs 2*6^2*16*16*25, transforms 360 and 216.
    (20, 4, 2 * 36 * 16 * 16 * 25 + 25 * 16 * 360 + 25 * 16 * 216),
])
def test_winograd_kernels_report_executed_and_direct_flops_apart(size, tile, executed):
    """A Winograd conv does 2.25x (F(2x2)) or 4x (F(4x4)) fewer GEMM multiply-adds than the
    direct conv, plus its transforms: the profile counts both, and its %peak is of the executed
    arithmetic, which cannot pass 100% of the FMA peak the way the direct count can."""
    x = rand(1, 16, size, size)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    model = make_model(nodes, {"x": x}, ["y"], {"W": rand(16, 16, 3, 3, seed=1)})
    m = hobbit.compile(model, profile=True, threads=1)
    (conv,) = m.profile({"x": x}, runs=3)
    node = next(n for n in m.report.graph.nodes if n.op == "ConvWinograd")
    assert node.attrs["tile"] == tile
    relu = 16 * size * size
    assert conv.flops == 2 * 16 * size * size * 16 * 9 + relu  # as the direct conv
    assert conv.executed_flops == executed + relu and type(conv.executed_flops) is int  # JSON takes it
    assert conv.executed_gflops == pytest.approx(conv.gflops * conv.executed_flops / conv.flops)
    lines = format_profile([conv], peak_gflops=conv.executed_gflops).splitlines()
    assert "executes" in lines[0] and "Winograd conv as the direct conv" in lines[0]
    assert lines[1].split()[:5] == ["share", "ms", "GFLOP/s", "%peak", "direct"]
    cells = lines[2].split()
    assert cells[3] == "100.0" and float(cells[4]) == pytest.approx(conv.gflops, abs=0.06)


def test_direct_column_is_a_dash_where_the_counts_agree():
    model, x = _model()  # too few channels for Winograd: a direct conv
    times = hobbit.compile(model, profile=True, threads=1).profile({"x": x}, runs=2)
    assert all(t.flops == t.executed_flops for t in times)
    rows = format_profile(times).splitlines()[2:-1]
    assert all(row.split()[3] == "-" for row in rows)
