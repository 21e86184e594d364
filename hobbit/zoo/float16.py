"""float16 copies of models, as exporters and onnxconverter_common's float16 converter make them.

Every float32 tensor of the graph becomes float16: initializers, Constant values, graph inputs,
outputs and value_info, and Casts to float32 become Casts to float16. Inputs that the standard
requires to stay float32 (Resize's and Upsample's scales) are left alone. The zoo uses this to
benchmark the same network in both precisions; the weights are the float32 model's, rounded."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from hobbit.errors import ModelFormatError

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
