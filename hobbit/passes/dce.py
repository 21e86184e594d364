"""Dead-code elimination: drop nodes none of whose outputs reach a graph output."""

from __future__ import annotations

from hobbit.graph.ir import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    live = {id(v) for v in graph.outputs}
    kept = []
    for node in reversed(graph.nodes):
        if any(id(o) in live for o in node.outputs):
            kept.append(node)
            live.update(id(v) for v in node.operands())
    graph.nodes = kept[::-1]
    return graph
