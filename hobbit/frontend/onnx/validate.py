"""Checks that turn a malformed ONNX graph into a ModelFormatError naming the culprit.

The importer trusts what these functions have checked: every node has the inputs,
outputs and attributes its schema requires, every tensor is defined exactly once,
the nodes can run in some order (onnxruntime, too, accepts a graph whose nodes are
listed out of order, so they are sorted here; a cycle is an error), input dtypes
are ones the standard allows, declared dtypes agree with what the graph computes,
and no tensor is larger than the machine could ever hold. A model that breaks one
of these rules would otherwise surface as a Python exception from deep inside a
converter, a wrong answer, or an allocation failure at run time."""

from __future__ import annotations

import heapq

import numpy as np
import onnx
from onnx import defs

from hobbit.errors import ModelFormatError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.common.sizes import check_sizes
from hobbit.graph.ir import Graph, Value

_VARIADIC = defs.OpSchema.FormalParameterOption.Variadic
_SINGLE = defs.OpSchema.FormalParameterOption.Single


def ordered_nodes(graph_proto: onnx.GraphProto, opsets: dict[str, int], defined: set[str]) -> list[onnx.NodeProto]:
    """The graph's nodes, checked against their schemas, in an order where every tensor is
    defined before it is read (the file's own order when it already is one).

    `defined` holds the names that exist before any node runs (graph inputs, initializers)."""
    _check_opset(opsets)
    nodes = list(graph_proto.node)
    names = [node.name or f"{node.op_type}_{index}" for index, node in enumerate(nodes)]
    for node, name in zip(nodes, names):
        _check_schema(node, name, opsets)
    producer = _producers(nodes, names, defined)
    deps = [_dependencies(node, name, producer, defined) for node, name in zip(nodes, names)]
    order = _topological_order(deps, names)
    if order == list(range(len(nodes))):
        return nodes
    return [_named(nodes[i], names[i]) for i in order]


def check_input_types(node: onnx.NodeProto, name: str, opset: int, ins: list[Value | None]) -> None:
    """Each input's dtype is one the operator's schema allows at this opset, and inputs that
    share a type parameter (T for both Add inputs) share a dtype."""
    schema = node_schema(node, opset)
    if schema is None or not schema.inputs:
        return
    bound: dict[str, tuple[str, int]] = {}
    for i, value in enumerate(ins):
        if value is None:
            continue
        param = schema.inputs[min(i, len(schema.inputs) - 1)]
        type_str = tensor_type_str(value.dtype)
        if hasattr(value, "items"):  # a Sequence during import
            type_str = f"seq({type_str})"
        if param.types and type_str not in param.types:
            raise ModelFormatError(f"node '{name}' ({node.op_type}, opset {opset}): input {i} "
                                   f"('{node.input[i]}') is {type_str}, which the operator does not accept "
                                   f"(it takes {', '.join(sorted(param.types))})")
        if param.type_str in bound and bound[param.type_str][0] != type_str and param.is_homogeneous:
            other_type, other = bound[param.type_str]
            raise ModelFormatError(f"node '{name}' ({node.op_type}, opset {opset}): input {i} "
                                   f"('{node.input[i]}') is {type_str} but input {other} "
                                   f"('{node.input[other]}') is {other_type}; both must have the same type")
        bound.setdefault(param.type_str, (type_str, i))


def check_declared_types(graph_proto: onnx.GraphProto, env: dict[str, Value], graph: Graph) -> None:
    """What the model declares agrees with what it computes, and every tensor fits in memory.

    A declared dtype that differs from the computed one is an error, as in onnxruntime; a
    declared *shape* that differs is not (exporters leave stale shapes behind when a model's
    batch size is edited; onnxruntime, too, trusts the data over them)."""
    initializers = {t.name for t in graph_proto.initializer}
    for vi in graph_proto.input:
        if vi.name in initializers:
            _check_declared(vi, env[vi.name], "graph input", check_shape=True)
    for vi in list(graph_proto.output) + list(graph_proto.value_info):
        if vi.name in env:
            _check_declared(vi, env[vi.name], "graph output" if vi in graph_proto.output else "value_info entry",
                            check_shape=False)
    check_sizes(graph)


def tensor_type_str(dtype: np.dtype) -> str:
    """ONNX's spelling of a tensor type: 'tensor(float)' for float32."""
    code = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return f"tensor({onnx.TensorProto.DataType.Name(code).lower()})"


def check_header(proto: onnx.ModelProto) -> None:
    """The model says which IR and operator sets it is written in, in versions this onnx
    package knows, and every name in it is text (protobuf hands out a string that is not
    valid UTF-8 as bytes, which nothing downstream expects); onnxruntime refuses the same."""
    if proto.ir_version > onnx.IR_VERSION:
        raise UnsupportedModelError([UnsupportedItem(
            "ir_version", "", 0, "model",
            f"IR version {proto.ir_version} is newer than the newest this onnx package knows ({onnx.IR_VERSION})")])
    if not proto.opset_import:
        raise ModelFormatError("the model imports no operator set (its opset_import is empty); "
                               "set it to the opset the model was written for")
    _check_text(proto.graph, "the main graph")


def _check_text(graph: onnx.GraphProto, where: str) -> None:
    for kind, items in (("input", graph.input), ("output", graph.output), ("initializer", graph.initializer)):
        for item in items:
            _text(item.name, f"a {kind} name of {where}")
    for index, node in enumerate(graph.node):
        what = f"node {index} of {where}"
        for field in (node.op_type, node.domain, node.name, *node.input, *node.output):
            _text(field, what)
        for attr in node.attribute:
            _text(attr.name, what)
            for sub in [*attr.graphs, *([attr.g] if attr.HasField("g") else [])]:
                _check_text(sub, f"a subgraph of {what}")


def _text(field: str | bytes, where: str) -> None:
    if not isinstance(field, str):
        raise ModelFormatError(f"{where} holds a name that is not valid UTF-8: {field!r}")


# -- graph structure ----------------------------------------------------------------------

def _check_opset(opsets: dict[str, int]) -> None:
    newest = defs.onnx_opset_version()
    if opsets[""] > newest:
        raise UnsupportedModelError([UnsupportedItem(
            "opset", "", opsets[""], "model",
            f"ai.onnx opset {opsets['']} is newer than the newest this onnx package knows ({newest})")])


def node_schema(node: onnx.NodeProto, opset: int) -> defs.OpSchema | None:
    """The node's schema at the model's opset; None for ops the standard does not define
    (custom domains, unknown ops: those are reported as unsupported elsewhere)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema = defs.get_schema(node.op_type, opset, domain)
    except defs.SchemaError:
        return None
    return None if schema.deprecated else schema


def _check_schema(node: onnx.NodeProto, name: str, opsets: dict[str, int]) -> None:
    domain = "" if node.domain == "ai.onnx" else node.domain
    if domain not in opsets:
        return
    schema = node_schema(node, opsets[domain])
    if schema is None:
        return
    where = f"node '{name}' ({node.op_type}, opset {opsets[domain]})"
    _check_arity(node, schema, where)
    _check_attributes(node, schema, where)


def _check_arity(node: onnx.NodeProto, schema: defs.OpSchema, where: str) -> None:
    count = len(node.input)
    if count > schema.max_input:
        raise ModelFormatError(f"{where} has {count} inputs; the operator takes at most {schema.max_input}")
    for i, param in enumerate(schema.inputs):
        if param.option == _SINGLE and (i >= count or not node.input[i]):
            raise ModelFormatError(f"{where} lacks its required input {i} ('{param.name}')")
        if param.option == _VARIADIC and count - i < param.min_arity:
            raise ModelFormatError(f"{where} has {count} inputs; the operator needs at least {i + param.min_arity}")
    outputs = len(node.output)
    if not schema.min_output <= outputs <= schema.max_output:
        raise ModelFormatError(f"{where} has {outputs} outputs; the operator has "
                               f"{schema.min_output} to {schema.max_output}")


def _check_attributes(node: onnx.NodeProto, schema: defs.OpSchema, where: str) -> None:
    given = set()
    for attr in node.attribute:
        given.add(attr.name)
        if attr.ref_attr_name:
            continue  # refers to an attribute of an enclosing function; checked when expanded
        declared = schema.attributes.get(attr.name)
        if declared is None:
            raise ModelFormatError(f"{where} has attribute '{attr.name}', which the operator does not define")
        if attr.type != declared.type.value:
            actual = onnx.AttributeProto.AttributeType.Name(attr.type)
            raise ModelFormatError(f"{where}: attribute '{attr.name}' is {actual}, "
                                   f"the operator expects {declared.type.name}")
    missing = [n for n, a in schema.attributes.items() if a.required and n not in given]
    if missing:
        raise ModelFormatError(f"{where} lacks its required attribute '{missing[0]}'")


def _producers(nodes: list[onnx.NodeProto], names: list[str], defined: set[str]) -> dict[str, int]:
    """Tensor name -> index of the node that defines it; each tensor is defined once."""
    producer: dict[str, int] = {}
    for index, (node, name) in enumerate(zip(nodes, names)):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in defined:
                raise ModelFormatError(f"tensor '{out}' is defined twice (again by node '{name}')")
            producer[out] = index
    return producer


def _dependencies(node: onnx.NodeProto, name: str, producer: dict[str, int], defined: set[str]) -> set[int]:
    """Indices of the nodes this one reads from, through its subgraphs' outer-scope names too."""
    deps = set()
    for tensor in node.input:
        if not tensor or tensor in defined:
            continue
        if tensor not in producer:
            raise ModelFormatError(f"node '{name}' ({node.op_type}) reads '{tensor}', "
                                   "which no node, input or initializer defines")
        deps.add(producer[tensor])
    for tensor in subgraph_reads(node):
        if tensor in producer:
            deps.add(producer[tensor])
    return deps


def subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """Every tensor name read inside the node's subgraphs (If/Loop/Scan bodies)."""
    reads: set[str] = set()
    for attr in node.attribute:
        graphs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
        for g in graphs:
            for inner in g.node:
                reads.update(n for n in inner.input if n)
                reads.update(subgraph_reads(inner))
    return reads


def _topological_order(deps: list[set[int]], names: list[str]) -> list[int]:
    """Kahn's algorithm, always taking the earliest ready node, so a sorted graph keeps its order."""
    waiting = [len(d) for d in deps]
    readers: list[list[int]] = [[] for _ in deps]
    for index, d in enumerate(deps):
        for producer in d:
            readers[producer].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for reader in readers[index]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, reader)
    if len(order) < len(deps):
        cycle = _find_cycle(deps, {i for i, count in enumerate(waiting) if count > 0})
        path = " -> ".join(f"'{names[i]}'" for i in cycle + cycle[:1])
        raise ModelFormatError(f"the graph has a cycle through node '{names[cycle[0]]}': {path}")
    return order


def _find_cycle(deps: list[set[int]], stuck: set[int]) -> list[int]:
    """A cycle among the nodes that never became ready: walk back along stuck producers
    until a node repeats (every stuck node reads from another stuck node)."""
    path: list[int] = []
    seen: dict[int, int] = {}
    index = min(stuck)
    while index not in seen:
        seen[index] = len(path)
        path.append(index)
        index = min(d for d in deps[index] if d in stuck)
    return list(reversed(path[seen[index]:]))


def _named(node: onnx.NodeProto, name: str) -> onnx.NodeProto:
    """A node keeps the name its position in the file gave it after being reordered."""
    if node.name:
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = name
    return copy


# -- declared types and sizes -------------------------------------------------------------

def _check_declared(vi: onnx.ValueInfoProto, value: Value, what: str, check_shape: bool) -> None:
    if not vi.type.HasField("tensor_type") or not isinstance(value, Value):
        return
    tt = vi.type.tensor_type
    if tt.elem_type and value.type is not None:
        declared = onnx.TensorProto.DataType.Name(tt.elem_type).lower() \
            if tt.elem_type in onnx.TensorProto.DataType.values() else str(tt.elem_type)
        actual = tensor_type_str(value.dtype)
        if f"tensor({declared})" != actual:
            raise ModelFormatError(f"{what} '{vi.name}' is declared as tensor({declared}), "
                                   f"but the model computes {actual} for it")
    if check_shape and tt.HasField("shape"):
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        actual_shape = tuple(value.shape)
        if len(dims) != len(actual_shape) or any(d is not None and d != a for d, a in zip(dims, actual_shape)):
            shown = tuple("?" if d is None else d for d in dims)
            raise ModelFormatError(f"{what} '{vi.name}' is declared with shape {shown}, "
                                   f"but its initializer has shape {actual_shape}")
