"""Expansion of ONNX function ops into the nodes of their function body.

Many ONNX ops (LayerNormalization, Attention, SoftmaxCrossEntropyLoss, Selu,
Range, CastLike, ...) are defined by the standard as a *function*: a small graph
of simpler ops, sometimes built for the node's attributes and input types (a
"context-dependent" function). When hobbit has no converter for such an op, or
its converter declines an attribute value, the frontend imports the body
instead, so every function op whose body ops hobbit supports works without a
dedicated implementation. The importer converts the body in a scope of its own
(like an If branch), with its nodes named under the model node's name, so
errors and generated kernels still point at the model's node."""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import defs


@dataclass
class Expansion:
    """A function body ready to import in a scope of its own: formal input and output
    names, the nodes (attribute references resolved) and the opsets they are written in."""

    inputs: list[str]
    outputs: list[str]
    nodes: list[onnx.NodeProto]
    opsets: dict[str, int]


def has_function(op_type: str, domain: str, opset: int) -> bool:
    schema = _schema(op_type, domain, opset)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def expand(node: onnx.NodeProto, domain: str, opset: int,
           input_types: list[onnx.TypeProto | None]) -> Expansion | None:
    """The body of `node`'s function with the node's attribute values filled in, or None."""
    schema = _schema(node.op_type, domain, opset)
    function = _function_proto(node, schema, opset, input_types) if schema is not None else None
    if function is None:
        return None
    attrs = _attribute_values(node, function, schema)
    nodes = []
    for body_node in function.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(body_node)
        _bind_attributes(copy, attrs)
        nodes.append(copy)
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in function.opset_import}
    return Expansion(list(function.input), list(function.output), nodes, opsets)


def _schema(op_type: str, domain: str, opset: int) -> defs.OpSchema | None:
    try:
        return defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None


def _function_proto(node: onnx.NodeProto, schema: defs.OpSchema, opset: int,
                    input_types: list[onnx.TypeProto | None]) -> onnx.FunctionProto | None:
    if schema.has_function:
        version = _body_version(schema.function_opset_versions, opset)
        data = schema.get_function_with_opset_version(version) if version else None
        return onnx.FunctionProto.FromString(data) if data else schema.function_body
    if schema.has_context_dependent_function:
        types = [(t or onnx.TypeProto()).SerializeToString() for t in input_types]
        version = _body_version(schema.context_dependent_function_opset_versions, opset)
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), types)
        except Exception:  # noqa: BLE001 - the builder rejects contexts it cannot expand
            return None
        return onnx.FunctionProto.FromString(data) if data else None
    return None


def _body_version(versions: list[int], opset: int) -> int | None:
    """The newest body written for an opset <= the model's (bodies differ only in the ops they use)."""
    usable = [v for v in versions if v <= opset]
    if usable:
        return max(usable)
    return min(versions) if versions else None


def _attribute_values(node: onnx.NodeProto, function: onnx.FunctionProto,
                      schema: defs.OpSchema) -> dict[str, onnx.AttributeProto]:
    """The node's attributes over the function's and the schema's defaults."""
    values = {name: attr.default_value for name, attr in schema.attributes.items()
              if attr.default_value.type != onnx.AttributeProto.UNDEFINED}
    values.update({a.name: a for a in function.attribute_proto})
    values.update({a.name: a for a in node.attribute})
    return values


def _bind_attributes(node: onnx.NodeProto, attrs: dict[str, onnx.AttributeProto]) -> None:
    """Replace references to the function's attributes (ref_attr_name) by their values;
    a reference to an attribute the caller did not set is dropped, so the op's default applies."""
    kept = []
    for a in node.attribute:
        if a.ref_attr_name:
            source = attrs.get(a.ref_attr_name)
            if source is None:
                continue
            bound = onnx.AttributeProto()
            bound.CopyFrom(source)
            bound.name = a.name
            kept.append(bound)
        else:
            kept.append(a)
    del node.attribute[:]
    node.attribute.extend(kept)
