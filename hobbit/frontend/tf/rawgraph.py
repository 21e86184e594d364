"""A TensorFlow graph as read, before its attributes are decoded: what the GraphDef and
SavedModel readers build, the inliner rewrites and the pruner cuts down.

Why attributes stay protobuf messages until the end: a SavedModel's graph holds save and
restore functions, initialisers and unused signatures that the requested outputs never
reach; decoding only what survives pruning keeps large models fast. `attrs` holds values
a reader sets itself (a variable turned into a Const), which override `proto_attrs`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hobbit.errors import CorruptModelError, GraphStructureError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.tf.attrs import decode_attrs
from hobbit.frontend.tf.graph import TensorRef, TFGraph, TFNode, TFTensor


@dataclass
class RawNode:
    name: str
    op: str
    inputs: list[TensorRef]
    proto_attrs: Mapping[str, Any] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)


def parse_ref(text: str) -> TensorRef:
    """A graph-level tensor name, "node" or "node:index"."""
    node, _, index = text.rpartition(":")
    if node and index.isdigit():
        return TensorRef(node, int(index))
    return TensorRef(text, 0)


def data_inputs(inputs: Iterable[str]) -> list[TensorRef]:
    """A NodeDef's inputs without its control inputs ("^node")."""
    return [parse_ref(text) for text in inputs if not text.startswith("^")]


def raw_nodes(graph_def, source: str) -> dict[str, RawNode]:
    nodes: dict[str, RawNode] = {}
    for node in graph_def.node:
        if not node.name or not node.op:
            raise CorruptModelError(f"{source}: a GraphDef node without a name or op (not a GraphDef?)")
        if node.name in nodes:
            raise GraphStructureError(f"{source}: two nodes are named '{node.name}'")
        nodes[node.name] = RawNode(node.name, node.op, data_inputs(node.input), node.attr)
    check_acyclic(nodes, source)
    return nodes


def check_acyclic(nodes: Mapping[str, RawNode], source: str) -> None:
    """A data cycle is a GraphStructureError naming its nodes, wherever it is in the graph.

    Why the whole graph and not only what the outputs need: a frozen GraphDef's default
    outputs are the nodes nobody reads, and a node on a cycle reads itself, so a model
    whose last node was `out = Relu(out)` lost it silently and answered with the node
    before it. TensorFlow refuses such graphs; the one cycle it allows is a TF1 while
    loop's (its back edge leaves a NextIteration), which hobbit does not run: that one is
    reported as an unsupported construct rather than a broken graph."""
    done: set[str] = set()
    for root in nodes:
        if root in done:
            continue
        path, on_path = [root], {root}
        stack = [iter(_producers(nodes, root))]
        while stack:
            producer = next(stack[-1], None)
            if producer is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
                continue
            if producer in on_path:
                _report_cycle(nodes, [producer, *reversed(path[path.index(producer):])], source)
            if producer in done:
                continue
            path.append(producer)
            on_path.add(producer)
            stack.append(iter(_producers(nodes, producer)))


def _producers(nodes: Mapping[str, RawNode], name: str) -> list[str]:
    """The nodes `name` reads data from (missing ones are reported later, by name)."""
    return [ref.node for ref in nodes[name].inputs if ref.node in nodes]


def _report_cycle(nodes: Mapping[str, RawNode], flow: list[str], source: str) -> None:
    """`flow`: the cycle's nodes, each feeding the next, the first repeated at the end."""
    described = " -> ".join(f"'{n}' ({nodes[n].op})" for n in flow)
    loop = next((n for n in flow if nodes[n].op == "NextIteration"), None)
    if loop is not None:
        raise UnsupportedModelError([UnsupportedItem(
            "NextIteration", "tf", 0, loop, f"a TF1 while loop ({described}), which hobbit does not support")])
    raise GraphStructureError(f"{source}: the graph has a cycle through node '{flow[0]}': {described}")


def resolve(ref: TensorRef, aliases: Mapping[TensorRef, TensorRef]) -> TensorRef:
    """Follow a call output to the tensor its inlined body returns (possibly another
    call's output, hence the loop)."""
    seen = 0
    while ref in aliases:
        ref = aliases[ref]
        seen += 1
        if seen > len(aliases):
            raise GraphStructureError(f"function outputs refer to each other in a cycle at '{ref}'")
    return ref


def needed(nodes: Mapping[str, RawNode], roots: Iterable[TensorRef], source: str) -> dict[str, RawNode]:
    """The nodes the `roots` depend on; an input naming a node that does not exist is an
    error naming the node that has it."""
    kept: dict[str, RawNode] = {}
    stack: list[tuple[TensorRef, str | None]] = [(ref, None) for ref in roots]
    while stack:
        ref, consumer = stack.pop()
        if ref.node in kept:
            continue
        node = nodes.get(ref.node)
        if node is None:
            where = f"node '{consumer}' has input '{ref}'" if consumer else f"output '{ref}' names a node"
            raise GraphStructureError(f"{source}: {where} that does not exist")
        kept[node.name] = node
        stack.extend((i, node.name) for i in node.inputs)
    return kept


def to_tfgraph(
    nodes: Mapping[str, RawNode], inputs: list[TFTensor], outputs: list[TFTensor], fmt: str, source: str
) -> TFGraph:
    decoded = {}
    for name, node in nodes.items():
        attrs = decode_attrs(node.proto_attrs, f"{source}: node '{name}'")
        decoded[name] = TFNode(name, node.op, node.inputs, {**attrs, **node.attrs})
    return TFGraph(decoded, inputs, outputs, fmt, source)
