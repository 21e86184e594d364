"""Transpose sinking: NHWC models (TensorFlow, TFLite, tf2onnx exports) at NCHW speed.

A TF converter writes every NHWC Conv or pool as Transpose(0,3,1,2) -> NCHW op ->
Transpose(0,2,3,1), so between two convs the tensor is turned to NHWC and back. This
pass pushes each Transpose down through the ops that commute with it, rewriting their
attributes and constant operands for the untransposed layout (a bias of shape (C,) on
NHWC becomes (C, 1, 1) on NCHW, Concat's axis 3 becomes 1, a Mean over H, W becomes a
Mean over 2, 3), until it meets the Transpose that undoes it and both disappear. What
is left is the conversion at each graph input and output.

A Transpose moves into a region of nodes at once: its readers, their readers and so on
(a Gelu's two branches meet two ops down), each rewritten for the untransposed tensor,
with a Transpose after each region output read outside it. Of the regions grown, the
one that removes the most Transposes is taken, and only when it does not add any: the
count after (new ones after the region, inverses put on operands that were not
transposed, minus the ones that die or cancel) is at most the count before. A move that
keeps the count moves Transposes strictly down and inserts none on operands, so the
walk ends. Two ops that cannot commute in
general are rewritten because a Keras model applies them to NHWC tensors: a MatMul of
the channel axis by a constant matrix (Dense) is a 1x1 Conv of the NCHW tensor, and a
Flatten that feeds a constant MatMul reads NCHW order once the weight rows are permuted.
A Transpose that only moves size-1 dims is then a Reshape (a view), and the whole pass
is undone if its result would copy more elements in Transposes than the input did."""

from __future__ import annotations

from dataclasses import replace

from hobbit.graph.ir import Graph, Node, Value
from hobbit.graph.rewrite import replace_uses

from hobbit.passes.perms import is_identity, keeps_order, perm_of
from hobbit.passes.transpose_trial import Trial

# How many reader generations a move may look ahead, so a region stays a block's worth of ops.
LOOKAHEAD = 24


def sink_transposes(graph: Graph) -> Graph:
    """Moves that keep the count may grow the Transposes (a Dense to more channels, a Pad)
    on their way to the one they cancel; where such moves end in a dead end and the result
    copies more than the input, the walk is redone without them, and failing that undone."""
    if not any(node.op == "Transpose" for node in graph.nodes):
        return graph
    before = transpose_cost(graph)
    for may_grow in (True, False):
        trial = _copy(graph)
        _Sinker(trial, may_grow).run()
        _views(trial)
        after = transpose_cost(trial)
        if after[0] <= before[0] and after[1] <= before[1]:
            return trial
    return graph


def transpose_cost(graph: Graph) -> tuple[int, int]:
    """(number of Transposes, elements they copy): what the pass must not increase."""
    moved = [node.outputs[0].type.size for node in graph.nodes if node.op == "Transpose"]
    return len(moved), sum(moved)


def _copy(graph: Graph) -> Graph:
    """A copy to rewrite, with new values and nodes sharing the constants' data (VGG-16's
    weights are not duplicated), so the graph can be handed back untouched."""
    values: dict[int, Value] = {}

    def value(v: Value | None) -> Value | None:
        if v is None:
            return None
        if id(v) not in values:
            values[id(v)] = Value(v.name, v.type, v.const)
        return values[id(v)]

    nodes = [Node(n.op, n.name, [value(v) for v in n.inputs], [value(v) for v in n.outputs], dict(n.attrs),
                  [replace(step, operand=value(step.operand)) for step in n.epilogue]) for n in graph.nodes]
    copied = Graph(graph.name, [value(v) for v in graph.inputs], [value(v) for v in graph.outputs], nodes)
    copied.output_names, copied.output_layout = list(graph.output_names), list(graph.output_layout)
    return copied


def _views(graph: Graph) -> None:
    for i, node in enumerate(graph.nodes):
        if node.op == "Transpose" and keeps_order(tuple(node.inputs[0].shape), perm_of(node)):
            y = node.outputs[0]
            graph.nodes[i] = Node("Reshape", node.name, node.inputs, [y], {"shape": tuple(y.shape)})
    graph.relink()


class _Sinker:
    def __init__(self, graph: Graph, may_grow: bool):
        self.graph = graph
        self.may_grow = may_grow
        self.serial = 0
        self._index()

    def _index(self) -> None:
        self.readers: dict[int, list[Node]] = {}
        for node in self.graph.nodes:
            for v in node.operands():
                readers = self.readers.setdefault(id(v), [])
                if node not in readers:
                    readers.append(node)
        self.outputs = {id(v) for v in self.graph.outputs}
        self.live = {id(node) for node in self.graph.nodes}
        self.position = {id(node): i for i, node in enumerate(self.graph.nodes)}

    def fresh(self, base: str) -> str:
        self.serial += 1
        return f"{base}/nchw{self.serial}"

    def run(self) -> None:
        """Sweep until no Transpose moves. Each sweep that moves one takes it at least one
        node further down, so the node count bounds the sweeps (a guard, never reached)."""
        for _ in range(len(self.graph.nodes) + 1):
            moved = False
            for node in list(self.graph.nodes):
                if id(node) in self.live and node.op == "Transpose" and self._sink(node):
                    moved = True
            if not moved:
                return

    def _sink(self, t: Node) -> bool:
        x, y, perm = t.inputs[0], t.outputs[0], perm_of(t)
        if is_identity(perm):
            self._commit(Trial(self, t, []), aliases=[(y, x)])
            return True
        readers = self.readers.get(id(y), [])
        if not readers or any(n.epilogue for n in readers):
            return False
        best = self._best_region(t, list(readers))
        if best is None:
            return False
        self._commit(best)
        return True

    def _best_region(self, t: Node, members: list[Node]) -> Trial | None:
        """Grow the set of rewritten nodes from the Transpose's readers to their readers, and
        so on (a Gelu's two branches only meet two ops down), keeping the best move seen."""
        blocked: set[int] = set()
        best: Trial | None = None
        for _ in range(LOOKAHEAD):
            trial = self._build(t, members, blocked)
            if trial is None:
                return best
            if trial.acceptable() and (best is None or trial.delta() <= best.delta()):
                best = trial
            frontier = [r for v in trial.moved_values() for r in self.readers.get(id(v), [])
                        if id(r) not in trial.members and id(r) not in blocked and not r.epilogue]
            if not frontier:
                return best
            chosen = {id(n): n for n in trial.group + frontier}
            members = sorted(chosen.values(), key=lambda n: self.position[id(n)])
        return best

    def _build(self, t: Node, members: list[Node], blocked: set[int]) -> Trial | None:
        """The move of `t` into `members`, leaving out those that do not commute with it."""
        while members:
            trial = Trial(self, t, members)
            failed = trial.build()
            if failed is None:
                return trial
            blocked.add(id(failed))
            members = [n for n in members if n is not failed]
        return None

    def _commit(self, trial: Trial, aliases: list[tuple[Value, Value]] | None = None) -> None:
        nodes: list[Node] = []
        for node in self.graph.nodes:
            nodes.extend(trial.replacements.get(id(node), [node]))
        self.graph.nodes = nodes
        for old, new in (aliases or []) + trial.aliases:
            replace_uses(self.graph, old, new)
        self.graph.relink()
        self._drop_dead_transposes()
        self._index()

    def _drop_dead_transposes(self) -> None:
        while True:
            read = {id(v) for node in self.graph.nodes for v in node.operands()} | {id(v) for v in self.graph.outputs}
            kept = [n for n in self.graph.nodes if n.op != "Transpose" or id(n.outputs[0]) in read]
            if len(kept) == len(self.graph.nodes):
                return
            self.graph.nodes = kept
