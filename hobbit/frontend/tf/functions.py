"""Inlining TensorFlow function calls, so converters see one flat graph.

TF2 graphs (SavedModels, and frozen graphs with functional control flow) compute through
calls: PartitionedCall/StatefulPartitionedCall naming a FunctionDef in attr `f`, or a
node whose op is itself a function's name. Each call is replaced by a copy of the body,
its nodes renamed "<call>/<body node>", recursively; a reference to the call's output k
becomes an alias of the body's k-th return value.

Why a table of output args: inside a body, inputs are written "node:out_arg:idx", an
index within a named output argument, while graph-level references count outputs flat.
Turning one into the other needs each op's output arguments and the sizes of its list
outputs, i.e. TensorFlow's op registry. hobbit carries only the multi-output ops found in
inference graphs; any other op is taken to have one output argument, and a body that
names two different output args of such an op is reported instead of guessed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hobbit.errors import GraphStructureError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tf.rawgraph import RawNode

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")

_BATCH_NORM = ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2")

# op -> its output args: a name for one tensor, (name, attr) for a list whose length is
# the int attr or the length of the list attr.
_OUTPUT_ARGS: dict[str, tuple[str | tuple[str, str], ...]] = {
    "FusedBatchNorm": _BATCH_NORM,
    "FusedBatchNormV2": _BATCH_NORM,
    "FusedBatchNormV3": _BATCH_NORM + ("reserve_space_3",),
    "TopK": ("values", "indices"),
    "TopKV2": ("values", "indices"),
    "Unique": ("y", "idx"),
    "UniqueV2": ("y", "idx"),
    "UniqueWithCounts": ("y", "idx", "count"),
    "UniqueWithCountsV2": ("y", "idx", "count"),
    "MaxPoolWithArgmax": ("output", "argmax"),
    "Switch": ("output_false", "output_true"),
    "Merge": ("output", "value_index"),
    "BroadcastGradientArgs": ("r0", "r1"),
    "NonMaxSuppressionV4": ("selected_indices", "valid_outputs"),
    "NonMaxSuppressionV5": ("selected_indices", "selected_scores", "valid_outputs"),
    "QuantizeV2": ("output", "output_min", "output_max"),
    "Split": (("output", "num_split"),),
    "SplitV": (("output", "num_split"),),
    "Unpack": (("output", "num"),),
    "ShapeN": (("output", "N"),),
    "IdentityN": (("output", "T"),),
    "PartitionedCall": (("output", "Tout"),),
    "StatefulPartitionedCall": (("output", "Tout"),),
    "If": (("output", "Tout"),),
    "StatelessIf": (("output", "Tout"),),
    "While": (("output", "T"),),
    "StatelessWhile": (("output", "T"),),
}


def called_function(node: RawNode, library: Mapping[str, Any]) -> str | None:
    """The name of the function `node` calls, or None if it is an ordinary op."""
    if node.op in CALL_OPS:
        return node.proto_attrs["f"].func.name if "f" in node.proto_attrs else ""
    return node.op if node.op in library else None


def inline_calls(
    nodes: Mapping[str, RawNode], library: Mapping[str, Any], source: str
) -> tuple[dict[str, RawNode], dict[TensorRef, TensorRef]]:
    """`nodes` with every call replaced by its body, and the aliases from call outputs
    to the tensors the bodies return (see rawgraph.resolve)."""
    flat: dict[str, RawNode] = {}
    aliases: dict[TensorRef, TensorRef] = {}
    taken = set(nodes)
    stack: list[tuple[RawNode, tuple[str, ...]]] = [(node, ()) for node in nodes.values()]
    while stack:
        node, chain = stack.pop()
        name = called_function(node, library)
        if name is None:
            flat[node.name] = node
            continue
        if name not in library:
            raise GraphStructureError(
                f"{source}: node '{node.name}' ({node.op}) calls function '{name}', "
                "which the graph's library does not define"
            )
        if name in chain:
            raise GraphStructureError(f"{source}: node '{node.name}' calls function '{name}' recursively")
        body, returns = _expand(node, library[name], library, taken, source)
        aliases.update((TensorRef(node.name, k), ref) for k, ref in enumerate(returns))
        stack.extend((inner, chain + (name,)) for inner in body)
    return flat, aliases


def _call_attrs(node: RawNode) -> Mapping[str, Any]:
    """The attrs a body's placeholders ("$T") are bound to: those of `f` for a
    PartitionedCall, the call node's own for a call by name."""
    if node.op in CALL_OPS:
        return node.proto_attrs["f"].func.attr
    return node.proto_attrs


def _list_size(attrs: Mapping[str, Any], attr: str, where: str) -> int:
    value = attrs.get(attr)
    if value is None:
        raise GraphStructureError(f"{where}: attr '{attr}', the length of a list argument, is missing")
    kind = value.WhichOneof("value")
    return value.i if kind == "i" else len(value.list.type)


def _arg_sizes(args, attrs: Mapping[str, Any], where: str) -> list[tuple[str, int]]:
    sizes = []
    for arg in args:
        list_attr = arg.number_attr or arg.type_list_attr
        sizes.append((arg.name, _list_size(attrs, list_attr, where) if list_attr else 1))
    return sizes


def _bound_args(node: RawNode, function, source: str) -> dict[str, list[TensorRef]]:
    where = f"{source}: call '{node.name}' of '{function.signature.name}'"
    sizes = _arg_sizes(function.signature.input_arg, _call_attrs(node), where)
    if sum(size for _, size in sizes) != len(node.inputs):
        raise GraphStructureError(
            f"{where}: {len(node.inputs)} inputs for the function's {sum(size for _, size in sizes)} arguments"
        )
    bound, start = {}, 0
    for name, size in sizes:
        bound[name] = node.inputs[start : start + size]
        start += size
    return bound


def _substituted(attrs: Mapping[str, Any], bindings: Mapping[str, Any]) -> Mapping[str, Any]:
    if not any(value.WhichOneof("value") == "placeholder" for value in attrs.values()):
        return attrs
    return {
        key: bindings.get(value.placeholder, value) if value.WhichOneof("value") == "placeholder" else value
        for key, value in attrs.items()
    }


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


class _Body:
    """One copy of a function body being inlined: its renamed nodes and how its
    "node:out_arg:idx" and "arg" references become graph-level TensorRefs."""

    def __init__(self, call: RawNode, function, library: Mapping[str, Any], taken: set[str], source: str):
        self.function, self.library, self.source = function, library, source
        self.where = f"{source}: function '{function.signature.name}' (inlined at '{call.name}')"
        self.args = _bound_args(call, function, source)
        bindings = _call_attrs(call)
        self.nodes = {
            body.name: RawNode(
                _unique(f"{call.name}/{body.name}", taken), body.op, [], _substituted(body.attr, bindings)
            )
            for body in function.node_def
        }
        self.seen_out_args: dict[str, str] = {}

    def ref(self, text: str, consumer: str) -> TensorRef:
        parts = text.split(":")
        if len(parts) == 3 and parts[0] in self.nodes and parts[2].isdigit():
            return TensorRef(self.nodes[parts[0]].name, self._flat_index(parts[0], parts[1], int(parts[2])))
        if len(parts) <= 2 and parts[0] in self.args:
            position = int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else 0
            if position < len(self.args[parts[0]]):
                return self.args[parts[0]][position]
        raise GraphStructureError(f"{self.where}: {consumer} refers to '{text}', which is no node output or argument")

    def _flat_index(self, body_name: str, out_arg: str, index: int) -> int:
        node = self.nodes[body_name]
        spec = self._output_args(node)
        if spec is None:
            first = self.seen_out_args.setdefault(body_name, out_arg)
            if first != out_arg:
                reason = f"outputs '{first}' and '{out_arg}' of an op whose outputs hobbit cannot number"
                raise UnsupportedModelError([UnsupportedItem(node.op, "tf", 0, node.name, reason)])
            return index
        offset = 0
        for name, size in spec:
            if name == out_arg:
                return offset + index
            offset += size
        raise GraphStructureError(f"{self.where}: node '{body_name}' ({node.op}) has no output '{out_arg}'")

    def _output_args(self, node: RawNode) -> list[tuple[str, int]] | None:
        where = f"{self.where}: node '{node.name}'"
        if node.op in _OUTPUT_ARGS:
            return [
                (arg, 1) if isinstance(arg, str) else (arg[0], _list_size(node.proto_attrs, arg[1], where))
                for arg in _OUTPUT_ARGS[node.op]
            ]
        if node.op in self.library:
            return _arg_sizes(self.library[node.op].signature.output_arg, node.proto_attrs, where)
        return None


def _expand(call: RawNode, function, library: Mapping[str, Any], taken: set[str], source: str):
    body = _Body(call, function, library, taken, source)
    for body_def in function.node_def:
        node = body.nodes[body_def.name]
        node.inputs = [body.ref(text, f"node '{body_def.name}'") for text in body_def.input if not text.startswith("^")]
    returns = []
    for arg in function.signature.output_arg:
        if arg.name not in function.ret:
            raise GraphStructureError(f"{body.where}: output '{arg.name}' has no return value")
        returns.append(body.ref(function.ret[arg.name], f"output '{arg.name}'"))
    return list(body.nodes.values()), returns
