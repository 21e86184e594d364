"""Concat in place: the producers of a Concat's inputs write straight into their
slices of its output, and the Concat itself generates no code.

Legal when each slice is one contiguous block of the output (every dim before
the axis is 1: NCHW channel concat at batch 1, as in SqueezeNet's Fire modules,
Inception and DenseNet), and each input is the sole output of a kernel, read by
nothing but this Concat (no other reader could see a half-written buffer, no
graph output or input is involved)."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Graph, Node, Value
from hobbit.graph.rewrite import use_counts
from hobbit.passes.memory import needs_code


def concat_in_place(graph: Graph) -> Graph:
    uses = use_counts(graph)
    outputs = {id(v) for v in graph.outputs}
    for node in graph.nodes:
        if node.op == "Concat" and not node.epilogue and _fits(node, uses, outputs):
            start = 0
            for v in node.inputs:
                v.slice_of = (node.outputs[0], start)
                start += v.type.nbytes
            node.attrs = {**node.attrs, "in_place": True}
    return graph


def _fits(node: Node, uses: dict[int, int], outputs: set[int]) -> bool:
    out = node.outputs[0]
    if int(np.prod(out.shape[:node.attrs["axis"]], dtype=np.int64)) != 1:
        return False
    return all(_written_by_kernel(v) and uses.get(id(v)) == 1 and id(v) not in outputs for v in node.inputs)


def _written_by_kernel(value: Value) -> bool:
    producer = value.producer
    return (producer is not None and needs_code(producer) and len(producer.outputs) == 1
            and value.slice_of is None and value.const is None)
