"""Run-time extents (hobbit.graph.extents): the floor form of a strided window's output length,
checked against the ops' own output-length rule (hobbit.graph.shapes.pool_out_size) at every
size, and found from imports of a model at the bound and the probe sizes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from hobbit.dynamic_compile import _probe_points, _probe_sizes, _windows
from hobbit.frontend.formats import open_source
from hobbit.graph.extents import Extent, NotDynamic, Probe, extents_from_json, extents_to_json, find_extents
from hobbit.graph.shapes import Window

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None)
H = Extent(((0, 1),), 0)


def _window() -> st.SearchStrategy[Window]:
    return st.builds(Window, k=st.integers(1, 7), stride=st.integers(1, 4), dilation=st.integers(1, 3),
                     pad_begin=st.integers(0, 3), pad_end=st.integers(0, 3), ceil_mode=st.booleans())


@SETTINGS
@given(first=_window(), second=_window())
def test_window_extent_is_the_ops_output_length(first: Window, second: Window) -> None:
    """Through one window and then another, at every input size both windows accept."""
    one = H.window(first)
    if one is None:  # ceil_mode's last-window rule could drop a window: refused, not guessed
        assert first.ceil_mode
        return
    two = one.window(second)
    for h in range(1, 200):
        mid = first.out_size(h)
        if mid < 1:
            continue
        assert one.value([h]) == mid, (first, h)
        if two is not None and second.out_size(mid) >= 1:
            assert two.value([h]) == second.out_size(mid), (first, second, h)


def test_window_refuses_where_ceil_mode_drops_a_window() -> None:
    """k 2, stride 2, end pad 1: the window that would start on the end pad is dropped at even sizes."""
    window = Window(2, 2, 1, 0, 1, ceil_mode=True)
    assert [window.out_size(h) for h in (4, 5)] == [2, 3]
    assert H.window(window) is None


def test_floor_extent_describes_and_round_trips() -> None:
    e = H.window(Window(3, 2, 1, 1, 1))
    assert e == Extent(((0, 1),), 1, 2)
    assert e.describe(["height"]) == "(height + 1) // 2"
    assert e.plus(3).value([9]) == 8
    assert extents_from_json(extents_to_json((None, e, H))) == (None, e, H)
    assert "div" not in extents_to_json((H,))[0]  # affine entries keep their old form


def test_probe_sizes_lie_inside_the_range() -> None:
    assert _probe_sizes(1, 64) == [5, 7]
    assert _probe_sizes(64, 320) == [64, 65]
    assert _probe_sizes(6, 8) == [7, 6]
    assert _probe_sizes(7, 8) == [7]


def _model(nodes: list, initializers: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "windows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _extents(model: onnx.ModelProto, low: int, high: int) -> dict:
    source = open_source(model)
    ranges = [(low, high), (low, high)]
    def probe(point: tuple[int, ...]) -> Probe:
        return Probe(point, source.import_graph({"x": (1, 4) + point}))
    bound = probe((high, high))
    find_extents(bound, [probe(p) for p in _probe_points((high, high), ranges, ["h", "w"])], ["h", "w"], _windows)
    return {v.name: v.extents for node in bound.graph.nodes for v in node.outputs}


def test_strided_conv_and_ceil_pool_extents_are_found() -> None:
    """A stride-2 conv, a ReLU after it (an operand's length) and SqueezeNet's ceil-mode pool."""
    w = np.ones((4, 4, 3, 3), np.float32)
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["r"]),
                    helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
                   [("w", w)])
    found = _extents(model, 9, 64)
    conv = [e for name, e in found.items() if name.startswith("c") or "Conv" in name]
    (y,) = [e for name, e in found.items() if name == "y"]
    assert y[2].describe(["h", "w"]) == "(h + 1) // 4" and y[3].describe(["h", "w"]) == "(w + 1) // 4"
    assert conv and conv[0][2] == H.window(Window(3, 2, 1, 1, 1))


def test_a_length_no_candidate_fits_is_refused() -> None:
    """A stride-2 conv's output joined to itself along H: 2 * ((h + 1) // 2) is no floor of an
    affine length, so the model runs per shape."""
    w = np.ones((4, 4, 3, 3), np.float32)
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
                    helper.make_node("Concat", ["c", "c"], ["y"], axis=2)],
                   [("w", w)])
    with pytest.raises(NotDynamic, match="dim 2"):
        _extents(model, 9, 64)


def test_smallest_sizes_raise_the_low_bound_past_empty_windows() -> None:
    """Two stride-2 3x3 windows without padding: rows 7 give 3 then 1; fewer give nothing."""
    from hobbit.dynamic_compile import smallest_sizes
    w = np.ones((4, 4, 3, 3), np.float32)
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
                    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2])], [("w", w)])
    source = open_source(model)
    ranges = [(7, 64), (7, 64)]
    def probe(point: tuple[int, ...]) -> Probe:
        return Probe(point, source.import_graph({"x": (1, 4) + point}))
    bound = probe((64, 64))
    find_extents(bound, [probe(p) for p in _probe_points((64, 64), ranges, ["h", "w"])], ["h", "w"], _windows)
    assert smallest_sizes(bound.graph, (64, 64), ["h", "w"]) == (7, 7)
