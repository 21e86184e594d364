"""Helpers for the pass tests: import small ONNX models and evaluate graphs with
the op registry's numpy references, so a pass's rewrite can be checked against
the graph it started from without generating code."""

from __future__ import annotations

import numpy as np
import onnx

from hobbit.frontend.onnx.importer import import_onnx
from hobbit.graph.ir import Graph, Value
from hobbit.ops.registry import get_op, with_defaults
from tests.helpers import make_model


def import_model(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
                 initializers: dict[str, np.ndarray] | None = None, opset: int = 17) -> Graph:
    return import_onnx(make_model(nodes, inputs, outputs, initializers, opset))


def evaluate(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run `graph` node by node with numpy references, epilogue steps included."""
    env: dict[int, np.ndarray] = {id(v): feeds[v.name] for v in graph.inputs}

    def read(v: Value) -> np.ndarray:
        return v.const if v.const is not None else env[id(v)]

    for node in graph.nodes:
        ins = [None if v is None else read(v) for v in node.inputs]
        results = list(get_op(node.op).reference(ins, with_defaults(node)))
        for step in node.epilogue:
            args = [results[0]] + ([read(step.operand)] if step.operand is not None else [])
            if step.swap:
                args.reverse()
            opdef = get_op(step.op)
            results[0] = opdef.reference(args, {**opdef.attrs, **step.attrs})[0]
        for out, data in zip(node.outputs, results):
            env[id(out)] = np.asarray(data)
    return [read(v) for v in graph.outputs]


def ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]
