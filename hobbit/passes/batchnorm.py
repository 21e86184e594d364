"""BatchNorm folding.

Inference BatchNorm is y = x*s + t per channel (s = scale/sqrt(var+eps),
t = B - mean*s). After a Conv whose weights are constant, s scales each output
channel's filter and t becomes the bias: the BN disappears. After a MatMul
with a constant 2-D right operand the same holds for its columns. Any other
BatchNorm is rewritten to Mul+Add, which fusion can still merge into a producer."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import EpilogueStep, Graph, Node, Value
from hobbit.graph.rewrite import use_counts


def _scale_shift(bn: Node) -> tuple[np.ndarray, np.ndarray]:
    scale, bias, mean, var = (v.const.astype(np.float64) for v in bn.inputs[1:5])
    s = scale / np.sqrt(var + bn.attrs["epsilon"])
    return s, bias - mean * s


def fold_batchnorm(graph: Graph) -> Graph:
    uses = use_counts(graph)
    kept: list[Node] = []
    for node in graph.nodes:
        if node.op != "BatchNormalization":
            kept.append(node)
            continue
        producer = node.inputs[0].producer
        if producer is not None and producer in kept and uses.get(id(node.inputs[0])) == 1 \
                and _fold_into(producer, node):
            producer.outputs[0] = node.outputs[0]
            node.outputs[0].producer = producer
            continue
        kept.extend(decompose_batchnorm(node))
    graph.nodes = kept
    graph.relink()
    return graph


def _fold_into(producer: Node, bn: Node) -> bool:
    s, t = _scale_shift(bn)
    dtype = bn.outputs[0].dtype
    if producer.op == "Conv" and not producer.epilogue and producer.inputs[1].const is not None \
            and all(v.const is not None for v in producer.inputs[2:]):
        w = producer.inputs[1].const
        b = producer.inputs[2].const if len(producer.inputs) > 2 else np.zeros(w.shape[0])
        new_w = (w * s.reshape(-1, 1, 1, 1)).astype(dtype)
        new_b = (b * s + t).astype(dtype)
        producer.inputs = [producer.inputs[0], Value(f"{bn.name}/folded_W", const=new_w),
                           Value(f"{bn.name}/folded_B", const=new_b)]
        return True
    if producer.op == "MatMul" and not producer.epilogue and producer.inputs[1].const is not None \
            and producer.inputs[1].const.ndim == 2 and len(bn.inputs[0].shape) == 2:
        w = producer.inputs[1].const
        producer.inputs = [producer.inputs[0], Value(f"{bn.name}/folded_W", const=(w * s).astype(dtype))]
        # MatMul has no bias input: the shift becomes its first epilogue step.
        shift = Value(f"{bn.name}/folded_B", const=t.astype(dtype))
        producer.epilogue.append(EpilogueStep("Add", shift, {}, bn.name))
        return True
    return False


def decompose_batchnorm(bn: Node) -> list[Node]:
    """x*s + t with constants shaped to broadcast over the channel axis (axis 1)."""
    s, t = _scale_shift(bn)
    x, y = bn.inputs[0], bn.outputs[0]
    shape = (-1,) + (1,) * (len(x.shape) - 2)
    dtype = y.dtype
    scaled = Value(f"{bn.name}/scaled", x.type)
    mul = Node("Mul", f"{bn.name}/mul", [x, Value(f"{bn.name}/s", const=s.reshape(shape).astype(dtype))], [scaled])
    add = Node("Add", f"{bn.name}/add", [scaled, Value(f"{bn.name}/t", const=t.reshape(shape).astype(dtype))], [y])
    scaled.producer, y.producer = mul, add
    return [mul, add]
