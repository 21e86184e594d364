"""Weight layouts chosen for the target's vector width.

A convolution's GEMM normally runs vectors along the output positions (H*W).
When H*W fills vectors badly (7x7 = 49 positions use 64 lanes of 16: 23% idle)
and the output channels are a multiple of the vector width, the weights are
stored transposed ([C*KH*KW, OC], "KO", cut into NR-column panels) so the
kernel runs vectors along the output channels instead.

A MatMul's constant right operand (fully-connected weights) is cut into the
GEMM schedule's NR-column panels, each stored contiguously, so the kernel
streams it front to back instead of striding across rows."""

from __future__ import annotations

import numpy as np

from hobbit.target import Target
from hobbit.graph.ir import Graph, Node, Value
from hobbit.passes.choices import sized_choice
from hobbit.plan.gemm import gemm_schedule, pack_panels

IDLE_LANES_LIMIT = 0.10


def choose_layouts(graph: Graph, target: Target) -> Graph:
    for node in graph.nodes:
        if node.op == "Conv" and sized_choice(("conv weights KO", node.name),
                                              lambda node=node: _channels_fit_better(node, target)):
            _transpose_weights(node, target)
        elif node.op == "MatMul" and _constant_matrix_b(node):
            _pack_panels(node, target)
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


def _transpose_weights(node: Node, target: Target) -> None:
    """W^T = [C*KH*KW, OC], cut into the GEMM's NR-column panels (contiguous streams)."""
    w, out = node.inputs[1], node.outputs[0]
    ko = w.const.reshape(w.shape[0], -1).T
    positions = out.shape[2] * out.shape[3]
    nr = sized_choice(("conv weights KO panel", node.name),
                      lambda: gemm_schedule(positions, w.shape[0], ko.shape[0], target, np.dtype(w.dtype).itemsize).nr)
    node.inputs[1] = Value(f"{w.name}/KO", const=pack_panels(ko, nr))
    node.attrs = {**node.attrs, "weight_layout": "KO", "weight_shape": tuple(w.shape)}


def _constant_matrix_b(node: Node) -> bool:
    b = node.inputs[1]
    return b.const is not None and len(b.shape) == 2 and node.attrs.get("b_layout", "KN") == "KN"


def _pack_panels(node: Node, target: Target) -> None:
    a, b = node.inputs
    k, n = b.shape
    nr = sized_choice(("matmul weights panel", node.name),
                      lambda: gemm_schedule(a.shape[-2], n, k, target, np.dtype(b.dtype).itemsize).nr)
    node.inputs[1] = Value(f"{b.name}/panels", const=pack_panels(b.const, nr))
    node.attrs = {**node.attrs, "b_layout": "panels", "n": n}
