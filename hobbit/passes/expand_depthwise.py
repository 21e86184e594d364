"""fuse-depthwise: a 1x1 expansion conv whose only reader is a depthwise conv becomes one
ExpandDepthwise node, so the wide intermediate tensor lives in cache, band by band, instead
of going to memory (see hobbit/backend/cpu/expand_depthwise.py). When a 1x1 projection conv alone
reads the depthwise output, it joins too (a whole MobileNet inverted-residual block).

It runs after `fuse`: the expansion may carry element-wise steps without operands
(Relu, Clip), which the fused kernel applies before the depthwise conv. Without a
projection the depthwise conv's epilogue stays the node's; with one, the depthwise steps
(operand-free) become `middle` and the projection's epilogue (e.g. the residual Add) is
the node's. Only expansions larger than L2 are fused: smaller ones come back from L3
quickly enough that the rows computed twice at band edges cost more than they save
(measured on MobileNetV2-shaped blocks: the 96x112x112 and 144x56x56 ones gain 5-10%,
the 192x28x28 one loses 8%)."""

from __future__ import annotations

import numpy as np

from hobbit.target import Target
from hobbit.graph.ir import Graph, Node, Value
from hobbit.graph.rewrite import use_counts
from hobbit.plan.conv import conv_shape, input_rows


def fuse_expand_depthwise(graph: Graph, target: Target) -> Graph:
    uses = use_counts(graph)
    outputs = {id(v) for v in graph.outputs}
    producers = {id(n.outputs[0]): n for n in graph.nodes if n.outputs}
    order = list(graph.nodes)
    for node in list(order):
        expand = producers.get(id(node.inputs[0])) if node.op == "Conv" and node.inputs else None
        if expand is None or expand not in order or uses.get(id(node.inputs[0])) != 1:
            continue
        if _fusable(expand, node, target):
            fused = _fused(expand, node)
            order[order.index(node)] = fused
            order.remove(expand)
            project = _projection(fused, order, uses, outputs)
            if project is not None:
                _absorb_projection(fused, project)
                order.remove(fused)
                order[order.index(project)] = fused
    graph.nodes = order
    graph.relink()
    return graph


def _projection(fused: Node, order: list[Node], uses: dict[int, int], outputs: set[int]) -> Node | None:
    """The 1x1 conv that alone reads the depthwise output, if the depthwise steps allow it."""
    out = fused.outputs[0]
    if uses.get(id(out)) != 1 or id(out) in outputs or any(s.operand is not None for s in fused.epilogue):
        return None
    for node in order:
        if node.op == "Conv" and node.inputs and node.inputs[0] is out:
            s = conv_shape(node)
            if s.pointwise and s.group == 1 and node.attrs.get("weight_layout", "OIHW") == "OIHW":
                return node
            return None
    return None


def _absorb_projection(fused: Node, project: Node) -> None:
    """The projection conv becomes the last stage: its weights, bias and epilogue join the node."""
    c_out = project.inputs[1].shape[0]
    fused.inputs += [project.inputs[1], _bias(project, c_out, project.inputs[0].dtype)]
    fused.attrs["middle"] = tuple(fused.epilogue)
    fused.epilogue = list(project.epilogue)
    fused.outputs = list(project.outputs)
    fused.name = f"{fused.name} + {project.name}"


def _fusable(expand: Node, depthwise: Node, target: Target) -> bool:
    if expand.op != "Conv" or len(expand.outputs) != 1:
        return False
    if any(n.attrs.get("weight_layout", "OIHW") != "OIHW" for n in (expand, depthwise)):
        return False
    if any(np.dtype(v.dtype) != np.float32 for v in (expand.inputs[0], depthwise.outputs[0])):
        return False
    e, d = conv_shape(expand), conv_shape(depthwise)
    if not (e.pointwise and e.group == 1 and d.depthwise and d.oc == d.c):
        return False
    if any(step.operand is not None for step in expand.epilogue):
        return False
    big = e.oc * e.h * e.w * 4 > target.l2_bytes
    return big and d.h >= input_rows(d, 2) and d.oh >= 2


def _fused(expand: Node, depthwise: Node) -> Node:
    c_mid = expand.inputs[1].shape[0]
    dtype = expand.inputs[0].dtype
    inputs = [expand.inputs[0], expand.inputs[1], _bias(expand, c_mid, dtype),
              depthwise.inputs[1], _bias(depthwise, c_mid, dtype)]
    attrs = {k: depthwise.attrs[k] for k in ("strides", "dilations", "pads", "group")}
    attrs["inner"] = tuple(expand.epilogue)
    attrs["middle"] = ()
    node = Node("ExpandDepthwise", f"{expand.name} + {depthwise.name}", inputs, list(depthwise.outputs), attrs)
    node.epilogue = list(depthwise.epilogue)
    return node


def _bias(conv: Node, channels: int, dtype) -> Value:
    if len(conv.inputs) > 2 and conv.inputs[2] is not None:
        return conv.inputs[2]
    return Value(f"{conv.name}/zero_bias", const=np.zeros(channels, dtype=dtype))
