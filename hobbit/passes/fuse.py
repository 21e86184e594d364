"""Operator fusion: element-wise ops become epilogue steps of their producer.

An element-wise node E whose input x comes from a kernel P (Conv, MatMul, or
another element-wise group) merges into P when x has no other reader and is
not a graph output, E does not broadcast x to a bigger shape, and E's other
operand can be indexed in P's epilogue view. P then writes E's output and moves
to E's place in the schedule (so E's other operand, e.g. a residual branch, is
ready). Conv -> Add(bias) -> Add(residual) -> Relu thus becomes one kernel."""

from __future__ import annotations

from hobbit.graph.ir import EpilogueStep, Graph, Node, Value
from hobbit.ops.registry import get_op
from hobbit.graph.rewrite import use_counts
from hobbit.graph.shapes import view_strides


def fuse_epilogues(graph: Graph) -> Graph:
    uses = use_counts(graph)
    outputs = {id(v) for v in graph.outputs}
    order = list(graph.nodes)
    for node in list(order):
        if get_op(node.op).kind != "elementwise" or node.epilogue or len(node.outputs) != 1:
            continue
        for slot, x in enumerate(node.inputs):
            producer = x.producer if x is not None else None
            if producer is None or producer not in order or uses.get(id(x)) != 1 or id(x) in outputs:
                continue
            other = node.inputs[1 - slot] if len(node.inputs) == 2 else None
            if _fusable(producer, node, x, other):
                _merge(order, producer, node, x, other, slot)
                break
    graph.nodes = order
    graph.relink()
    return graph


def _fusable(producer: Node, node: Node, x: Value, other: Value | None) -> bool:
    view_fn = get_op(producer.op).epilogue_view
    if get_op(producer.op).kind == "elementwise":
        view = tuple(producer.outputs[0].shape)
    elif view_fn is not None:
        view = view_fn(producer)
    else:
        return False
    out = node.outputs[0]
    if len(producer.outputs) != 1 or tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
        return False
    if len(node.inputs) > 2 or get_op(node.op).kind != "elementwise":
        return False
    if other is None:
        return True
    return other.dtype == x.dtype and view_strides(tuple(other.shape), tuple(out.shape), view) is not None


def _merge(order: list[Node], producer: Node, node: Node, x: Value, other: Value | None, slot: int) -> None:
    producer.epilogue.append(EpilogueStep(node.op, other, dict(node.attrs), node.name, swap=slot == 1))
    producer.outputs[0] = node.outputs[0]
    node.outputs[0].producer = producer
    order.remove(producer)
    order[order.index(node)] = producer
