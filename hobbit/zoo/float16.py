"""float16 copies of models, as exporters and onnxconverter_common's float16 converter make them.

Every float32 tensor of the graph becomes float16: initializers, Constant values, graph inputs,
outputs and value_info, and Casts to float32 become Casts to float16. Inputs that the standard
requires to stay float32 (Resize's and Upsample's scales) are left alone. The zoo uses this to
benchmark the same network in both precisions; the weights are the float32 model's, rounded.

The zoo's float16 variants fold BatchNormalization into the Conv before them in float32 first,
as PyTorch's exporter does for a model in eval mode. Left in, onnxruntime folds them itself in
float16, rounding the folded weights: that moves its logits by up to 0.039 on MobileNetV2 and
0.0068 on ResNet-18 (measured against the same session with graph optimizations off, which
agrees with hobbit to one float16 ulp), more than the bench's agreement check allows."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hobbit.errors import ModelFormatError
from hobbit.zoo.mobilenet import mobilenet_v2
from hobbit.zoo.resnet import resnet18
from hobbit.zoo.squeezenet import squeezenet1_1

# (op type, input index) pairs the standard types as float32 whatever the model's precision.
_FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float16 copy of `model` (the model itself is not changed)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    keep = {node.input[i] for node in graph.node for op, i in _FLOAT32_INPUTS
            if node.op_type == op and len(node.input) > i}
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and init.name not in keep:
            init.CopyFrom(_half_tensor(init))
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        if info.type.tensor_type.elem_type == TensorProto.FLOAT and info.name not in keep:
            info.type.tensor_type.elem_type = TensorProto.FLOAT16
    for node in graph.node:
        _convert_node(node, keep)
    return model


def _convert_node(node: onnx.NodeProto, keep: set[str]) -> None:
    for attr in node.attribute:
        if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
            attr.i = TensorProto.FLOAT16
        if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.FLOAT \
                and not (node.op_type == "Constant" and node.output[0] in keep):
            attr.t.CopyFrom(_half_tensor(attr.t))
        if attr.type == onnx.AttributeProto.GRAPH:
            raise ModelFormatError(f"to_float16: node '{node.name}' ({node.op_type}) has a subgraph, "
                                   "which this converter does not rewrite")


def _half_tensor(tensor: onnx.TensorProto) -> onnx.TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name)


def fold_batchnorm(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each BatchNormalization that alone reads a Conv with constant
    weights folded into that Conv's weights and bias (in float64, stored as the weights' dtype)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    reads = Counter(name for node in graph.node for name in node.input)
    kept = []
    for node in graph.node:
        conv = producers.get(node.input[0]) if node.op_type == "BatchNormalization" else None
        if conv is None or conv.op_type != "Conv" or reads[node.input[0]] != 1 \
                or not all(name in inits for name in list(conv.input[1:]) + list(node.input[1:5])):
            kept.append(node)
            continue
        _fold_into(conv, node, inits, graph)
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in graph.node for name in node.input}
    live = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live)
    return model


def _fold_into(conv: onnx.NodeProto, bn: onnx.NodeProto, inits: dict[str, onnx.TensorProto],
               graph: onnx.GraphProto) -> None:
    scale, shift, mean, var = (numpy_helper.to_array(inits[n]).astype(np.float64) for n in bn.input[1:5])
    eps = next((helper.get_attribute_value(a) for a in bn.attribute if a.name == "epsilon"), 1e-5)
    s = scale / np.sqrt(var + eps)
    w = numpy_helper.to_array(inits[conv.input[1]])
    b = numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64) if len(conv.input) > 2 else 0.0
    names = (f"{conv.name}.folded_weight", f"{conv.name}.folded_bias")
    graph.initializer.extend([numpy_helper.from_array((w * s.reshape(-1, 1, 1, 1)).astype(w.dtype), names[0]),
                              numpy_helper.from_array((b * s + shift - mean * s).astype(w.dtype), names[1])])
    conv.input[:] = [conv.input[0], *names]
    conv.output[0] = bn.output[0]


def squeezenet1_1_fp16() -> onnx.ModelProto:
    """squeezenet1_1 in float16 (weights, activations, input and output)."""
    return to_float16(squeezenet1_1())


def resnet18_fp16() -> onnx.ModelProto:
    """resnet18 in float16, BatchNorms folded into the Convs in float32 first."""
    return to_float16(fold_batchnorm(resnet18()))


def mobilenet_v2_fp16() -> onnx.ModelProto:
    """mobilenet_v2 in float16, BatchNorms folded into the Convs in float32 first."""
    return to_float16(fold_batchnorm(mobilenet_v2()))
