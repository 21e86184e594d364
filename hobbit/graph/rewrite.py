"""Small graph-editing helpers shared by the passes."""

from __future__ import annotations

from hobbit.graph.ir import Graph, Value


def replace_uses(graph: Graph, old: Value, new: Value) -> None:
    """Make every reader of `old` (node inputs, epilogue operands, graph outputs) read `new`."""
    for node in graph.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
        for step in node.epilogue:
            if step.operand is old:
                step.operand = new
    graph.outputs = [new if v is old else v for v in graph.outputs]


def use_counts(graph: Graph) -> dict[int, int]:
    """id(value) -> number of reads, graph outputs included."""
    counts: dict[int, int] = {}
    for node in graph.nodes:
        for v in node.operands():
            counts[id(v)] = counts.get(id(v), 0) + 1
    for v in graph.outputs:
        counts[id(v)] = counts.get(id(v), 0) + 1
    return counts
