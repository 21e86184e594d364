"""The pass pipeline: any subset/order of passes gives the same numbers, because
legalisation always runs; unknown names are rejected up front."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import HobbitError
from hobbit.frontend.onnx.importer import import_onnx
from hobbit.passes import DEFAULT_PIPELINE, PASSES, run_pipeline
from tests.helpers import make_model, rand, run_ort
from tests.passes import ops


def _model():
    """Conv -> BN -> Relu, a dead branch, a constant subexpression, and an output
    that is just the graph input (needs a copy)."""
    x = rand(1, 3, 6, 6)
    rng = np.random.default_rng(7)
    inits = {"w": rand(4, 3, 3, 3, seed=1), "scale": rng.uniform(0.5, 2, 4).astype(np.float32),
             "bias": rand(4, seed=2), "mean": rand(4, seed=3),
             "var": rng.uniform(0.5, 2, 4).astype(np.float32), "k1": rand(4, 1, 1, seed=4),
             "k2": rand(4, 1, 1, seed=5)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["x"], ["unused"], name="dead"),
             helper.make_node("Mul", ["k1", "k2"], ["k"], name="const_mul"),
             helper.make_node("Add", ["r", "k"], ["y"], name="add"),
             helper.make_node("Identity", ["x"], ["x_out"], name="identity")]
    return make_model(nodes, {"x": x}, ["y", "x_out"], inits), {"x": x}


def _assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("passes", [[], None, ["fuse"], ["fold-batchnorm"], ["dce", "fold"],
                                    ["fuse", "fold-batchnorm", "fold", "dce"]], ids=str)
def test_any_pipeline_gives_correct_results(passes: list[str] | None) -> None:
    model, feeds = _model()
    _assert_close(hobbit.compile(model, passes=passes).run(feeds), run_ort(model, feeds))


def test_empty_pipeline_still_legalizes() -> None:
    model, feeds = _model()
    graph = run_pipeline(import_onnx(model), [])
    assert "BatchNormalization" not in ops(graph)
    assert {"Mul", "Add"} <= set(ops(graph))
    assert ops(graph)[-1] == "Copy"  # x_out would otherwise alias the input buffer
    assert graph.outputs[1].producer.inputs[0] is graph.inputs[0]


def test_default_pipeline_folds_and_fuses() -> None:
    model, _ = _model()
    graph = run_pipeline(import_onnx(model))
    assert ops(graph) == ["Conv", "Copy"]
    assert [s.op for s in graph.nodes[0].epilogue] == ["Relu", "Add"]


def test_unknown_pass_name_is_rejected() -> None:
    model, _ = _model()
    with pytest.raises(HobbitError, match="no-such-pass") as info:
        hobbit.compile(model, passes=["dce", "no-such-pass"])
    for name in PASSES:
        assert name in str(info.value)


def test_default_pipeline_names_are_known() -> None:
    assert all(name in PASSES for name in DEFAULT_PIPELINE)
