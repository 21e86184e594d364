"""Constant folding: all-constant nodes are evaluated at compile time, others are kept."""

from __future__ import annotations

import numpy as np
from onnx import helper

from hobbit.graph.ir import EpilogueStep, Node, TensorType, Value
from hobbit.passes.fold import fold_constants
from tests.helpers import assert_matches_ort, make_model, rand
from tests.passes import evaluate, import_model, ops


def _with_constant_subgraph():
    """y = x + Neg(a * b), where a*b and its Neg are nodes added after import
    (the importer would have folded them itself)."""
    x = rand(2, 3)
    graph = import_model([helper.make_node("Add", ["x", "x"], ["y"], name="add")], {"x": x}, ["y"])
    a = Value("a", const=rand(2, 3, seed=1))
    b = Value("b", const=rand(3, seed=2))
    ab = Value("ab", TensorType(np.dtype(np.float32), (2, 3)))
    neg = Value("neg", TensorType(np.dtype(np.float32), (2, 3)))
    add = graph.nodes[0]
    graph.nodes[:0] = [Node("Mul", "mul", [a, b], [ab]), Node("Neg", "negate", [ab], [neg])]
    add.inputs[1] = neg
    graph.relink()
    return graph, x, a.const, b.const


def test_folds_constant_chain_into_one_constant() -> None:
    graph, x, a, b = _with_constant_subgraph()
    reference = evaluate(graph, {"x": x})[0]
    fold_constants(graph)
    assert ops(graph) == ["Add"]
    folded = graph.nodes[0].inputs[1]
    assert folded.const is not None
    assert folded.const.dtype == np.float32 and folded.const.shape == (2, 3)
    np.testing.assert_allclose(folded.const, -(a * b), rtol=1e-6)
    np.testing.assert_allclose(evaluate(graph, {"x": x})[0], reference, rtol=1e-6)


def test_keeps_nodes_with_a_runtime_input() -> None:
    graph, x, _, _ = _with_constant_subgraph()
    add = graph.nodes[-1]
    fold_constants(graph)
    assert graph.nodes == [add] and add.inputs[0] is graph.inputs[0]


def test_keeps_node_with_epilogue() -> None:
    """A fused group's epilogue semantics are not the node's reference; never fold it."""
    c = Value("c", const=np.ones((2,), np.float32))
    y = Value("y", TensorType(np.dtype(np.float32), (2,)))
    x = rand(2)
    graph = import_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], {"x": x}, ["y"])
    node = Node("Neg", "neg", [c], [y], epilogue=[EpilogueStep("Add", graph.inputs[0], {}, "add")])
    graph.nodes = [node]
    graph.outputs = [y]
    graph.relink()
    fold_constants(graph)
    assert graph.nodes == [node]


def test_output_that_becomes_constant() -> None:
    graph, x, a, b = _with_constant_subgraph()
    graph.outputs = [graph.nodes[1].outputs[0]]  # the Neg: computable at compile time
    fold_constants(graph)
    assert graph.outputs[0].const is not None
    np.testing.assert_allclose(graph.outputs[0].const, -(a * b), rtol=1e-6)


def test_compiled_models_with_constant_subgraphs_match_onnxruntime() -> None:
    x = rand(2, 3)
    k1, k2 = rand(2, 3, seed=1), rand(3, seed=2)
    nodes = [helper.make_node("Mul", ["k1", "k2"], ["k"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Reshape", ["k", "shape"], ["kr"]),
             helper.make_node("Add", ["x", "kr"], ["y"]),
             helper.make_node("Sub", ["k1", "k2"], ["z"])]  # a constant graph output
    assert_matches_ort(make_model(nodes, {"x": x}, ["y", "z"], {"k1": k1, "k2": k2}), {"x": x})
