"""ONNX ModelProto -> Graph.

Import runs in two sweeps. The first checks every node against the converter
table so that all unsupported ops are reported at once, before any work. The
second converts node by node; each emitted graph op is type-checked through the
op registry, and ops whose inputs are all constant are evaluated on the spot
with their numpy reference, so the shape arithmetic exporters emit (Shape,
Gather, Concat, ...) never reaches the runtime graph."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from hobbit.errors import InputError, ModelFormatError, ShapeError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.converters import lookup
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.graph.registry import get_op

_ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_,
}


def onnx_dtype(elem_type: int, where: str) -> np.dtype:
    if elem_type not in _ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise UnsupportedModelError([UnsupportedItem("dtype", "", 0, where, f"element type {name} is not supported")])
    return np.dtype(_ONNX_DTYPES[elem_type])


class Unsupported(Exception):
    """Raised by a converter for an attribute value or input form it does not handle."""


class ConvertContext:
    """What a converter sees: attributes, constant lookup, and `emit` for graph ops."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[Node] = []
        self.node_name = ""
        self._counter = 0

    # -- attributes and constants --------------------------------------------------
    @staticmethod
    def attrs(proto: onnx.NodeProto) -> dict[str, Any]:
        out = {}
        for a in proto.attribute:
            value = onnx.helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, onnx.TensorProto):
                value = numpy_helper.to_array(value)
            elif isinstance(value, list):
                value = [v.decode() if isinstance(v, bytes) else v for v in value]
            out[a.name] = value
        return out

    def const_value(self, value: Value | None, what: str) -> np.ndarray:
        """The data of an input that must be known at compile time."""
        if value is None or value.const is None:
            raise Unsupported(f"{what} must be a constant (or computable at compile time)")
        return value.const

    def const(self, array: np.ndarray | float | int, dtype: np.dtype | None = None) -> Value:
        data = np.asarray(array, dtype=dtype)
        self._counter += 1
        return Value(f"{self.node_name}/const{self._counter}", const=data)

    # -- emitting graph ops -----------------------------------------------------------
    def emit(self, op: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None,
             n_outputs: int = 1, name: str | None = None) -> list[Value]:
        """Add graph op `op`; infer its output types; fold it if every input is constant."""
        attrs = dict(attrs or {})
        self._counter += 1
        name = name or (self.node_name if self._counter == 1 else f"{self.node_name}#{op}{self._counter}")
        outputs = [Value(f"{name}:{i}") for i in range(n_outputs)]
        node = Node(op, name, list(inputs), outputs, attrs)
        opdef = get_op(op)
        merged = {**opdef.attrs, **attrs}
        node.attrs = merged
        present = [v for v in inputs if v is not None]
        if present and all(v.const is not None for v in present) or (not present and opdef.lower is None):
            results = opdef.reference([None if v is None else v.const for v in inputs], merged)
            return [Value(o.name, const=np.asarray(r)) for o, r in zip(outputs, results)]
        for out, ty in zip(outputs, opdef.infer(node)):
            out.type = ty
        self.nodes.append(node)
        return outputs

    def emit1(self, op: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None) -> Value:
        return self.emit(op, inputs, attrs)[0]


def load_model(model: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """Read a model from a path, bytes or a ModelProto, with external-data weights."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray)):
            proto = onnx.ModelProto()
            proto.ParseFromString(bytes(model))
            return proto
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelFormatError(f"model file '{path}' does not exist")
        return onnx.load(path, load_external_data=True)
    except ModelFormatError:
        raise
    except Exception as exc:  # protobuf raises several unrelated types on bad bytes
        raise ModelFormatError(f"could not parse the ONNX model: {exc}") from exc


def import_onnx(model: str | os.PathLike | bytes | onnx.ModelProto,
                input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    proto = load_model(model)
    opsets = {(o.domain or ""): o.version for o in proto.opset_import}
    if "" not in opsets and "ai.onnx" in opsets:
        opsets[""] = opsets["ai.onnx"]
    if "" not in opsets:
        raise ModelFormatError("the model declares no ai.onnx opset")
    graph_proto = proto.graph
    _check_supported(graph_proto, opsets)

    ctx = ConvertContext(opsets[""])
    env: dict[str, Value] = {}
    for init in graph_proto.initializer:
        if init.name in env:
            raise ModelFormatError(f"initializer '{init.name}' is defined twice")
        env[init.name] = Value(init.name, const=_tensor_array(init))
    inputs = []
    for vi in graph_proto.input:
        if any(v.name == vi.name for v in inputs):
            raise ModelFormatError(f"graph input '{vi.name}' is declared twice")
        if vi.name in env:
            continue  # an initializer listed as input (IR < 4 style) stays a constant
        v = Value(vi.name, _value_type(vi, (input_shapes or {}).get(vi.name)))
        env[vi.name] = v
        inputs.append(v)
    unknown = [n for n in (input_shapes or {}) if n not in {v.name for v in inputs}]
    if unknown:
        raise InputError(f"input_shapes names {unknown}, which are not model inputs; "
                         f"the model takes {[v.name for v in inputs]}")

    problems: list[UnsupportedItem] = []
    poisoned: set[str] = set()
    for index, node in enumerate(graph_proto.node):
        name = node.name or f"{node.op_type}_{index}"
        domain = node.domain if node.domain != "ai.onnx" else ""
        opset = opsets.get(domain, 0)
        if any(n in poisoned for n in node.input):
            poisoned.update(node.output)
            continue
        missing = [n for n in node.input if n and n not in env]
        if missing:
            raise ModelFormatError(f"node '{name}' ({node.op_type}) reads '{missing[0]}', "
                                   "which no node, input or initializer defines before it")
        ins = [env[n] if n else None for n in node.input]
        entry = lookup(domain, node.op_type, opset)
        ctx.node_name = name
        ctx.opset = opset
        ctx._counter = 0
        try:
            outs = entry.fn(ctx, node, ins)
        except (Unsupported, UnsupportedModelError) as exc:
            reason = exc.items[0].reason if isinstance(exc, UnsupportedModelError) else str(exc)
            problems.append(UnsupportedItem(node.op_type, domain, opset, name, reason))
            poisoned.update(node.output)
            continue
        except ShapeError as exc:
            raise ShapeError(f"node '{name}' ({node.op_type}, opset {opset}): {exc}") from exc
        for out_name, value in zip(node.output, outs):
            if out_name:
                if out_name in env and env[out_name] is not value:
                    raise ModelFormatError(f"tensor '{out_name}' is defined twice (again by node '{name}')")
                env[out_name] = value
    if problems:
        raise UnsupportedModelError(problems)

    outputs = []
    for vi in graph_proto.output:
        if vi.name not in env:
            raise ModelFormatError(f"graph output '{vi.name}' is not produced by any node")
        outputs.append(env[vi.name])
    graph = Graph(graph_proto.name or "model", inputs, outputs, ctx.nodes)
    _name_outputs(graph, graph_proto)
    return graph


def _check_supported(graph_proto: onnx.GraphProto, opsets: dict[str, int]) -> None:
    problems = []
    for index, node in enumerate(graph_proto.node):
        domain = node.domain if node.domain != "ai.onnx" else ""
        opset = opsets.get(domain)
        name = node.name or f"{node.op_type}_{index}"
        if opset is None:
            problems.append(UnsupportedItem(node.op_type, domain, 0, name, f"domain '{domain}' is not imported"))
        elif lookup(domain, node.op_type, opset) is None:
            problems.append(UnsupportedItem(node.op_type, domain, opset, name, "operator is not supported"))
    if problems:
        raise UnsupportedModelError(problems)


def _tensor_array(tensor: onnx.TensorProto) -> np.ndarray:
    onnx_dtype(tensor.data_type, tensor.name)
    try:
        return numpy_helper.to_array(tensor).copy()
    except Exception as exc:
        raise ModelFormatError(f"initializer '{tensor.name}' cannot be read: {exc}") from exc


def _value_type(vi: onnx.ValueInfoProto, override: tuple[int, ...] | None) -> TensorType:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise UnsupportedModelError([UnsupportedItem("input", "", 0, vi.name, "only tensor inputs are supported")])
    dtype = onnx_dtype(tt.elem_type, vi.name)
    if override is not None:
        dims = tuple(int(d) for d in override)
        if any(d < 0 for d in dims):
            raise InputError(f"input_shapes gives input '{vi.name}' the shape {dims}; dims must be >= 0")
        if tt.HasField("shape") and len(tt.shape.dim) != len(dims):
            raise InputError(f"input_shapes gives input '{vi.name}' the shape {dims}, "
                             f"but the model declares rank {len(tt.shape.dim)}")
        return TensorType(dtype, dims)
    if not tt.HasField("shape"):
        raise ModelFormatError(f"input '{vi.name}' has no shape; pass input_shapes={{'{vi.name}': (...)}}")
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise ModelFormatError(f"input '{vi.name}' has a negative dimension {d.dim_value}")
            dims.append(int(d.dim_value))
        else:
            dims.append(1)  # a symbolic dim (batch, sequence) is bound to 1 unless input_shapes says otherwise
    return TensorType(dtype, tuple(dims))


def _name_outputs(graph: Graph, graph_proto: onnx.GraphProto) -> None:
    """Graph outputs keep their ONNX names, so m.outputs reads like the model."""
    for vi, value in zip(graph_proto.output, graph.outputs):
        if value.const is None and value not in graph.inputs:
            value.name = vi.name
    graph.output_names = [vi.name for vi in graph_proto.output]
