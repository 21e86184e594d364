"""BatchNorm folding.

Inference BatchNorm is y = x*s + t per channel (s = scale/sqrt(var+eps),
t = B - mean*s). After a Conv whose weights are constant, s scales each output
channel's filter and t becomes the bias: the BN disappears. After a MatMul
with a constant 2-D right operand the same holds for its columns. Any other
BatchNorm is rewritten to Mul+Add, which fusion can still merge into a producer.

Keras 3 and TFLite write inference BatchNorm (and a conv's bias) as separate Mul, Add,
Sub and Div by per-channel constants. Right after such a Conv they fold the same way,
into its filters and bias, so an imported Keras network computes exactly what the same
network from ONNX does; fused as epilogue steps instead, each would cost an operation
per output element on every run."""

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
        if node.op in _AFFINE and _fold_affine(node, kept, uses):
            continue
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


_AFFINE = ("Mul", "Div", "Add", "Sub")


def _fold_affine(node: Node, kept: list[Node], uses: dict[int, int]) -> bool:
    """Fold `node`, an element-wise op of a Conv's output (read only here) and a per-channel
    constant, into that Conv's filters (Mul, Div) or bias (Add, Sub)."""
    for position in (0, 1):
        x, c = node.inputs[position], node.inputs[1 - position]
        conv = x.producer
        if c.const is None or conv is None or conv.op != "Conv" or conv not in kept or uses.get(id(x)) != 1:
            continue
        if (position == 1 and node.op in ("Sub", "Div")) or not _foldable_conv(conv):
            continue
        per_channel = _per_channel(c.const, x.shape)
        if per_channel is None or np.dtype(x.dtype).kind != "f" or node.outputs[0].dtype != x.dtype:
            continue
        w = conv.inputs[1].const.astype(np.float64)
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        b = bias.const.astype(np.float64) if bias is not None else np.zeros(w.shape[0])
        if node.op in ("Mul", "Div"):
            scale = per_channel if node.op == "Mul" else 1.0 / per_channel
            w, b = w * scale.reshape(-1, *(1,) * (w.ndim - 1)), b * scale
        else:
            b = b + per_channel if node.op == "Add" else b - per_channel
        dtype = x.dtype
        conv.inputs = [conv.inputs[0], Value(f"{node.name}/folded_W", const=w.astype(dtype)),
                       Value(f"{node.name}/folded_B", const=b.astype(dtype))]
        conv.outputs[0] = node.outputs[0]
        node.outputs[0].producer = conv
        return True
    return False


def _foldable_conv(conv: Node) -> bool:
    return (not conv.epilogue and conv.inputs[1].const is not None
            and all(v is None or v.const is not None for v in conv.inputs[2:]))


def _per_channel(c: np.ndarray, shape: tuple) -> np.ndarray | None:
    """The constant as one value per output channel (axis 1 of `shape`), if it broadcasts
    only along that axis and does not change the output's shape."""
    if c.ndim > len(shape):
        return None
    full = c.reshape((1,) * (len(shape) - c.ndim) + c.shape)
    channels = shape[1]
    if any(d != 1 for axis, d in enumerate(full.shape) if axis != 1) or full.shape[1] not in (1, channels):
        return None
    return np.broadcast_to(full.reshape(-1).astype(np.float64), (channels,))


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
