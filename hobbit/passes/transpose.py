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

from dataclasses import dataclass, field, replace

import numpy as np

from hobbit.errors import HobbitError
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.graph.rewrite import replace_uses
from hobbit.ops.reduce import REDUCE_OPS
from hobbit.ops.registry import get_op

Perm = tuple[int, ...]
_AXIS_OPS = ("Softmax", "LogSoftmax")
_ARG_OPS = ("ArgMax", "ArgMin")
NHWC_TO_NCHW_INVERSE: Perm = (0, 2, 3, 1)  # the perm that turns an NCHW tensor into NHWC
_POINTWISE = {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1}
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


def perm_of(node: Node) -> Perm:
    perm = tuple(node.attrs.get("perm") or ())
    return perm or tuple(reversed(range(len(node.inputs[0].shape))))


def inverse(perm: Perm) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose(first: Perm, then: Perm) -> Perm:
    """transpose(transpose(v, first), then) == transpose(v, compose(first, then))."""
    return tuple(first[i] for i in then)


def is_identity(perm: Perm) -> bool:
    return perm == tuple(range(len(perm)))


def keeps_order(shape: tuple[int, ...], perm: Perm) -> bool:
    """The transpose only moves size-1 dims, so the data stays in memory order: a view."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


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
            self._commit(_Trial(self, t, []), aliases=[(y, x)])
            return True
        readers = self.readers.get(id(y), [])
        if not readers or any(n.epilogue for n in readers):
            return False
        best = self._best_region(t, list(readers))
        if best is None:
            return False
        self._commit(best)
        return True

    def _best_region(self, t: Node, members: list[Node]) -> _Trial | None:
        """Grow the set of rewritten nodes from the Transpose's readers to their readers, and
        so on (a Gelu's two branches only meet two ops down), keeping the best move seen."""
        blocked: set[int] = set()
        best: _Trial | None = None
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

    def _build(self, t: Node, members: list[Node], blocked: set[int]) -> _Trial | None:
        """The move of `t` into `members`, leaving out those that do not commute with it."""
        while members:
            trial = _Trial(self, t, members)
            failed = trial.build()
            if failed is None:
                return trial
            blocked.add(id(failed))
            members = [n for n in members if n is not failed]
        return None

    def _commit(self, trial: _Trial, aliases: list[tuple[Value, Value]] | None = None) -> None:
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


@dataclass
class _Trial:
    """One tentative move of Transpose `t` into the reader nodes `group`: the nodes that
    replace them, and what the move does to the number of Transposes."""

    sinker: _Sinker
    t: Node
    group: list[Node]
    replacements: dict[int, list[Node]] = field(default_factory=dict)
    aliases: list[tuple[Value, Value]] = field(default_factory=list)
    moved: dict[int, tuple[Value, Perm]] = field(default_factory=dict)  # id(old output) -> (new, its perm)
    added: list[Value] = field(default_factory=list)      # outputs of new Transposes that stay read
    inserted: list[Value] = field(default_factory=list)   # new Transposes on operands
    candidates: dict[int, Node] = field(default_factory=dict)  # Transposes that may lose every reader
    removed: list[Node] = field(default_factory=list)     # Transposes that cancel out
    pending: list[Node] = field(default_factory=list)     # new Transposes the next rewritten node reads
    cache: dict[tuple[int, Perm], Value] = field(default_factory=dict)
    members: set[int] = field(default_factory=set)

    @property
    def x(self) -> Value:
        return self.t.inputs[0]

    @property
    def perm(self) -> Perm:
        return perm_of(self.t)

    def build(self) -> Node | None:
        """Rewrite every member; the first that does not commute is returned (None: all did)."""
        self.members.update(id(n) for n in self.group)
        self.candidates[id(self.t)] = self.t
        for node in self.group:
            try:
                nodes = _rewrite(self, node)
            except HobbitError:
                nodes = None
            if nodes is None:
                return node
            self.replacements.setdefault(id(node), []).extend(nodes)
        return None

    def delta(self) -> int:
        """The change in the number of Transposes the move makes."""
        dead = [n for n in self.candidates.values() if self._dies(n)]
        return len(self.added) + len(self.inserted) - len(dead) - len(self.removed)

    def acceptable(self) -> bool:
        delta = self.delta()
        if delta < 0:
            return True
        if delta > 0 or self.inserted:
            return False
        dead = [n for n in self.candidates.values() if self._dies(n)]
        grown = sum(v.type.size for v in self.added) - sum(n.outputs[0].type.size for n in dead + self.removed)
        return grown <= 0 or self.sinker.may_grow

    def moved_values(self) -> list[Value]:
        """The members' old outputs, now given back by Transposes of their new ones."""
        return [node.outputs[0] for nodes in self.replacements.values() for node in nodes
                if node.op == "Transpose" and id(node.outputs[0]) in self.moved]

    def source(self, u: Value | None) -> tuple[Value, Perm] | None:
        """(v, perm) with u == transpose(v, perm) where the move already has v: the sunk
        Transpose's input, or a member's new output."""
        if u is self.t.outputs[0]:
            return self.x, self.perm
        return self.moved.get(id(u)) if u is not None else None

    def _dies(self, node: Node) -> bool:
        out = node.outputs[0]
        readers = self.sinker.readers.get(id(out), [])
        return id(out) not in self.sinker.outputs and all(id(r) in self.members for r in readers)

    def outside_readers(self, v: Value) -> list[Node]:
        return [r for r in self.sinker.readers.get(id(v), []) if id(r) not in self.members]

    # -- operands --------------------------------------------------------------

    def under(self, u: Value, perm: Perm, broadcast: bool = False) -> Value | None:
        """A value v with transpose(v, perm) == u, for a rewritten node to read instead of u.
        Only an operand of a broadcasting op may come back with another rank (a constant with
        its leading 1s dropped); Concat and the like need every operand at the rank of `perm`."""
        if id(u) in self.moved:
            v, p = self.moved[id(u)]
            return v if p == perm else None
        if u.const is not None:
            return self.constant(u, perm, broadcast)
        if len(u.shape) != len(perm):
            return None
        key = (id(u), perm)
        if key not in self.cache:
            self.cache[key] = self._transposed(u, inverse(perm))
        return self.cache[key]

    def _transposed(self, u: Value, perm: Perm) -> Value:
        """transpose(u, perm), composed with u's own Transpose when it has one."""
        producer = u.producer
        if producer is not None and producer.op == "Transpose" and id(producer) not in self.members:
            self.candidates[id(producer)] = producer
            u, perm = producer.inputs[0], compose(perm_of(producer), perm)
            if is_identity(perm):
                return u
        out = Value(self.sinker.fresh(u.name), TensorType(u.dtype, tuple(u.shape[p] for p in perm)))
        node = Node("Transpose", self.sinker.fresh(u.name), [u], [out], {"perm": perm})
        out.producer = node
        self.inserted.append(out)
        self.pending.append(node)
        return out

    def constant(self, u: Value, perm: Perm, broadcast: bool) -> Value | None:
        """The constant transposed back. As an operand of a broadcasting op it is first
        aligned to the rank of `perm` and its leading 1s are dropped after (a bias (C,) on
        NHWC becomes (C, 1, 1)); otherwise it must have that rank and keeps it."""
        data = u.const
        if not broadcast and data.ndim != len(perm):
            return None
        if data.ndim == 0 or data.ndim > len(perm):
            return u if data.ndim == 0 else None
        aligned = data.reshape((1,) * (len(perm) - data.ndim) + data.shape)
        moved = np.ascontiguousarray(np.transpose(aligned, inverse(perm)))
        shape = moved.shape
        while broadcast and shape and shape[0] == 1:
            shape = shape[1:]
        if shape == data.shape and np.array_equal(moved.reshape(shape), data):
            return u
        return Value(self.sinker.fresh(u.name), const=moved.reshape(shape))

    # -- results ---------------------------------------------------------------

    def emit(self, node: Node, op: str, inputs: list[Value | None], attrs: dict,
             perms: list[Perm], extra: list[Node] | None = None) -> list[Node] | None:
        """The rewritten `node`: `op` on `inputs` writing, for each output o, a value o' with
        transpose(o', perm) == o, and the Transposes that give the old outputs back."""
        if any(v is None for v in inputs):
            return None
        outs = []
        for o, p in zip(node.outputs, perms):
            if is_identity(p):
                outs.append(o)
            else:
                shape = [0] * len(p)
                for i, d in zip(p, o.shape):
                    shape[i] = d
                outs.append(Value(self.sinker.fresh(o.name), TensorType(o.dtype, tuple(shape))))
        new = Node(op, node.name, list(inputs), outs, attrs)
        types = get_op(op).infer(new)[:len(outs)]  # LayerNormalization's statistics may be left out
        if [(np.dtype(t.dtype), tuple(t.shape)) for t in types] != [(np.dtype(v.dtype), tuple(v.shape)) for v in outs]:
            return None
        nodes, self.pending = self.pending + (extra or []) + [new], []
        for o, v, p in zip(node.outputs, outs, perms):
            v.producer = new
            if v is o:
                continue
            back = Node("Transpose", self.sinker.fresh(o.name), [v], [o], {"perm": p})
            nodes.append(back)
            self.moved[id(o)] = (v, p)
            if id(o) in self.sinker.outputs or self.outside_readers(o):
                self.added.append(o)
        return nodes


def _rewrite(trial: _Trial, node: Node) -> list[Node] | None:
    """Nodes computing `node` on the untransposed tensor, or None where it does not commute."""
    sources = [trial.source(v) for v in node.inputs if trial.source(v) is not None]
    if not sources:
        return None
    perm = sources[0][1]
    rank = len(perm)
    if node.op == "Transpose":
        return _compose(trial, node, *sources[0])
    if node.op == "Reshape":
        return _reshape(trial, node, *sources[0])
    if node.op == "MatMul":
        return _dense(trial, node)
    if any(len(o.shape) != rank for o in node.outputs) and node.op not in REDUCE_OPS + _ARG_OPS:
        return None
    if get_op(node.op).kind == "elementwise":
        return trial.emit(node, node.op, [trial.under(v, perm, broadcast=True) for v in node.inputs],
                          dict(node.attrs), [perm])
    if node.op == "Concat":
        return trial.emit(node, "Concat", [trial.under(v, perm) for v in node.inputs],
                          {**node.attrs, "axis": perm[node.attrs["axis"]]}, [perm])
    if node.op in _AXIS_OPS:
        return trial.emit(node, node.op, [trial.under(node.inputs[0], perm)],
                          {**node.attrs, "axis": perm[node.attrs["axis"]]}, [perm])
    if node.op == "Split":
        return trial.emit(node, "Split", [trial.under(node.inputs[0], perm)],
                          {**node.attrs, "axis": perm[node.attrs["axis"]]}, [perm] * len(node.outputs))
    if node.op == "Pad":
        pads = node.attrs["pads"]
        moved = [0] * (2 * rank)
        for i, p in enumerate(perm):
            moved[p], moved[p + rank] = pads[i], pads[i + rank]
        return trial.emit(node, "Pad", [trial.under(node.inputs[0], perm)], {**node.attrs, "pads": tuple(moved)},
                          [perm])
    if node.op == "Slice":
        attrs = {k: _permuted(node.attrs[k], perm) for k in ("starts", "steps", "sizes")}
        return trial.emit(node, "Slice", [trial.under(node.inputs[0], perm)], {**node.attrs, **attrs}, [perm])
    if node.op in REDUCE_OPS:
        axes = tuple(sorted(perm[a] for a in node.attrs["axes"]))
        return trial.emit(node, node.op, [trial.under(node.inputs[0], perm)], {**node.attrs, "axes": axes},
                          [_reduced(perm, node.attrs["axes"], axes, node.attrs["keepdims"])])
    if node.op in _ARG_OPS:
        axis = perm[node.attrs["axis"]]
        return trial.emit(node, node.op, [trial.under(node.inputs[0], perm)], {**node.attrs, "axis": axis},
                          [_reduced(perm, (node.attrs["axis"],), (axis,), node.attrs["keepdims"])])
    if node.op == "LayerNormalization":
        return _layernorm(trial, node, perm)
    return None


def _permuted(values: tuple, perm: Perm) -> tuple:
    """Per-dim attribute values of the transposed tensor, reordered for the untransposed one."""
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = values[i]
    return tuple(out)


def _reduced(perm: Perm, axes: tuple[int, ...], moved_axes: tuple[int, ...], keepdims: int) -> Perm:
    """The perm between the reduction of the untransposed and of the transposed tensor."""
    if keepdims:
        return perm
    kept = [i for i in range(len(perm)) if i not in axes]
    kept_moved = [j for j in range(len(perm)) if j not in moved_axes]
    return tuple(kept_moved.index(perm[i]) for i in kept)


def _compose(trial: _Trial, node: Node, x: Value, first: Perm) -> list[Node]:
    perm = compose(first, perm_of(node))
    if is_identity(perm):
        trial.aliases.append((node.outputs[0], x))
        trial.removed.append(node)
        return []
    return [Node("Transpose", node.name, [x], node.outputs, {"perm": perm})]


def _reshape(trial: _Trial, node: Node, x: Value, perm: Perm) -> list[Node] | None:
    """A Reshape of a Transpose that keeps memory order reads the untransposed tensor; a
    Flatten feeding a constant MatMul does too, with the weight rows put in its order."""
    if keeps_order(tuple(x.shape), perm):
        return [Node("Reshape", node.name, [x], node.outputs, dict(node.attrs))]
    flat = node.outputs[0]
    matmul = _sole_reader(trial, flat)
    shape = tuple(node.attrs["shape"])
    if perm[0] != 0 or len(shape) != 2 or matmul is None or matmul.op != "MatMul" or matmul.inputs[0] is not flat \
            or matmul.epilogue or not _constant_matrix(matmul.inputs[1], matmul):
        return None
    w = matmul.inputs[1]
    if perm == NHWC_TO_NCHW_INVERSE and shape == (x.type.size // x.shape[1], x.shape[1]):
        return _tensordot(trial, node, matmul, x, perm)
    if shape[0] != x.shape[0]:
        return None
    y_dims = tuple(x.shape[p] for p in perm[1:])
    rows = w.const.reshape(y_dims + (w.shape[1],))
    order = tuple(inverse(perm)[j] - 1 for j in range(1, len(perm))) + (len(perm) - 1,)
    permuted = np.ascontiguousarray(np.transpose(rows, order)).reshape(w.shape)
    weight = Value(trial.sinker.fresh(w.name), const=permuted)
    trial.replacements[id(matmul)] = [Node("MatMul", matmul.name, [flat, weight], matmul.outputs,
                                           dict(matmul.attrs))]
    return [Node("Reshape", node.name, [x], [flat], dict(node.attrs))]


def _sole_reader(trial: _Trial, v: Value) -> Node | None:
    readers = trial.sinker.readers.get(id(v), [])
    return readers[0] if len(readers) == 1 and id(v) not in trial.sinker.outputs else None


def _constant_matrix(w: Value, matmul: Node) -> bool:
    return w.const is not None and w.const.ndim == 2 and matmul.attrs.get("b_layout", "KN") == "KN" \
        and np.dtype(w.dtype) == np.float32


def _tensordot(trial: _Trial, node: Node, matmul: Node, x: Value, perm: Perm) -> list[Node] | None:
    """TensorFlow's Dense on NHWC: Reshape to [N*H*W, C] -> MatMul -> Reshape to [N, H, W, K],
    a 1x1 Conv of the NCHW tensor."""
    back = _sole_reader(trial, matmul.outputs[0])
    n, c, h, w = x.shape
    k = matmul.inputs[1].shape[1]
    if back is None or back.op != "Reshape" or tuple(back.attrs["shape"]) != (n, h, w, k):
        return None
    trial.replacements[id(matmul)] = []
    trial.replacements[id(back)] = []
    return trial.emit(back, "Conv", [x, _filters(trial, matmul.inputs[1])], dict(_POINTWISE), [perm])


def _filters(trial: _Trial, w: Value) -> Value:
    """A [C, K] Dense weight as [K, C, 1, 1] 1x1 Conv filters."""
    filters = np.ascontiguousarray(w.const.T).reshape(w.shape[1], w.shape[0], 1, 1)
    return Value(trial.sinker.fresh(w.name), const=filters)


def _dense(trial: _Trial, node: Node) -> list[Node] | None:
    """y[n, h, w, :] @ W for NHWC y = transpose(x, (0, 2, 3, 1)): a 1x1 Conv of x by W^T."""
    y, w = node.inputs
    source = trial.source(y)
    if source is None or source[1] != NHWC_TO_NCHW_INVERSE or not _constant_matrix(w, node):
        return None
    return trial.emit(node, "Conv", [source[0], _filters(trial, w)], dict(_POINTWISE), [source[1]])


def _layernorm(trial: _Trial, node: Node, perm: Perm) -> list[Node] | None:
    """LayerNormalization over dims the transpose keeps in place stays one node; over the
    channel axis of NHWC it is written out as reductions over that axis of NCHW."""
    rank, axis = len(perm), node.attrs["axis"]
    if any(id(o) in trial.sinker.outputs or trial.sinker.readers.get(id(o)) for o in node.outputs[1:]):
        return None
    if perm[axis:] == tuple(range(axis, rank)):
        ins = [trial.under(node.inputs[0], perm)] + node.inputs[1:]
        return trial.emit(node, "LayerNormalization", ins, dict(node.attrs), [perm] * len(node.outputs))
    params = [v for v in node.inputs[1:] if v is not None]
    if any(v.const is None for v in params) or len(node.outputs) != 1:
        return None
    x = trial.under(node.inputs[0], perm)
    if x is None:
        return None
    axes = tuple(sorted(perm[a] for a in range(axis, rank)))
    params = [trial.constant(v, perm, broadcast=True) for v in params]  # operands of Mul and Add
    if any(v is None for v in params):
        return None
    nodes, normalised = _normalise(trial, node, x, axes)
    if len(params) == 1:
        return trial.emit(node, "Mul", [normalised, params[0]], {}, [perm], extra=nodes)
    scaled = _step(trial, nodes, node, "Mul", [normalised, params[0]], x.type)
    return trial.emit(node, "Add", [scaled, params[1]], {}, [perm], extra=nodes)


def _normalise(trial: _Trial, node: Node, x: Value, axes: tuple[int, ...]) -> tuple[list[Node], Value]:
    """(x - mean) / sqrt(var + epsilon) over `axes`, as the nodes that compute it."""
    nodes: list[Node] = []
    stats = TensorType(x.dtype, tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
    eps = Value(trial.sinker.fresh(f"{node.name}/epsilon"), const=np.array(node.attrs["epsilon"], x.dtype))
    reduce = {"axes": axes, "keepdims": 1}
    mean = _step(trial, nodes, node, "ReduceMean", [x], stats, reduce)
    centred = _step(trial, nodes, node, "Sub", [x, mean], x.type)
    square = _step(trial, nodes, node, "Mul", [centred, centred], x.type)
    var = _step(trial, nodes, node, "ReduceMean", [square], stats, reduce)
    std = _step(trial, nodes, node, "Sqrt", [_step(trial, nodes, node, "Add", [var, eps], stats)], stats)
    inv_std = _step(trial, nodes, node, "Reciprocal", [std], stats)
    return nodes, _step(trial, nodes, node, "Mul", [centred, inv_std], x.type)


def _step(trial: _Trial, nodes: list[Node], node: Node, op: str, inputs: list[Value], type: TensorType,
          attrs: dict | None = None) -> Value:
    out = Value(trial.sinker.fresh(f"{node.name}/{op}"), type)
    nodes.append(Node(op, trial.sinker.fresh(f"{node.name}/{op}"), inputs, [out], attrs or {}))
    out.producer = nodes[-1]
    return out
