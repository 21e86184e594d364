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
