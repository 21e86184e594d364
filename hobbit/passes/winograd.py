"""Algorithm choice: 3x3 stride-1 convolutions with enough channels become
Winograd F(2x2, 3x3) convolutions (2.25x fewer multiply-adds). The weights are
transformed here, once, at compile time.

Below ~16 input or output channels the input/output transforms cost more than
the GEMM saves, and a stem conv (3 channels) stays direct."""

from __future__ import annotations

from hobbit.graph.ir import Graph, Node, Value
from hobbit.lower.winograd import transform_weights

MIN_CHANNELS = 16


def use_winograd(graph: Graph) -> Graph:
    for i, node in enumerate(graph.nodes):
        if _eligible(node):
            graph.nodes[i] = _rewrite(node)
    graph.relink()
    return graph


def _eligible(node: Node) -> bool:
    if node.op != "Conv" or node.epilogue or node.inputs[1].const is None:
        return False
    a = node.attrs
    oc, c, kh, kw = node.inputs[1].shape
    return ((kh, kw) == (3, 3) and tuple(a["strides"]) == (1, 1) and tuple(a["dilations"]) == (1, 1)
            and a["group"] == 1 and c >= MIN_CHANNELS and oc >= MIN_CHANNELS
            and node.inputs[0].dtype == node.inputs[1].dtype and str(node.inputs[0].dtype) == "float32")


def _rewrite(node: Node) -> Node:
    w = node.inputs[1]
    u = Value(f"{w.name}/winograd", const=transform_weights(w.const))
    attrs = {**node.attrs, "weight_shape": tuple(w.shape)}
    return Node("ConvWinograd", node.name, [node.inputs[0], u] + node.inputs[2:], node.outputs, attrs)
