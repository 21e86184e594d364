"""Sized choices (hobbit.passes.choices): a pass's speed choice made at a run-time-dims model's
bound is replayed at the probe sizes, so the graphs agree and the model stays one module."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hobbit.backend.select import backend_for
from hobbit.dynamic_compile import _probe_points, _windows
from hobbit.frontend.formats import open_source
from hobbit.graph.extents import Probe, find_extents
from hobbit.passes import run_pipeline
from hobbit.passes.choices import computed_once, recording, replaying, sized_choice
from hobbit.target import host_target


def test_recorded_choices_are_replayed_and_nothing_else() -> None:
    with recording() as choices:
        assert sized_choice(("tile", "a"), lambda: 4) == 4
    assert choices == {("tile", "a"): 4}
    with replaying(choices):
        assert sized_choice(("tile", "a"), lambda: 2) == 4
        assert sized_choice(("tile", "b"), lambda: 2) == 2  # never recorded: decided here
    assert sized_choice(("tile", "a"), lambda: 2) == 2  # outside: decided every time


def test_work_on_a_constant_is_done_once_per_content_across_the_imports() -> None:
    calls = []

    def double(a: np.ndarray) -> np.ndarray:
        calls.append(a)
        return a * 2

    w = np.arange(6, dtype=np.float32)
    with recording() as choices:
        first = computed_once("double", w, double)
        assert computed_once("double", w.copy(), double) is first  # same content, another array
        assert computed_once("triple", w, double) is not first  # another kind of work
    with replaying(choices):
        assert computed_once("double", w.copy(), double) is first
        changed = computed_once("double", w + 1, double)  # another content: computed, never stale
        np.testing.assert_array_equal(changed, (w + 1) * 2)
    assert len(calls) == 3
    computed_once("double", w, double)  # outside: every time
    assert len(calls) == 4


def _conv3x3() -> onnx.ModelProto:
    w = np.random.default_rng(0).standard_normal((16, 16, 3, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_bounds_winograd_tile_holds_at_the_probes() -> None:
    """At 40x40 the Winograd pass picks F(4x4); at the probes' 5x5 it would pick F(2x2)."""
    target = host_target()
    backend = backend_for(target)
    source = open_source(_conv3x3())
    def at(point: tuple[int, ...]) -> Probe:
        graph = source.import_graph({"x": (1, 16) + point})
        return Probe(point, run_pipeline(graph, backend.pipeline("fp32", target, None), target))
    with recording() as choices:
        bound = at((40, 40))
    with replaying(choices):
        probes = [at(p) for p in _probe_points((40, 40), [(1, 40), (1, 40)], ["h", "w"])]
    assert [n.attrs["tile"] for n in bound.graph.nodes if n.op == "ConvWinograd"] == [4]
    assert all(n.attrs["tile"] == 4 for p in probes for n in p.graph.nodes if n.op == "ConvWinograd")
    assert at((5, 5)).graph.nodes[0].attrs["tile"] == 2  # what a probe alone would pick
    find_extents(bound, probes, ["h", "w"], _windows)
    assert bound.graph.outputs[0].extents[2:] == bound.graph.inputs[0].extents[2:]
