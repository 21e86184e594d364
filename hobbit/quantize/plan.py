"""Which tensors of a (BatchNorm-folded) float ONNX graph become int8, and how: the structure
onnxruntime's QDQ quantizer writes for CNNs, since that is what runtimes and hobbit's own
int8 pass recognise.

- Conv, Gemm, MatMul: constant weights int8 symmetric (per output channel when asked), the
  bias int32 at scale x_scale * w_scale, the other inputs and the output uint8 activations.
- Add, Concat, AveragePool, GlobalAveragePool: every computed input and the output are
  activations with their own parameters.
- MaxPool, Flatten, Reshape, Relu, Clip whose input is quantized: the output takes the
  input's parameters (max, reshapes and [0, max] clamps do not move values off the grid).
- A Relu, or a Clip with constant bounds, right after one of the ops above whose output
  nothing else reads is dropped: the producer writes its output, and quantizing to the
  clamped tensor's calibrated range (which contains 0) saturates exactly where it clamped.

Only float32 tensors are quantized; graph inputs and outputs stay float32 (a Q/DQ pair sits
right after an input and right before an output)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import onnx

from hobbit.quantize.graph import OnnxGraph

WEIGHTED = ("Conv", "Gemm", "MatMul")
OWN_PARAMETERS = ("Add", "Concat", "AveragePool", "GlobalAveragePool")
SHARED_PARAMETERS = ("MaxPool", "Flatten", "Reshape")
CLAMPS = ("Relu", "Clip")
QUANTIZED_OPS = WEIGHTED + OWN_PARAMETERS + SHARED_PARAMETERS + CLAMPS


@dataclass
class WeightInput:
    """A constant input of a Conv/Gemm/MatMul quantized to int8 along `axis` (None: per tensor)."""

    node: str
    name: str
    axis: int | None


@dataclass
class BiasInput:
    """A Conv/Gemm bias quantized to int32 at the scale of activation `activation` times the
    scale of weight `weight`."""

    node: str
    name: str
    activation: str
    weight: str


@dataclass
class QuantizationPlan:
    """What to quantize, by tensor name. `calibrated` are the activations whose range is
    measured; `shared` maps an activation to the one whose parameters it reuses."""

    calibrated: list[str] = field(default_factory=list)
    shared: dict[str, str] = field(default_factory=dict)
    weights: list[WeightInput] = field(default_factory=list)
    biases: list[BiasInput] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # names of the Relu/Clip nodes removed

    def activations(self) -> list[str]:
        return self.calibrated + list(self.shared)

    def parameters_of(self, tensor: str) -> str:
        while tensor in self.shared:
            tensor = self.shared[tensor]
        return tensor


def plan_quantization(graph: OnnxGraph, float_tensors: set[str], per_channel: bool) -> QuantizationPlan:
    """Decide, node by node in graph order, what to quantize (see the module docstring).
    `float_tensors` are the names whose type is float32. Removable Relu/Clip nodes are removed
    from `graph` here (their producer takes over their output name)."""
    plan = QuantizationPlan(dropped=_drop_clamps(graph))
    quantized: set[str] = set()

    def activation(name: str) -> None:
        if name and name not in quantized and name in float_tensors and not graph.is_constant(name):
            quantized.add(name)
            plan.calibrated.append(name)

    for node in graph.proto.node:
        if node.domain or node.op_type not in QUANTIZED_OPS:
            continue
        if node.op_type in WEIGHTED:
            _plan_weighted(graph, node, plan, activation, per_channel)
            activation(node.output[0])
        elif node.op_type in OWN_PARAMETERS:
            for name in node.input:
                activation(name)
            activation(node.output[0])
        elif node.input[0] in quantized and node.output[0] in float_tensors:
            quantized.add(node.output[0])
            plan.shared[node.output[0]] = node.input[0]
    return plan


def _plan_weighted(graph: OnnxGraph, node: onnx.NodeProto, plan: QuantizationPlan,
                   activation: Callable[[str], None], per_channel: bool) -> None:
    data = list(node.input[:2])
    weight_axis = _weight_axis(node, graph)
    for position, name in enumerate(data):
        value = graph.value(name)
        if value is None:
            activation(name)
        elif value.dtype.kind == "f" and value.ndim >= 1 and (position == 1 or node.op_type == "MatMul"):
            axis = weight_axis if per_channel and position == 1 and value.ndim >= 2 else None
            plan.weights.append(WeightInput(node.name, name, axis))
    if node.op_type == "MatMul" or len(node.input) < 3 or not node.input[2]:
        return
    bias = graph.value(node.input[2])
    if bias is None or bias.ndim != 1 or graph.value(node.input[0]) is not None or graph.value(node.input[1]) is None:
        return
    if node.op_type == "Gemm" and any(_attribute(node, name, 1.0) != 1.0 for name in ("alpha", "beta")):
        return  # the bias is not added at the product's scale
    plan.biases.append(BiasInput(node.name, node.input[2], node.input[0], node.input[1]))


def _weight_axis(node: onnx.NodeProto, graph: OnnxGraph) -> int:
    """The output-channel axis of the weight: Conv [M, C/g, k...] -> 0; Gemm B is [K, N]
    (axis 1) or, with transB, [N, K] (axis 0); MatMul's B is [..., K, N] -> its last axis."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        return 0 if _attribute(node, "transB", 0) else 1
    weight = graph.value(node.input[1])
    return weight.ndim - 1 if weight is not None else 1


def _attribute(node: onnx.NodeProto, name: str, default: float) -> float:
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def _drop_clamps(graph: OnnxGraph) -> list[str]:
    dropped = []
    for node in list(graph.proto.node):
        if node.domain or node.op_type not in CLAMPS or not _constant_bounds(graph, node):
            continue
        producer = graph.producer.get(node.input[0])
        if producer is None or producer.domain or producer.op_type not in WEIGHTED + OWN_PARAMETERS:
            continue
        if graph.only_consumer(node.input[0]) is not node:
            continue
        producer.output[0] = node.output[0]
        graph.proto.node.remove(node)
        graph.refresh()
        dropped.append(node.name or node.output[0])
    return dropped


def _constant_bounds(graph: OnnxGraph, node: onnx.NodeProto) -> bool:
    if node.op_type == "Relu":
        return True
    return all(not name or graph.is_constant(name) for name in node.input[1:])
