"""Epilogue fusion: element-wise consumers merge into their producer's kernel only
when that is invisible (single reader, not an output, expressible broadcast)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from hobbit.passes.fuse import fuse_epilogues
from tests.helpers import assert_matches_ort, make_model, rand
from tests.passes import evaluate, import_model, ops


def _fuse(nodes, feeds, outputs, inits=None):
    """Fuse; check the fused graph computes what the unfused one did; compile vs onnxruntime."""
    graph = import_model(nodes, feeds, outputs, inits)
    reference = evaluate(graph, feeds)
    fuse_epilogues(graph)
    for got, want in zip(evaluate(graph, feeds), reference):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert_matches_ort(make_model(nodes, feeds, outputs, inits), feeds, rtol=1e-4, atol=1e-4)
    return graph


def _conv(out: str = "c") -> object:
    return helper.make_node("Conv", ["x", "w"], [out], name="conv", pads=[1, 1, 1, 1])


def _conv_inputs():
    return {"x": rand(2, 3, 5, 6)}, {"w": rand(4, 3, 3, 3, seed=1)}


def test_conv_bias_residual_relu_become_one_node() -> None:
    feeds, inits = _conv_inputs()
    feeds["r"] = rand(2, 4, 5, 6, seed=3)
    inits["b"] = rand(4, 1, 1, seed=2)
    nodes = [_conv(), helper.make_node("Add", ["c", "b"], ["cb"], name="bias"),
             helper.make_node("Add", ["r", "cb"], ["s"], name="residual"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert ops(graph) == ["Conv"]
    node = graph.nodes[0]
    assert [s.op for s in node.epilogue] == ["Add", "Add", "Relu"]
    assert node.fused_names == ["conv", "bias", "residual", "relu"]
    assert node.epilogue[0].operand.const.shape == (4, 1, 1) and not node.epilogue[0].swap
    assert node.epilogue[1].operand is graph.inputs[1] and node.epilogue[1].swap
    assert node.epilogue[2].operand is None
    assert node.outputs[0] is graph.outputs[0]


def test_swapped_operand_of_non_commutative_op() -> None:
    feeds, inits = _conv_inputs()
    inits["k"] = rand(1, 4, 1, 1, seed=4)
    nodes = [_conv(), helper.make_node("Sub", ["k", "c"], ["d"], name="sub"),
             helper.make_node("Div", ["d", "k"], ["y"], name="div")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert [(s.op, s.swap) for s in graph.nodes[0].epilogue] == [("Sub", True), ("Div", False)]


def test_not_fused_when_intermediate_has_two_readers() -> None:
    feeds, inits = _conv_inputs()
    nodes = [_conv(), helper.make_node("Relu", ["c"], ["y"], name="relu"),
             helper.make_node("Sigmoid", ["c"], ["z"], name="sigmoid")]
    graph = _fuse(nodes, feeds, ["y", "z"], inits)
    assert ops(graph) == ["Conv", "Relu", "Sigmoid"]
    assert not graph.nodes[0].epilogue


def test_not_fused_when_intermediate_is_graph_output() -> None:
    feeds, inits = _conv_inputs()
    nodes = [_conv(), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = _fuse(nodes, feeds, ["y", "c"], inits)
    assert ops(graph) == ["Conv", "Relu"]
    assert not graph.nodes[0].epilogue


def test_not_fused_when_operand_broadcast_is_not_expressible_in_the_view() -> None:
    """Conv hands its epilogue [N, C, H*W]; a [1,1,H,1] operand varies along H but not W,
    which no single stride over the merged H*W dim can express."""
    feeds, inits = _conv_inputs()
    inits["h"] = rand(1, 1, 5, 1, seed=5)
    nodes = [_conv(), helper.make_node("Add", ["c", "h"], ["y"], name="add")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert ops(graph) == ["Conv", "Add"]
    assert not graph.nodes[0].epilogue


def test_expressible_broadcasts_are_fused() -> None:
    feeds, inits = _conv_inputs()
    inits["hw"] = rand(5, 6, seed=6)  # varies over H*W as one contiguous dim
    inits["s"] = np.float32(0.5)  # a scalar
    nodes = [_conv(), helper.make_node("Mul", ["c", "hw"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "s"], ["y"], name="add")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert ops(graph) == ["Conv"] and [s.op for s in graph.nodes[0].epilogue] == ["Mul", "Add"]


def test_not_fused_when_consumer_broadcasts_the_intermediate() -> None:
    """c is [2,4,1,1]; Add makes it [2,4,5,6]: the kernel would write more than it computes."""
    feeds = {"x": rand(2, 3, 3, 3), "r": rand(2, 4, 5, 6, seed=3)}
    inits = {"w": rand(4, 3, 3, 3, seed=1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Add", ["c", "r"], ["y"], name="add")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert ops(graph) == ["Conv", "Add"]


def test_elementwise_chain_becomes_one_node() -> None:
    feeds = {"a": rand(3, 4), "b": rand(3, 4, seed=1)}
    inits = {"k": rand(4, seed=2)}
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "k"], ["m"], name="mul"),
             helper.make_node("Sigmoid", ["m"], ["y"], name="sigmoid")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    assert ops(graph) == ["Add"]
    assert graph.nodes[0].fused_names == ["add", "mul", "sigmoid"]
    assert graph.nodes[0].outputs[0] is graph.outputs[0]


def test_fused_producer_moves_after_the_residual_branch() -> None:
    """The residual operand is computed by a node listed after the Conv; the fused
    kernel must run after it."""
    feeds, inits = _conv_inputs()
    nodes = [_conv(), helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("Conv", ["t", "w"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "c2"], ["y"], name="add")]
    graph = _fuse(nodes, feeds, ["y"], inits)
    names = [n.name for n in graph.nodes]
    assert names == ["tanh", "conv2", "conv"] or names == ["conv", "tanh", "conv2"]
    fused = next(n for n in graph.nodes if n.epilogue)
    operand = fused.epilogue[0].operand
    assert names.index(operand.producer.name) < names.index(fused.name)
