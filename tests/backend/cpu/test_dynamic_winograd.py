"""Winograd convolution with run-time height and width (issue 28): single 3x3 stride-1 convs
with enough channels that the winograd pass picks them, their input [1, C, h, w] symbolic,
compiled once at the bound (dynamic_shapes) and run at many sizes inside it against
onnxruntime.

The cases cover both tiles (F(2x2) below the bound of 18 outputs, F(4x4) above it, the tile
chosen at the bound: hobbit.passes.choices) and every way the kernel runs: all tiles at once
with the tiles as the GEMMs' columns or as their rows (few tiles), and bands of tile rows (a
large image), each with a fused bias, ReLU and residual Add. Sizes cover the smallest, odd
sizes, sizes that are no multiple of the tile, the bound, and a small size right after a
large one (a stale plane must not leak into the border); each model must come back as a
DynamicModel (a silent per-shape fallback fails), at one and two threads."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.backend.cpu.winograd import winograd_dynamic
from hobbit.graph.extents import Extent
from hobbit.graph.ir import EpilogueStep, Node, TensorType, Value
from hobbit.plan.winograd import winograd_plan
from hobbit.target import host_target
from tests.helpers import assert_inside_extents, run_ort

RTOL = ATOL = 1e-4
# The host with 1 MiB of L2 per core (which convs run in bands follows L2); the cases' tiles-as-rows
# sizes assume vectors of 8 or 16 floats (AVX2, AVX-512).
TARGET = dataclasses.replace(host_target(), l2_bytes=1 << 20)
SETTINGS = settings(max_examples=5, deadline=None, derandomize=True, database=None)


def conv(c: int, oc: int, residual: bool = False, batch: int = 1, pads: tuple = (1, 1, 1, 1)) -> onnx.ModelProto:
    """y = Relu(Conv3x3(x) + b [+ x]), x [batch, c, h, w]: the bias, the residual Add and the Relu
    fused into the ConvWinograd."""
    rng = np.random.default_rng(c * 100 + oc)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=list(pads))]
    last = "c"
    if residual:
        nodes.append(helper.make_node("Add", ["c", "x"], ["s"]))
        last = "s"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    graph = helper.make_graph(nodes, "dynamic_winograd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array((rng.standard_normal((oc, c, 3, 3)) / np.sqrt(9 * c))
                                                       .astype(np.float32), "w"),
                               numpy_helper.from_array(rng.standard_normal(oc).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# name -> (C, OC, residual, bound (h, w), tile, how the bound's plan runs: "columns" (tiles as
# the GEMMs' columns), "rows" (tiles as rows) or "bands", batch)
CASES = {
    "f2-rows": (16, 16, False, (10, 10), 2, "rows", 1),
    "f2-columns": (20, 20, True, (17, 17), 2, "columns", 1),
    "f4-columns": (16, 16, True, (40, 40), 4, "columns", 1),
    "f4-rows": (16, 16, False, (20, 21), 4, "rows", 1),
    "f4-bands": (32, 32, True, (48, 48), 4, "bands", 1),
    "f4-bands-batch": (32, 24, False, (52, 48), 4, "bands", 2),  # bands of two images in one claimed loop
}


@functools.cache
def _compiled(case: str, threads: int):
    c, oc, residual, (h, w), tile, kind, batch = CASES[case]
    model = conv(c, oc, residual, batch)
    compiled = hobbit.compile(model, target=TARGET, threads=threads, dynamic_shapes={"h": (5, h), "w": (5, w)},
                              cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    (node,) = compiled.report.graph.nodes
    assert node.op == "ConvWinograd" and node.attrs["tile"] == tile
    assert [step.op for step in node.epilogue] == (["Add", "Relu"] if residual else ["Relu"])
    plan = winograd_plan(node, TARGET, threads)
    assert {"rows": plan.by_tile, "bands": plan.band > 0, "columns": not plan.by_tile and not plan.band}[kind]
    return model, compiled


def _feeds(case: str, h: int, w: int) -> dict[str, np.ndarray]:
    c, batch = CASES[case][0], CASES[case][6]
    return {"x": np.random.default_rng(h * 1000 + w).standard_normal((batch, c, h, w)).astype(np.float32)}


def _check(case: str, threads: int, h: int, w: int) -> None:
    model, compiled = _compiled(case, threads)
    feeds = _feeds(case, h, w)
    got = compiled.run(feeds)[0]
    want = run_ort(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def _sizes(bound: tuple[int, int]) -> list[tuple[int, int]]:
    """The smallest, odd, ragged and whole-tile sizes, the bound, and small sizes after large ones."""
    h, w = bound
    sizes = [(5, 5), bound, (5, 7), (h - 1, w), (7, w - 3), (h, 5), (9, 11), bound, (6, 6), (h - 2, w - 1), (8, 8),
             (5, w), (h, w - 2), (13, 9)]
    return [(min(a, h), min(b, w)) for a, b in sizes]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_sizes(case: str, threads: int) -> None:
    for h, w in _sizes(CASES[case][3]):
        _check(case, threads, h, w)


@pytest.mark.parametrize("case", ["f2-columns", "f4-columns", "f4-bands"])
@given(data=st.data())
@SETTINGS
def test_drawn_sizes(case: str, data) -> None:
    bh, bw = CASES[case][3]
    _check(case, 1, data.draw(st.integers(5, bh), "h"), data.draw(st.integers(5, bw), "w"))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_reads_and_writes_stay_inside_extents(case: str, threads: int) -> None:
    """Data past the extents of a bound-shaped buffer is garbage: NaN there must not leak into
    the result (it would through the plane's padding or a transform's ragged tiles), and
    nothing past the extents is written."""
    model, compiled = _compiled(case, threads)
    build = compiled._current
    bh, bw = CASES[case][3]
    for h, w in [(bh, bw), (5, 5), (bh - 1, 7), (9, bw - 3)]:
        feeds = _feeds(case, h, w)
        assert_inside_extents(build, model, feeds, [h, w], RTOL, ATOL)


@pytest.mark.parametrize("c, pads, bound, banded", [(16, (0, 0, 0, 0), (22, 30), False),
                                                     (16, (1, 0, 2, 1), (21, 19), False),
                                                     (32, (0, 1, 2, 1), (50, 50), True),
                                                     (16, (2, 2, 0, 0), (33, 9), False)])
def test_pads(c: int, pads: tuple, bound: tuple[int, int], banded: bool) -> None:
    """No or asymmetric padding: the output's lengths are the input's plus the pads less 2, and
    the plane holds the input from its top and left pads (both tiles; in bands too)."""
    model = conv(c, 24, pads=pads)
    compiled = hobbit.compile(model, target=TARGET, threads=2, dynamic_shapes={"h": (5, bound[0]), "w": (5, bound[1])},
                              cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    (node,) = compiled.report.graph.nodes
    assert node.op == "ConvWinograd" and (winograd_plan(node, TARGET, 2).band > 0) == banded
    for h, w in [(5, 5), bound, (bound[0] - 1, 6), (7, bound[1] - 3), (11, min(13, bound[1])), (5, 5)]:
        feeds = {"x": np.random.default_rng(h * 100 + w).standard_normal((1, c, h, w)).astype(np.float32)}
        got, want = compiled.run(feeds)[0], run_ort(model, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


H, W = Extent(((0, 1),), 0), Extent(((1, 1),), 0)


def _node(x_ext, y_ext, attrs=None, epilogue=()) -> Node:
    x = Value("x", TensorType(np.dtype(np.float32), (1, 16, 12, 12)))
    u = Value("u", TensorType(np.dtype(np.float32), (16, 1, 16, 8)))
    y = Value("y", TensorType(np.dtype(np.float32), (1, 16, 12, 12)))
    x.extents, y.extents = x_ext, y_ext
    node = Node("ConvWinograd", "conv", [x, u], [y], {"tile": 2, "pads": (1, 1, 1, 1), "strides": (1, 1),
                                                      "dilations": (1, 1), "group": 1,
                                                      "weight_shape": (16, 16, 3, 3), **(attrs or {})})
    node.epilogue = list(epilogue)
    return node


def test_predicate() -> None:
    spatial = (None, None, H, W)
    assert winograd_dynamic(_node(spatial, spatial)) is None
    residual = Value("r", TensorType(np.dtype(np.float32), (1, 16, 12, 12)))
    residual.extents = spatial
    assert winograd_dynamic(_node(spatial, spatial, epilogue=[EpilogueStep("Add", residual, {}, "add")])) is None
    assert "pool" in winograd_dynamic(_node(spatial, spatial, {"pool": 2}))
    assert "bf16" in winograd_dynamic(_node(spatial, spatial, {"precision": "bf16"}))
    channels = (None, H, None, None)
    assert "channel" in winograd_dynamic(_node(channels, channels))
    other = Value("r", TensorType(np.dtype(np.float32), (1, 16, 12, 12)))
    other.extents = (None, None, W, H)
    unshared = _node(spatial, spatial, epilogue=[EpilogueStep("Add", other, {}, "add")])
    assert "does not share" in winograd_dynamic(unshared)
