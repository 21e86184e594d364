"""BatchNormalization folded into the Conv before it, on the ONNX graph.

Quantization needs it before calibration: the int8 Conv's weights must be the folded ones
(quantizing W and then scaling by gamma/sigma would scale the quantization error per channel
too) and its output range must be the BatchNorm's output range, the tensor the next op reads."""

from __future__ import annotations

import numpy as np

from hobbit.quantize.graph import OnnxGraph


def fold_batchnorm(graph: OnnxGraph) -> int:
    """Fold every BatchNormalization (inference form, constant parameters) whose input is a
    Conv's output read by nothing else; returns how many were folded."""
    folded = 0
    for bn in [n for n in graph.proto.node if n.op_type == "BatchNormalization" and not n.domain]:
        conv = graph.producer.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or graph.only_consumer(bn.input[0]) is not bn:
            continue
        if len(bn.output) > 1 and any(bn.output[1:]):
            continue  # training mode: running statistics are outputs
        params = [graph.value(name) for name in bn.input[1:5]]
        weight = graph.value(conv.input[1])
        bias = graph.value(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
        if weight is None or any(p is None for p in params) or (len(conv.input) > 2 and conv.input[2] and bias is None):
            continue
        gamma, beta, mean, var = (p.astype(np.float64) for p in params)
        epsilon = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        scale = gamma / np.sqrt(var + epsilon)
        new_weight = (weight.astype(np.float64) * scale.reshape(-1, *([1] * (weight.ndim - 1)))).astype(weight.dtype)
        new_bias = ((0.0 if bias is None else bias.astype(np.float64)) - mean) * scale + beta
        weight_name = _fresh(graph, f"{conv.input[1]}_bn_folded")
        bias_name = _fresh(graph, f"{conv.name or conv.output[0]}_bias_bn_folded")
        graph.set_initializer(weight_name, new_weight)
        graph.set_initializer(bias_name, new_bias.astype(weight.dtype))
        inputs = [conv.input[0], weight_name, bias_name]
        del conv.input[:]
        conv.input.extend(inputs)
        conv.output[0] = bn.output[0]
        graph.proto.node.remove(bn)
        graph.refresh()
        folded += 1
    if folded:
        graph.drop_unused_constants()
    return folded


def _fresh(graph: OnnxGraph, name: str) -> str:
    taken = set(graph.initializers) | set(graph.producer) | {v.name for v in graph.proto.input}
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate
