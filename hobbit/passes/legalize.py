"""Legalisation that always runs last, whatever passes the user switched off:
leftover BatchNorms become Mul+Add, and every graph output gets a buffer of its
own (an output that is a graph input, a constant, a view, or repeated is copied)."""

from __future__ import annotations

from hobbit.graph.ir import Graph, Node, Value
from hobbit.passes.batchnorm import decompose_batchnorm
from hobbit.passes.memory import is_view


def legalize(graph: Graph) -> Graph:
    nodes: list[Node] = []
    for node in graph.nodes:
        nodes.extend(decompose_batchnorm(node) if node.op == "BatchNormalization" else [node])
    graph.nodes = nodes
    seen: set[int] = set()
    outputs = []
    for i, v in enumerate(graph.outputs):
        needs_copy = (id(v) in seen or v.const is not None or v.producer is None
                      or v in graph.inputs or is_view(v.producer))
        seen.add(id(v))
        if needs_copy:
            copy = Value(f"{v.name}/out{i}", v.type)
            node = Node("Copy", f"output{i}", [v], [copy])
            copy.producer = node
            graph.nodes.append(node)
            v = copy
        outputs.append(v)
    graph.outputs = outputs
    graph.relink()
    return graph
