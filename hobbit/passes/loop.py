"""Loop bodies through the pass pipeline: each BoundedLoop's body graph gets the passes
the model gets (fusion, folding, layout, memory planning later), as a graph of its own.

After its passes, the body's constants (weights, and what folding and fusion made) become
inputs of the body and of the loop node, so they are packed into the model's weights
with the rest and the loop's kernel hands the body pointers to them; they stay constants
in the body, so kernels that read constant data into their code still do."""

from __future__ import annotations

from typing import Callable

from hobbit.graph.ir import Graph


def run_bodies(graph: Graph, run: Callable[[Graph], Graph]) -> Graph:
    for node in graph.nodes:
        if node.op != "BoundedLoop":
            continue
        body = run(node.attrs["body"])
        fed = {id(v) for v in body.inputs}
        hoisted = [v for v in body.constants() if id(v) not in fed]
        body.inputs = body.inputs + hoisted
        node.inputs = node.inputs + hoisted
        node.attrs = {**node.attrs, "body": body}
    return graph
