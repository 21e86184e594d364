"""A frozen TensorFlow GraphDef (.pb) read into a TFGraph, without TensorFlow.

A frozen graph carries its weights as Const nodes, so reading it is: parse, inline any
function calls, keep what the outputs need, decode attributes. Its inputs are its
Placeholder nodes; its outputs, unless named, are the nodes whose data nobody consumes
(ops that produce no data, such as NoOp or an Assert, excepted). `flat_graph` is shared
with the SavedModel reader, which adds its variables on top."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.message import DecodeError

from hobbit.errors import CorruptModelError
from hobbit.frontend.tf.attrs import attr_value
from hobbit.frontend.tf.functions import inline_calls
from hobbit.frontend.tf.graph import TensorRef, TFGraph, TFTensor
from hobbit.frontend.tf.protos import GraphDef
from hobbit.frontend.tf.rawgraph import RawNode, needed, parse_ref, raw_nodes, resolve, to_tfgraph

# Ops that yield no data tensor: never a graph's default output.
_NO_DATA_OUTPUT = frozenset(
    {
        "NoOp",
        "Assert",
        "PrintV2",
        "Placeholder",
        "SaveV2",
        "MergeV2Checkpoints",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "VarHandleOp",
        "DestroyResourceOp",
    }
)


def _model_bytes(model: str | os.PathLike | bytes) -> tuple[bytes, str]:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<GraphDef bytes>"
    path = os.fspath(model)
    try:
        with open(path, "rb") as f:
            return f.read(), path
    except OSError as e:
        raise CorruptModelError(f"{path}: cannot be read as a TensorFlow GraphDef: {e.strerror}") from None


def parse_graphdef(data: bytes, source: str):
    try:
        graph_def = GraphDef.FromString(data)
    except DecodeError:
        raise CorruptModelError(
            f"{source}: not a TensorFlow GraphDef (the protobuf does not decode; truncated?)"
        ) from None
    if not graph_def.node:
        raise CorruptModelError(f"{source}: not a TensorFlow GraphDef (it has no nodes)")
    return graph_def


def flat_graph(
    nodes: Mapping[str, RawNode],
    library: Mapping[str, Any],
    outputs: list[TensorRef],
    source: str,
    rewrite: Callable[[dict[str, RawNode]], None] | None = None,
) -> tuple[dict[str, RawNode], list[TensorRef]]:
    """The nodes `outputs` need, with calls inlined (then `rewrite` applied to the flat
    nodes), and the outputs as tensors of that flat graph."""
    inlined, aliases = inline_calls(needed(nodes, outputs, source), library, source)
    for node in inlined.values():
        node.inputs = [resolve(ref, aliases) for ref in node.inputs]
    refs = [resolve(ref, aliases) for ref in outputs]
    if rewrite is not None:
        rewrite(inlined)
    return needed(inlined, refs, source), refs


def _default_outputs(nodes: Mapping[str, RawNode]) -> list[str]:
    consumed = {ref.node for node in nodes.values() for ref in node.inputs}
    return [name for name, node in nodes.items() if name not in consumed and node.op not in _NO_DATA_OUTPUT]


def _placeholders(nodes: list[RawNode], source: str) -> list[TFTensor]:
    inputs = []
    for node in nodes:
        if node.op != "Placeholder":
            continue
        name, where = node.name, f"{source}: node '{node.name}'"
        dtype = attr_value(node.proto_attrs["dtype"], where) if "dtype" in node.proto_attrs else None
        shape = attr_value(node.proto_attrs["shape"], where) if "shape" in node.proto_attrs else None
        inputs.append(TFTensor(name, TensorRef(name, 0), dtype, shape))
    return inputs


def read_graphdef(model: str | os.PathLike | bytes, outputs: list[str] | None = None) -> TFGraph:
    """Read a frozen GraphDef from a path or its serialized bytes. `outputs` names the
    output tensors ("node" or "node:index"); by default every unconsumed data node."""
    data, source = _model_bytes(model)
    graph_def = parse_graphdef(data, source)
    nodes = raw_nodes(graph_def, source)
    library = {function.signature.name: function for function in graph_def.library.function}
    names = list(outputs) if outputs is not None else _default_outputs(nodes)
    if not names:
        raise CorruptModelError(f"{source}: the GraphDef has no node whose output nobody consumes; name the outputs")
    flat, refs = flat_graph(nodes, library, [parse_ref(name) for name in names], source)
    inputs = _placeholders([flat[name] for name in nodes if name in flat], source)
    tensors = [TFTensor(name, ref) for name, ref in zip(names, refs)]
    return to_tfgraph(flat, inputs, tensors, "graphdef", source)
