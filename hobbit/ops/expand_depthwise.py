"""ExpandDepthwise: a 1x1 expansion conv and the depthwise conv reading it, fused by the
`fuse-depthwise` pass (hobbit/passes/expand_depthwise.py) and lowered as one kernel
(hobbit/lower/expand_depthwise.py). Inputs X, W1 [C_mid, C, 1, 1], B1, W2 [C_mid, 1, KH, KW], B2;
attrs are the depthwise conv's, plus `inner`: the expansion's fused activation steps."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Node, TensorType, Value
from hobbit.graph.registry import OpDef, get_op, register_op
from hobbit.lower.expand_depthwise import lower_expand_depthwise, scratch_bytes
from hobbit.ops.nn import conv_flops, conv_infer, conv_reference

_EXPAND = {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1}


def _depthwise_node(node: Node) -> Node:
    """The depthwise conv alone, as the Conv registry sees it (for shapes and flops)."""
    mid = TensorType(node.inputs[0].dtype, (node.inputs[0].shape[0], node.inputs[1].shape[0],
                                            *node.inputs[0].shape[2:]))
    return Node("Conv", node.name, [Value("mid", mid), node.inputs[3], node.inputs[4]], list(node.outputs),
                {**get_op("Conv").attrs, **{k: node.attrs[k] for k in ("strides", "dilations", "pads", "group")}})


def _infer(node: Node) -> list[TensorType]:
    return conv_infer(_depthwise_node(node))


def _reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w1, b1, w2, b2 = ins
    mid = conv_reference([x, w1, b1], _EXPAND)[0]
    for step in a["inner"]:
        mid = get_op(step.op).reference([mid], step.attrs)[0]
    return conv_reference([mid, w2, b2], {k: a[k] for k in ("strides", "dilations", "pads", "group")})


def _flops(node: Node) -> int:
    n, c, h, w = node.inputs[0].shape
    return 2 * n * node.inputs[1].shape[0] * c * h * w + conv_flops(_depthwise_node(node))


register_op(OpDef(
    "ExpandDepthwise", infer=_infer, reference=_reference, lower=lower_expand_depthwise, flops=_flops,
    epilogue_view=lambda n: (n.outputs[0].shape[0], n.outputs[0].shape[1],
                             n.outputs[0].shape[2] * n.outputs[0].shape[3]),
    scratch_bytes=scratch_bytes,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "inner": ()},
    doc="1x1 conv (+ bias, activation) feeding a depthwise conv, computed in bands of rows"))
