"""The QDQ model: the float graph with QuantizeLinear -> DequantizeLinear pairs on each
quantized activation and DequantizeLinear on each int8 weight and int32 bias, named the way
onnxruntime's quantizer names them (T_scale, T_zero_point, T_quantized, ...).

Each activation gets one Q/DQ pair right after it is produced (or, for a graph input, at the
top) and every reader of it reads the DQ output, so an int8 runtime sees DQ -> op -> Q
around every quantized op. A graph output that is quantized keeps its name on the DQ output;
its producer writes T_QuantizeLinear_Input."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from hobbit.quantize.graph import OnnxGraph
from hobbit.quantize.params import activation_parameters, bias_parameters, weight_parameters
from hobbit.quantize.plan import QuantizationPlan


def write_qdq(model: onnx.ModelProto, plan: QuantizationPlan, ranges: dict[str, tuple[float, float]]
              ) -> onnx.ModelProto:
    """Rewrite `model` (already planned: BatchNorm folded, clamps dropped) in place and return it."""
    graph = OnnxGraph(model.graph)
    scales = _activation_initializers(graph, plan, ranges)
    head: list[onnx.NodeProto] = []
    weight_reads, weight_scales = _weight_nodes(graph, plan, head)
    bias_reads = _bias_nodes(graph, plan, scales, weight_reads, weight_scales, head)
    reads: dict[str, str] = {}
    body: list[onnx.NodeProto] = []
    activations = set(plan.activations())
    for value in graph.inputs:
        if value.name in activations:
            body.extend(_quantize_pair(value.name, value.name, plan.parameters_of(value.name), reads))
    for node in graph.proto.node:
        for position, name in enumerate(node.input):
            replacement = bias_reads.get((node.name, name)) or weight_reads.get((node.name, name)) or reads.get(name)
            if replacement:
                node.input[position] = replacement
        body.append(node)
        for position, name in enumerate(node.output):
            if name not in activations:
                continue
            source = name
            if name in graph.outputs:
                source = f"{name}_QuantizeLinear_Input"
                node.output[position] = source
            body.extend(_quantize_pair(source, name, plan.parameters_of(name), reads,
                                       graph_output=name in graph.outputs))
    del graph.proto.node[:]
    graph.proto.node.extend(head + body)
    del graph.proto.value_info[:]  # names moved; shapes are re-inferred by whoever reads the model
    graph.drop_unused_constants()
    return model


def _activation_initializers(graph: OnnxGraph, plan: QuantizationPlan, ranges: dict[str, tuple[float, float]]
                             ) -> dict[str, np.float32]:
    scales = {}
    for name in plan.calibrated:
        scale, zero = activation_parameters(*ranges[name])
        graph.set_initializer(f"{name}_scale", np.array(scale, dtype=np.float32))
        graph.set_initializer(f"{name}_zero_point", np.array(zero, dtype=np.uint8))
        scales[name] = scale
    return scales


def _quantize_pair(source: str, name: str, parameters: str, reads: dict[str, str], graph_output: bool = False
                   ) -> list[onnx.NodeProto]:
    scale, zero = f"{parameters}_scale", f"{parameters}_zero_point"
    quantized = f"{name}_QuantizeLinear_Output"
    dequantized = name if graph_output else f"{name}_DequantizeLinear_Output"
    reads[name] = dequantized
    return [helper.make_node("QuantizeLinear", [source, scale, zero], [quantized], name=f"{name}_QuantizeLinear"),
            helper.make_node("DequantizeLinear", [quantized, scale, zero], [dequantized],
                             name=f"{name}_DequantizeLinear")]


def _weight_nodes(graph: OnnxGraph, plan: QuantizationPlan, head: list[onnx.NodeProto]
                  ) -> tuple[dict[tuple[str, str], str], dict[str, np.ndarray]]:
    """DQ nodes for the int8 weights: (node, weight name) -> the tensor that node reads, and
    each DQ output's scale."""
    reads: dict[tuple[str, str], str] = {}
    scales: dict[str, np.ndarray] = {}
    done: dict[tuple[str, int | None], str] = {}
    for weight in plan.weights:
        key = (weight.name, weight.axis)
        if key not in done:
            base = weight.name if not any(k[0] == weight.name for k in done) else f"{weight.name}_axis{weight.axis}"
            quantized, scale = weight_parameters(graph.value(weight.name), weight.axis)
            graph.set_initializer(f"{base}_quantized", quantized)
            graph.set_initializer(f"{base}_scale", scale)
            graph.set_initializer(f"{base}_zero_point", np.zeros(scale.shape, dtype=np.int8))
            output = f"{base}_DequantizeLinear_Output"
            scales[output] = scale
            axis = {} if weight.axis is None else {"axis": weight.axis}
            head.append(helper.make_node("DequantizeLinear",
                                         [f"{base}_quantized", f"{base}_scale", f"{base}_zero_point"], [output],
                                         name=f"{base}_DequantizeLinear", **axis))
            done[key] = base
        reads[(weight.node, weight.name)] = f"{done[key]}_DequantizeLinear_Output"
    return reads, scales


def _bias_nodes(graph: OnnxGraph, plan: QuantizationPlan, scales: dict[str, np.float32],
                weight_reads: dict[tuple[str, str], str], weight_scales: dict[str, np.ndarray],
                head: list[onnx.NodeProto]) -> dict[tuple[str, str], str]:
    """DQ nodes for the int32 biases; (node, bias name) -> the tensor that node reads. A bias
    shared by nodes with different input or weight scales is quantized once per node."""
    reads: dict[tuple[str, str], str] = {}
    made: dict[tuple[str, str, str], str] = {}
    for bias in plan.biases:
        source = plan.parameters_of(bias.activation)
        weight_read = weight_reads.get((bias.node, bias.weight))
        if source not in scales or weight_read is None:
            continue
        key = (bias.name, source, weight_read)
        if key not in made:
            base = bias.name if not any(k[0] == bias.name for k in made) else f"{bias.name}_{len(made)}"
            quantized, scale = bias_parameters(graph.value(bias.name), scales[source], weight_scales[weight_read])
            graph.set_initializer(f"{base}_quantized", quantized)
            graph.set_initializer(f"{base}_quantized_scale", scale)
            graph.set_initializer(f"{base}_quantized_zero_point", np.zeros(scale.shape, dtype=np.int32))
            attrs = {"axis": 0} if scale.ndim else {}
            head.append(helper.make_node("DequantizeLinear", [f"{base}_quantized", f"{base}_quantized_scale",
                                                              f"{base}_quantized_zero_point"],
                                         [f"{base}_DequantizeLinear_Output"], name=f"{base}_DequantizeLinear",
                                         **attrs))
            made[key] = base
        reads[(bias.node, bias.name)] = f"{made[key]}_DequantizeLinear_Output"
    return reads
