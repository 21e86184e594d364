"""Weight layouts chosen for the target's vector width.

A convolution's GEMM normally runs vectors along the output positions (H*W).
When H*W fills vectors badly (7x7 = 49 positions use 64 lanes of 16: 23% idle)
and the output channels are a multiple of the vector width, the weights are
stored transposed ([C*KH*KW, OC], "KO") so the kernel runs vectors along the
output channels instead."""

from __future__ import annotations

import numpy as np

from hobbit.codegen.target import Target
from hobbit.graph.ir import Graph, Node, Value

IDLE_LANES_LIMIT = 0.10


def choose_layouts(graph: Graph, target: Target) -> Graph:
    for node in graph.nodes:
        if node.op == "Conv" and _channels_fit_better(node, target):
            _transpose_weights(node)
    return graph


def idle_fraction(extent: int, lanes: int) -> float:
    padded = -(-extent // lanes) * lanes
    return (padded - extent) / padded


def _channels_fit_better(node: Node, target: Target) -> bool:
    w, out = node.inputs[1], node.outputs[0]
    if w.const is None or node.attrs["group"] != 1 or node.attrs.get("weight_layout", "OIHW") != "OIHW":
        return False
    lanes = target.lanes(np.dtype(out.dtype).itemsize)
    oc, positions = out.shape[1], out.shape[2] * out.shape[3]
    return oc % lanes == 0 and idle_fraction(positions, lanes) > IDLE_LANES_LIMIT


def _transpose_weights(node: Node) -> None:
    w = node.inputs[1]
    ko = np.ascontiguousarray(w.const.reshape(w.shape[0], -1).T)
    node.inputs[1] = Value(f"{w.name}/KO", const=ko)
    node.attrs = {**node.attrs, "weight_layout": "KO", "weight_shape": tuple(w.shape)}
