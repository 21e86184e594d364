"""Zero-size tensors become constants before anything is lowered.

A tensor with a zero-length dimension holds no data, so it is known at compile time:
a node that only produces such tensors needs no kernel, and a node whose every
operand is a constant or empty (a MatMul over K = 0, a sum over an empty axis) is
evaluated with its numpy reference. Kernels therefore never see a zero trip count
in the loops they tile. This is legalisation, not optimisation: it runs whatever
pipeline the user chose."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Graph, Node, Value
from hobbit.ops.registry import get_op
from hobbit.graph.rewrite import replace_uses


def fold_empty(graph: Graph) -> Graph:
    kept = []
    for node in list(graph.nodes):
        results = _known_results(node)
        if results is None:
            kept.append(node)
            continue
        for out, data in zip(node.outputs, results):
            replace_uses(graph, out, Value(out.name, const=np.asarray(data, dtype=out.dtype).reshape(out.shape)))
    graph.nodes = kept
    return graph


def _known_results(node: Node) -> list[np.ndarray] | None:
    """The node's outputs when they follow from shapes alone, else None."""
    if node.epilogue:
        return None
    if all(_is_empty(out) for out in node.outputs):
        return [np.empty(out.shape, out.dtype) for out in node.outputs]
    operands = [v for v in node.inputs if v is not None]
    if not any(_is_empty(v) and v.const is None for v in operands):
        return None
    if not all(v.const is not None or _is_empty(v) for v in operands):
        return None
    args = [None if v is None else v.const if v.const is not None else np.empty(v.shape, v.dtype)
            for v in node.inputs]
    try:
        return get_op(node.op).reference(args, node.attrs)
    except ValueError:  # numpy has no identity for this reduction of nothing: the kernel decides
        return None


def _is_empty(value: Value) -> bool:
    return any(d == 0 for d in value.shape)
