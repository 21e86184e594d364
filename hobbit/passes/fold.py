"""Constant folding: a node whose inputs are all constants is evaluated with its
numpy reference at compile time and replaced by the result."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Graph, Value
from hobbit.ops.registry import get_op
from hobbit.graph.rewrite import replace_uses


def fold_constants(graph: Graph) -> Graph:
    kept = []
    for node in list(graph.nodes):
        operands = node.operands()
        if node.epilogue or not operands or any(v.const is None for v in operands):
            kept.append(node)
            continue
        try:
            results = get_op(node.op).reference([None if v is None else v.const for v in node.inputs], node.attrs)
        except (ShapeError, IndexError, ValueError) as exc:  # e.g. a constant index out of range
            raise ShapeError(f"node '{node.name}' ({node.op}) cannot be evaluated on its constant inputs: "
                             f"{exc}") from exc
        for out, data in zip(node.outputs, results):
            replace_uses(graph, out, Value(out.name, const=np.asarray(data, dtype=out.dtype)))
    graph.nodes = kept
    return graph
