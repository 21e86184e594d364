"""Dead-code elimination: unused branches go, everything that reaches an output stays."""

from __future__ import annotations

import numpy as np
from onnx import helper

from hobbit.passes.dce import eliminate_dead_code
from hobbit.passes.fuse import fuse_epilogues
from tests.helpers import assert_matches_ort, make_model, rand
from tests.passes import evaluate, import_model


def _branchy_nodes() -> list:
    """y = Relu(x) + Exp(x); a dead chain Sigmoid -> Neg and a dead Tanh hang off x."""
    return [
        helper.make_node("Sigmoid", ["x"], ["dead1"], name="dead_sigmoid"),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Neg", ["dead1"], ["dead2"], name="dead_neg"),
        helper.make_node("Exp", ["x"], ["e"], name="exp"),
        helper.make_node("Tanh", ["r"], ["dead3"], name="dead_tanh"),
        helper.make_node("Add", ["r", "e"], ["y"], name="add"),
    ]


def test_removes_unused_branches_and_keeps_used_ones() -> None:
    x = rand(2, 3)
    graph = import_model(_branchy_nodes(), {"x": x}, ["y"])
    assert len(graph.nodes) == 6  # the importer itself keeps every node
    reference = evaluate(graph, {"x": x})
    eliminate_dead_code(graph)
    assert [n.name for n in graph.nodes] == ["relu", "exp", "add"]
    np.testing.assert_allclose(evaluate(graph, {"x": x})[0], reference[0], rtol=1e-6)


def test_keeps_every_node_feeding_any_output() -> None:
    x = rand(2, 3)
    graph = import_model(_branchy_nodes(), {"x": x}, ["y", "dead2"])
    eliminate_dead_code(graph)
    assert [n.name for n in graph.nodes] == ["dead_sigmoid", "relu", "dead_neg", "exp", "add"]


def test_epilogue_operands_count_as_uses() -> None:
    """After fusion a residual branch is read only by an epilogue step; it must survive."""
    x, w = rand(1, 2, 4, 4), rand(2, 2, 1, 1, seed=1)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="side"),
             helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Add", ["c", "s"], ["y"], name="residual")]
    graph = import_model(nodes, {"x": x}, ["y"], {"w": w})
    fuse_epilogues(graph)
    assert [n.name for n in graph.nodes] == ["side", "conv"]
    eliminate_dead_code(graph)
    assert [n.name for n in graph.nodes] == ["side", "conv"]


def test_graph_without_dead_code_is_unchanged() -> None:
    x = rand(3)
    graph = import_model([helper.make_node("Relu", ["x"], ["a"], name="a"),
                          helper.make_node("Neg", ["a"], ["y"], name="b")], {"x": x}, ["y"])
    before = list(graph.nodes)
    eliminate_dead_code(graph)
    assert len(graph.nodes) == len(before) and all(a is b for a, b in zip(graph.nodes, before))


def test_compiled_model_with_dead_branches_matches_onnxruntime() -> None:
    x = rand(2, 3)
    assert_matches_ort(make_model(_branchy_nodes(), {"x": x}, ["y"]), {"x": x})
