"""ONNX ModelProto -> Graph.

Import runs in two sweeps. The first checks every node against the converter
table so that all unsupported ops are reported at once, before any work. The
second converts node by node through a ConvertContext (hobbit.frontend.common.context):
each emitted graph op is type-checked through the op registry, and ops whose inputs
are all constant are evaluated on the spot with their numpy reference, so the shape
arithmetic exporters emit (Shape, Gather, Concat, ...) never reaches the runtime graph."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from hobbit.errors import (ConfigError, HobbitError, InputError, ModelFormatError, NeedsInputValues, ShapeError,
                           SymbolicInputShape, Unsupported, UnsupportedItem, UnsupportedModelError)
import hobbit.frontend.onnx.ops  # noqa: F401  (its converters fill the converter table)
from hobbit.frontend.common.context import ConvertContext, raise_problems
from hobbit.frontend.onnx import functions, rules, validate
from hobbit.frontend.onnx.converters import lookup
from hobbit.frontend.onnx.external_data import with_external_data
from hobbit.frontend.onnx.types import Sequence, onnx_dtype
from hobbit.graph.ir import BoundedOutput, Graph, TensorType, Value


class OnnxContext(ConvertContext):
    """ConvertContext for ONNX converters: a node's attributes, and inlining of subgraphs."""

    def __init__(self, opset: int):
        super().__init__(opset)
        self.inline: Any = None  # set by the importer: (GraphProto, inputs, prefix) -> outputs

    @staticmethod
    def attrs(proto: onnx.NodeProto) -> dict[str, Any]:
        out = {}
        for a in proto.attribute:
            value = onnx.helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, onnx.TensorProto):
                value = _tensor_array(value, f"tensor attribute '{a.name}' of node '{proto.name or proto.op_type}'")
            elif isinstance(value, list):
                value = [v.decode() if isinstance(v, bytes) else v for v in value]
            out[a.name] = value
        return out


def load_model(model: str | os.PathLike | bytes | onnx.ModelProto,
               external_data_dir: str | os.PathLike | None = None) -> onnx.ModelProto:
    """Read a model from a path, bytes or a ModelProto, with external-data weights: from the
    model file's folder, or for bytes and ModelProtos from `external_data_dir` only
    (hobbit.frontend.onnx.external_data: never from the current directory)."""
    if isinstance(model, onnx.ModelProto):
        return with_external_data(model, external_data_dir, "an onnx.ModelProto", copy=True)
    try:
        if isinstance(model, (bytes, bytearray)):
            proto = onnx.ModelProto()
            proto.ParseFromString(bytes(model))
            return with_external_data(proto, external_data_dir, "bytes", copy=False)
        path = os.fspath(model)
        if external_data_dir is not None:
            raise ConfigError(f"external_data_dir= is for models given as bytes or an onnx.ModelProto; the model "
                              f"file '{path}' reads its external data from its own folder")
        if not os.path.exists(path):
            raise ModelFormatError(f"model file '{path}' does not exist")
        return onnx.load(path, load_external_data=True)
    except HobbitError:
        raise
    except Exception as exc:  # protobuf raises several unrelated types on bad bytes
        raise ModelFormatError(f"could not parse the ONNX model: {exc}") from exc


def import_onnx(model: str | os.PathLike | bytes | onnx.ModelProto,
                input_shapes: dict[str, tuple[int, ...]] | None = None,
                input_values: dict[str, np.ndarray] | None = None,
                external_data_dir: str | os.PathLike | None = None) -> Graph:
    """Import a model. `input_shapes` binds symbolic dims; `input_values` turns those graph
    inputs into constants (for inputs that decide shapes, such as a Reshape target);
    `external_data_dir` is load_model's."""
    proto = load_model(model, external_data_dir)
    validate.check_header(proto)
    if not proto.graph.output:
        raise ModelFormatError("the model's graph declares no outputs (an empty or truncated model?)")
    opsets = model_opsets(proto)
    graph_proto = proto.graph
    _check_supported(graph_proto, opsets)
    importer = _Importer(opsets[""])
    for init in graph_proto.initializer:
        if init.name in importer.env:
            raise ModelFormatError(f"initializer '{init.name}' is defined twice")
        importer.env[init.name] = Value(init.name, const=_tensor_array(init))
    inputs = _graph_inputs(graph_proto, importer.env, input_shapes or {}, input_values or {})
    importer.ctx.graph_inputs = {v.name: v for v in inputs}
    importer.convert(validate.ordered_nodes(graph_proto, opsets, set(importer.env)), opsets,
                     {vi.name for vi in graph_proto.output})
    importer.raise_problems()

    outputs, names, layout = [], [], []
    for vi in graph_proto.output:
        if vi.name not in importer.env:
            raise ModelFormatError(f"graph output '{vi.name}' is not produced by any node")
        value = importer.env[vi.name]
        if isinstance(value, Sequence):
            outputs += value.items
            names += [f"{vi.name}[{i}]" for i in range(len(value.items))]
            layout.append((vi.name, len(value.items)))
        elif value.bounded is not None:
            outputs += [value, _extent_output(importer.ctx, vi.name, value)]
            names += [vi.name, f"{vi.name}:extent"]
            layout.append((vi.name, BoundedOutput(value.bounded.axis)))
        else:
            outputs.append(value)
            names.append(vi.name)
            layout.append((vi.name, None))
    graph = Graph(graph_proto.name or "model", inputs, outputs, importer.ctx.nodes)
    _name_outputs(graph, names)
    graph.output_layout = layout
    validate.check_declared_types(graph_proto, importer.env, graph)
    return graph


def _extent_output(ctx: OnnxContext, name: str, value: Value) -> Value:
    """A copy of a bounded output's extent, its own flat output: several outputs may share
    one extent, and the extent may be a model output too."""
    ctx.node_name, ctx._counter = f"{name}:extent", 0
    return ctx.emit1("Copy", [value.bounded.extent])


def model_opsets(proto: onnx.ModelProto) -> dict[str, int]:
    opsets = {(o.domain or ""): o.version for o in proto.opset_import}
    if "" not in opsets and "ai.onnx" in opsets:
        opsets[""] = opsets["ai.onnx"]
    if "" not in opsets:
        opsets[""] = onnx.defs.onnx_opset_version()  # only other domains' ops; their support decides
    return opsets


def _graph_inputs(graph_proto: onnx.GraphProto, env: dict[str, Value], input_shapes: dict[str, tuple[int, ...]],
                  input_values: dict[str, np.ndarray]) -> list[Value]:
    declared = [vi.name for vi in graph_proto.input if vi.name not in env]
    unknown = [n for n in [*input_shapes, *input_values] if n not in declared]
    if unknown:
        raise InputError(f"input_shapes names {unknown}, which are not model inputs; the model takes {declared}")
    inputs: list[Value] = []
    seen: set[str] = set()
    for vi in graph_proto.input:
        if vi.name in seen:
            raise ModelFormatError(f"graph input '{vi.name}' is declared twice")
        seen.add(vi.name)
        if vi.name in env:
            continue  # an initializer listed as input (IR < 4 style) stays a constant
        if vi.name in input_values:
            env[vi.name] = Value(vi.name, const=np.asarray(input_values[vi.name]))
            continue
        if vi.type.HasField("sequence_type"):
            env[vi.name] = _sequence_input(vi, input_shapes.get(vi.name))
            inputs.extend(env[vi.name].items)
            continue
        v = Value(vi.name, input_type(vi, input_shapes.get(vi.name)))
        env[vi.name] = v
        inputs.append(v)
    return inputs


class _Importer:
    """The second sweep: converts nodes in order, expanding function ops into their bodies."""

    def __init__(self, opset: int):
        self.ctx = OnnxContext(opset)
        self.ctx.inline = self.inline
        self.env: dict[str, Value] = {}
        self.problems: list[UnsupportedItem] = []
        self.needed_inputs: set[str] = set()
        self.hard_problems = 0
        self.poisoned: set[str] = set()

    def convert(self, nodes: list[onnx.NodeProto], opsets: dict[str, int], keep: set[str]) -> None:
        """Convert the graph's nodes in order. After the last node that reads a constant, the
        environment keeps only its type (for the declared-type checks), not its data, unless
        it is in `keep` (the graph outputs): a weight a converter replaced (a Gemm's transposed
        B) is then freed at once instead of at the end of import, where VGG-16 held its 411 MB
        fc1 weight twice."""
        last_reader: dict[str, int] = {}
        for index, node in enumerate(nodes):
            for name in [*node.input, *validate.subgraph_reads(node)]:
                last_reader[name] = index
        done_after: dict[int, list[str]] = {}
        for name, index in last_reader.items():
            if name not in keep:
                done_after.setdefault(index, []).append(name)
        for index, node in enumerate(nodes):
            self._convert_node(node, node.name or f"{node.op_type}_{index}", opsets)
            for name in done_after.get(index, ()):
                value = self.env.get(name)
                if isinstance(value, Value) and value.const is not None:
                    self.env[name] = Value(value.name, value.type)

    def inline(self, body: onnx.GraphProto, inputs: list[Value], prefix: str) -> list[Value]:
        """Convert a subgraph (If branch, Loop/Scan body) in place, bound to `inputs`.

        Control flow is unrolled at import: hobbit compiles for known shapes, and the
        converters only inline bodies whose trip counts and conditions are known then."""
        constants = {init.name: Value(f"{prefix}/{init.name}", const=_tensor_array(init)) for init in body.initializer}
        bindings = {**constants, **{vi.name: value for vi, value in zip(body.input, inputs)}}
        return self._scope(list(body.node), bindings, [vi.name for vi in body.output], prefix,
                           {"": self.ctx.opset})

    def _scope(self, nodes: list[onnx.NodeProto], bindings: dict[str, Value], outputs: list[str], prefix: str,
               opsets: dict[str, int]) -> list[Value]:
        """Convert nodes in a nested scope: they see the enclosing values, their own names
        stay private, and they are named under `prefix`. A problem inside is raised for the
        enclosing node to report."""
        ctx = self.ctx
        saved = (self.env, ctx.node_name, ctx.opset, ctx._counter, self.problems, self.hard_problems, self.poisoned)
        self.env = {**self.env, **bindings}
        self.problems, self.hard_problems, self.poisoned = [], 0, set()
        try:
            for index, node in enumerate(nodes):
                self._convert_node(node, f"{prefix}/{node.name or f'{node.op_type}_{index}'}", opsets)
            if self.problems:
                first = self.problems[0]
                if self.hard_problems == 0:
                    raise NeedsInputValues(first.reason, self.needed_inputs)
                raise Unsupported(f"its body has {first.op_type} at node '{first.node}': {first.reason}")
            missing = [name for name in outputs if name not in self.env]
            if missing:
                raise ModelFormatError(f"subgraph output '{missing[0]}' of '{prefix}' is not produced")
            return [self.env[name] for name in outputs]
        finally:
            self.env, ctx.node_name, ctx.opset, ctx._counter, self.problems, self.hard_problems, self.poisoned = saved

    def _convert_node(self, node: onnx.NodeProto, name: str, opsets: dict[str, int]) -> None:
        domain = node.domain if node.domain != "ai.onnx" else ""
        opset = opsets.get(domain, 0)
        if any(n in self.poisoned for n in [*node.input, *validate.subgraph_reads(node)]):
            self.poisoned.update(node.output)
            return
        missing = [n for n in node.input if n and n not in self.env]
        if missing:
            raise ModelFormatError(f"node '{name}' ({node.op_type}) reads '{missing[0]}', "
                                   "which no node, input or initializer defines before it")
        ins = [self.env[n] if n else None for n in node.input]
        validate.check_input_types(node, name, opset, ins)
        rules.check_node(node, name, opset, validate.node_schema(node, opset) if not domain else None,
                      OnnxContext.attrs(node), ins)
        entry = lookup(domain, node.op_type, opset)
        try:
            if entry is None:
                raise Unsupported("operator is not supported")
            outs = self._run_converter(entry.fn, node, name, opset, ins)
        except (Unsupported, UnsupportedModelError) as exc:
            if isinstance(exc, NeedsInputValues):
                self._record(node, name, domain, opset, exc)
                return
            try:
                outs = self._expand(node, name, domain, opset, ins, opsets)
            except (Unsupported, UnsupportedModelError) as body_exc:
                self._record(node, name, domain, opset, body_exc if entry is None else exc)
                return
            if outs is None:
                self._record(node, name, domain, opset, exc)
                return
        except ShapeError as exc:
            raise ShapeError(f"node '{name}' ({node.op_type}, opset {opset}): {exc}") from exc
        for out_name, value in zip(node.output, outs):
            if out_name:
                if out_name in self.env and self.env[out_name] is not value:
                    raise ModelFormatError(f"tensor '{out_name}' is defined twice (again by node '{name}')")
                self.env[out_name] = value

    def _run_converter(self, fn, node: onnx.NodeProto, name: str, opset: int, ins: list[Value | None]) -> list:
        ctx = self.ctx
        ctx.node_name, ctx.opset, ctx._counter = name, opset, 0
        mark = len(ctx.nodes)
        try:
            return fn(ctx, node, ins)
        except (Unsupported, UnsupportedModelError):
            del ctx.nodes[mark:]  # a declined node leaves nothing behind (its function body may follow)
            raise
        except MemoryError as exc:  # folding a constant of an absurd shape
            raise ModelFormatError(f"node '{name}' ({node.op_type}) computes a constant too large "
                                   f"for this machine's memory: {exc}") from exc

    def _expand(self, node: onnx.NodeProto, name: str, domain: str, opset: int, ins: list[Value | None],
                opsets: dict[str, int]) -> list[Value] | None:
        """The node's outputs computed by its function body, if the standard defines one."""
        types = [None if v is None else _type_proto(v) for v in ins]
        expansion = functions.expand(node, domain, opset, types)
        if expansion is None:
            return None
        bindings = {formal: value for formal, value in zip(expansion.inputs, ins) if value is not None}
        wanted = [formal for formal, actual in zip(expansion.outputs, node.output) if actual]
        values = iter(self._scope(expansion.nodes, bindings, wanted, name, {**opsets, **expansion.opsets}))
        return [next(values) if actual else None for actual in node.output]

    def _record(self, node: onnx.NodeProto, name: str, domain: str, opset: int, exc: Exception) -> None:
        if isinstance(exc, UnsupportedModelError):
            reason = exc.items[0].reason
        else:
            reason = str(exc)
        if isinstance(exc, NeedsInputValues):
            self.needed_inputs.update(exc.inputs)
        else:
            self.hard_problems += 1
        self.problems.append(UnsupportedItem(node.op_type, domain, opset, name, reason))
        self.poisoned.update(node.output)

    def raise_problems(self) -> None:
        raise_problems(self.problems, self.hard_problems, self.needed_inputs)


def _type_proto(value: Value | Sequence) -> onnx.TypeProto:
    code = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(value.dtype))
    if isinstance(value, Sequence):
        return onnx.helper.make_sequence_type_proto(onnx.helper.make_tensor_type_proto(code, None))
    return onnx.helper.make_tensor_type_proto(code, tuple(value.shape))


def _check_supported(graph_proto: onnx.GraphProto, opsets: dict[str, int]) -> None:
    problems = []
    for index, node in enumerate(graph_proto.node):
        domain = node.domain if node.domain != "ai.onnx" else ""
        opset = opsets.get(domain)
        name = node.name or f"{node.op_type}_{index}"
        if opset is None:
            problems.append(UnsupportedItem(node.op_type, domain, 0, name, f"domain '{domain}' is not imported"))
        elif lookup(domain, node.op_type, opset) is None and not functions.has_function(node.op_type, domain, opset):
            problems.append(UnsupportedItem(node.op_type, domain, opset, name, "operator is not supported"))
    if problems:
        raise UnsupportedModelError(problems)


def _tensor_array(tensor: onnx.TensorProto, what: str = "") -> np.ndarray:
    """The tensor's data without a copy of our own: for raw_data, onnx returns a read-only
    view of the bytes protobuf hands out, already a copy that nobody else holds. A second
    copy was the import's memory peak on VGG-16 (its 411 MB fc1 weight held twice).
    `what` names the tensor in errors (an initializer unless said otherwise)."""
    what = what or f"initializer '{tensor.name}'"
    onnx_dtype(tensor.data_type, tensor.name)
    if tensor.data_location == onnx.TensorProto.EXTERNAL:  # onnx would read it from the current directory
        raise ModelFormatError(f"{what} keeps its data in an external file that was not loaded with the model "
                               "(hobbit reads external data only from the model's folder or external_data_dir)")
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:
        raise ModelFormatError(f"{what} cannot be read: {exc}") from exc


def _sequence_input(vi: onnx.ValueInfoProto, shapes: list[tuple[int, ...]] | None) -> Sequence:
    """A sequence-typed graph input, as one graph input per element ('name[i]')."""
    elem = vi.type.sequence_type.elem_type
    if not elem.HasField("tensor_type"):
        raise UnsupportedModelError([UnsupportedItem("input", "", 0, vi.name, "only sequences of tensors are supported")])
    dtype = onnx_dtype(elem.tensor_type.elem_type, vi.name)
    if shapes is None:
        raise SymbolicInputShape(f"input '{vi.name}' is a sequence; its length is needed to compile")
    items = [Value(f"{vi.name}[{i}]", TensorType(dtype, tuple(int(d) for d in shape))) for i, shape in enumerate(shapes)]
    return Sequence(items, dtype)


def input_type(vi: onnx.ValueInfoProto, override: tuple[int, ...] | None) -> TensorType:
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
            raise SymbolicInputShape(f"input '{vi.name}' has a symbolic dimension "
                                     f"'{d.dim_param or '?'}'; its size is needed to compile")
    return TensorType(dtype, tuple(dims))


def _name_outputs(graph: Graph, names: list[str]) -> None:
    """Graph outputs keep their ONNX names (elements of a sequence output are 'name[i]'),
    so m.outputs reads like the model."""
    for name, value in zip(names, graph.outputs):
        if value.const is None and value not in graph.inputs:
            value.name = name
    graph.output_names = list(names)
