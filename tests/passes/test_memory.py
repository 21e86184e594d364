"""Memory planning: arena slots are shared only between values whose lifetimes are
disjoint, views alias their input, and everything is 64-byte aligned."""

from __future__ import annotations

import itertools

import numpy as np
from onnx import helper

from hobbit.graph.ir import Graph, Value
from hobbit.ops.registry import get_op
from hobbit.passes import run_pipeline
from hobbit.target import host_target
from hobbit.plan.memory import MemoryPlan
from hobbit.passes.memory import ALIGN, plan_memory
from hobbit.plan.planners import kernel_plan
from tests.helpers import assert_matches_ort, make_model, rand
from tests.passes import import_model


def _planned(nodes, feeds, outputs, inits=None, passes=None) -> tuple[Graph, MemoryPlan]:
    graph = run_pipeline(import_model(nodes, feeds, outputs, inits), passes)
    return graph, plan_memory(graph)


def _root(v: Value) -> Value:
    while v.producer is not None and get_op(v.producer.op).kind == "view":
        v = v.producer.inputs[0]
    return v


def _arena_blocks(graph: Graph, plan: MemoryPlan) -> list[tuple[str, int, int, int, int]]:
    """(name, offset, nbytes, first, last) of every arena block, lifetimes computed
    here independently: from the producing node to the last node reading the value
    or any view of it; scratch lives during its node only."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    values: dict[int, Value] = {}
    for pos, node in enumerate(graph.nodes):
        for out in node.outputs:
            root = _root(out)
            if plan.place(root).kind == "arena":
                values[id(root)] = root
                first.setdefault(id(root), pos)
                last[id(root)] = max(last.get(id(root), pos), pos)
        for v in node.operands():
            root = _root(v)
            if id(root) in values:
                last[id(root)] = pos
    blocks = [(v.name, plan.place(v).index, v.type.nbytes, first[k], last[k]) for k, v in values.items()]
    for pos, node in enumerate(graph.nodes):
        if id(node) in plan.scratch:
            size = kernel_plan(node, host_target(), 1).scratch_bytes
            blocks.append((f"{node.name}/scratch", plan.scratch[id(node)].index, size, pos, pos))
    return blocks


def _check_plan(graph: Graph, plan: MemoryPlan) -> list[tuple[str, int, int, int, int]]:
    blocks = _arena_blocks(graph, plan)
    for name, offset, size, _, _ in blocks:
        assert offset % ALIGN == 0, name
        assert offset + size <= plan.arena_bytes, name
    for a, b in itertools.combinations(blocks, 2):
        lives_together = a[3] <= b[4] and b[3] <= a[4]
        bytes_overlap = a[1] < b[1] + b[2] and b[1] < a[1] + a[2]
        assert not (lives_together and bytes_overlap), (a, b)
    aligned_total = sum(-(-size // ALIGN) * ALIGN for _, _, size, _, _ in blocks)
    assert plan.arena_bytes % ALIGN == 0 and plan.arena_bytes <= aligned_total
    for const in graph.constants():
        assert plan.place(const).kind == "const" and plan.place(const).index % ALIGN == 0
    return blocks


def _chain(n: int) -> list:
    ops = ["Relu", "Sigmoid", "Tanh", "Neg", "Exp", "Abs"]
    names = ["x"] + [f"t{i}" for i in range(n - 1)] + ["y"]
    return [helper.make_node(ops[i % len(ops)], [names[i]], [names[i + 1]], name=f"n{i}") for i in range(n)]


def test_disjoint_lifetimes_share_bytes() -> None:
    x = rand(3, 50)  # 600 bytes: not a multiple of the alignment
    graph, plan = _planned(_chain(6), {"x": x}, ["y"], passes=[])
    blocks = _check_plan(graph, plan)
    assert len(blocks) == 5
    offsets = [b[1] for b in blocks]
    assert len(set(offsets)) <= 2  # a chain never needs more than two live buffers
    assert plan.arena_bytes <= 2 * 640
    assert_matches_ort(make_model(_chain(6), {"x": x}, ["y"]), {"x": x})


def test_branches_with_overlapping_lifetimes_do_not_overlap() -> None:
    """A diamond with long-lived values and different sizes, planned with no fusion."""
    x = rand(4, 16)
    inits = {"w1": rand(16, 32, seed=1), "w2": rand(32, 8, seed=2), "w3": rand(16, 8, seed=3)}
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("MatMul", ["a", "w1"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["c"]),
             helper.make_node("MatMul", ["a", "w3"], ["d"]),
             helper.make_node("MatMul", ["c", "w2"], ["e"]),
             helper.make_node("Tanh", ["e"], ["f"]),
             helper.make_node("Add", ["f", "d"], ["g"]),
             helper.make_node("Neg", ["g"], ["h"]),
             helper.make_node("Add", ["h", "d"], ["y"])]
    graph, plan = _planned(nodes, {"x": x}, ["y"], inits, passes=[])
    blocks = _check_plan(graph, plan)
    assert len(blocks) >= 7
    assert_matches_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})


def test_view_shares_its_input_place_and_keeps_it_alive() -> None:
    x = rand(2, 3, 4)
    inits = {"shape": np.array([6, 4], np.int64)}
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["v"], name="reshape"),
             helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
             helper.make_node("Tanh", ["s"], ["t"], name="tanh"),
             helper.make_node("Reshape", ["t", "shape"], ["tv"], name="reshape2"),
             helper.make_node("Add", ["v", "tv"], ["y"], name="add")]
    graph, plan = _planned(nodes, {"x": x}, ["y"], inits, passes=[])
    by_name = {n.name: n for n in graph.nodes}
    relu_out = by_name["relu"].outputs[0]
    view = by_name["reshape"].outputs[0]
    assert plan.place(view) == plan.place(relu_out) and plan.place(view).kind == "arena"
    blocks = {b[0]: b for b in _check_plan(graph, plan)}
    # Relu's buffer is read (through the view) by the last Add, so it outlives Sigmoid/Tanh.
    assert blocks[relu_out.name][4] == len(graph.nodes) - 1
    assert_matches_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})


def test_view_of_graph_input_uses_the_input_buffer() -> None:
    x = rand(2, 6)
    inits = {"shape": np.array([3, 4], np.int64)}
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["v"], name="reshape"),
             helper.make_node("Relu", ["v"], ["y"], name="relu")]
    graph, plan = _planned(nodes, {"x": x}, ["y"], inits, passes=[])
    assert plan.place(graph.nodes[0].outputs[0]).kind == "input"
    assert plan.arena_bytes == 0
    assert_matches_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})


def test_scratch_does_not_overlap_live_values() -> None:
    x = rand(1, 4, 9, 9)
    inits = {"w": rand(8, 4, 3, 3, seed=1), "w2": rand(4, 8, 3, 3, seed=2)}
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Conv", ["a", "w"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "a"], ["y"])]
    graph, plan = _planned(nodes, {"x": x}, ["y"], inits)
    _check_plan(graph, plan)
    assert_matches_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, rtol=1e-4, atol=1e-4)
