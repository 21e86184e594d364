"""fuse-pool: a 2x2, stride-2 max pool that alone reads a Winograd conv's output runs in
the conv's output transform (ConvWinograd attr pool=2), so the full-size activation, four
times the pooled one, is never written and read back. VGG-16 has five such pairs
(Conv -> Relu -> MaxPool), the first over a 12.8 MB activation.

The conv's fused steps must be operand-free and monotone non-decreasing (Relu, Clip,
...): the kernel then pools first and applies them to the pooled values, which gives
the same result as pooling the activated ones."""

from __future__ import annotations

from hobbit.graph.ir import Graph, Node
from hobbit.graph.rewrite import use_counts

MONOTONE_STEPS = {"Relu", "Clip", "Sigmoid", "Tanh"}


def fuse_pool(graph: Graph) -> Graph:
    uses = use_counts(graph)
    outputs = {id(v) for v in graph.outputs}
    order = list(graph.nodes)
    for pool in list(order):
        x = pool.inputs[0] if pool.op == "MaxPool" else None
        conv = x.producer if x is not None else None
        if conv is None or conv not in order or uses.get(id(x)) != 1 or id(x) in outputs:
            continue
        if _fusable(conv, pool):
            conv.attrs = {**conv.attrs, "pool": 2}
            conv.outputs = list(pool.outputs)
            conv.name = f"{conv.name} + {pool.name}"
            order.remove(pool)
    graph.nodes = order
    graph.relink()
    return graph


def _fusable(conv: Node, pool: Node) -> bool:
    a = pool.attrs
    if conv.op != "ConvWinograd" or conv.attrs.get("pool", 1) != 1 or len(pool.outputs) != 1:
        return False
    if tuple(a["kernel_shape"]) != (2, 2) or tuple(a["strides"]) != (2, 2) or any(a["pads"]) \
            or tuple(a["dilations"]) != (1, 1):
        return False
    _, _, h, w = conv.outputs[0].shape
    steps_ok = all(s.operand is None and s.op in MONOTONE_STEPS for s in conv.epilogue)
    return h % 2 == 0 and w % 2 == 0 and steps_ok
