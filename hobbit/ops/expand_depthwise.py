"""ExpandDepthwise: a 1x1 expansion conv and the depthwise conv reading it, optionally with
the 1x1 projection conv reading that (a MobileNet inverted-residual block), fused by the
`fuse-depthwise` pass (hobbit/passes/expand_depthwise.py) and lowered as one kernel
(hobbit/backend/cpu/expand_depthwise.py).

Inputs X, W1 [C_mid, C, 1, 1], B1, W2 [C_mid, 1, KH, KW], B2 [, W3 [C_out, C_mid, 1, 1], B3];
attrs are the depthwise conv's, plus `inner`: the expansion's fused activation steps and
`middle`: the depthwise conv's (when it is followed by the projection)."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, get_op, register_op
from hobbit.plan.expand_depthwise import projects, shapes
from hobbit.ops.nn import conv_reference

_POINTWISE = {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1}
_DEPTHWISE = ("strides", "dilations", "pads", "group")


def _infer(node: Node) -> list[TensorType]:
    _, d = shapes(node)
    channels = node.inputs[5].shape[0] if projects(node) else d.oc
    return [TensorType(node.inputs[0].dtype, (d.n, channels, d.oh, d.ow))]


def _steps(x: np.ndarray, steps: tuple) -> np.ndarray:
    for step in steps:
        x = get_op(step.op).reference([x], step.attrs)[0]
    return x


def _reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    mid = _steps(conv_reference(ins[0:3], _POINTWISE)[0], a["inner"])
    y = conv_reference([mid, ins[3], ins[4]], {k: a[k] for k in _DEPTHWISE})[0]
    if len(ins) > 5:
        y = conv_reference([_steps(y, a["middle"]), ins[5], ins[6]], _POINTWISE)
        return y
    return [y]


def _flops(node: Node) -> int:
    e, d = shapes(node)
    total = 2 * e.n * e.oc * e.c * e.h * e.w + 2 * d.n * d.c * d.oh * d.ow * d.kh * d.kw
    if projects(node):
        total += 2 * d.n * node.inputs[5].shape[0] * d.c * d.oh * d.ow
    return total


def _view(node: Node) -> tuple[int, ...]:
    n, c, h, w = node.outputs[0].shape
    return (n, c, h * w)


register_op(OpDef(
    "ExpandDepthwise", infer=_infer, reference=_reference, flops=_flops,
    epilogue_view=_view,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "inner": (), "middle": ()},
    doc="1x1 conv (+ bias, activation) feeding a depthwise conv (+ optionally a 1x1 projection), "
        "computed in bands of rows"))
