"""One tentative move of sink-transposes (hobbit.passes.transpose): a Transpose moved into a
region of reader nodes, each rebuilt on the untransposed tensor (attributes and constant
operands rewritten for the other layout, or None where the op does not commute with the
perm), and what the move does to the number of Transposes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hobbit.errors import HobbitError
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.reduce import REDUCE_OPS
from hobbit.ops.registry import get_op
from hobbit.passes.perms import Perm, compose, inverse, is_identity, keeps_order, perm_of


_AXIS_OPS = ("Softmax", "LogSoftmax")
_ARG_OPS = ("ArgMax", "ArgMin")
NHWC_TO_NCHW_INVERSE: Perm = (0, 2, 3, 1)  # the perm that turns an NCHW tensor into NHWC
_POINTWISE = {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1}


class Walk(Protocol):
    """What a move reads of the walk that grows it (transpose._Sinker)."""

    may_grow: bool
    readers: dict[int, list[Node]]  # id(value) -> the nodes that read it
    outputs: set[int]  # ids of the graph's outputs

    def fresh(self, base: str) -> str:
        """A name not yet in the graph."""


@dataclass
class Trial:
    """One tentative move of Transpose `t` into the reader nodes `group`: the nodes that
    replace them, and what the move does to the number of Transposes."""

    sinker: Walk
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
                nodes = rewrite(self, node)
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


def rewrite(trial: Trial, node: Node) -> list[Node] | None:
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


def _compose(trial: Trial, node: Node, x: Value, first: Perm) -> list[Node]:
    perm = compose(first, perm_of(node))
    if is_identity(perm):
        trial.aliases.append((node.outputs[0], x))
        trial.removed.append(node)
        return []
    return [Node("Transpose", node.name, [x], node.outputs, {"perm": perm})]


def _reshape(trial: Trial, node: Node, x: Value, perm: Perm) -> list[Node] | None:
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


def _sole_reader(trial: Trial, v: Value) -> Node | None:
    readers = trial.sinker.readers.get(id(v), [])
    return readers[0] if len(readers) == 1 and id(v) not in trial.sinker.outputs else None


def _constant_matrix(w: Value, matmul: Node) -> bool:
    return w.const is not None and w.const.ndim == 2 and matmul.attrs.get("b_layout", "KN") == "KN" \
        and np.dtype(w.dtype) == np.float32


def _tensordot(trial: Trial, node: Node, matmul: Node, x: Value, perm: Perm) -> list[Node] | None:
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


def _filters(trial: Trial, w: Value) -> Value:
    """A [C, K] Dense weight as [K, C, 1, 1] 1x1 Conv filters."""
    filters = np.ascontiguousarray(w.const.T).reshape(w.shape[1], w.shape[0], 1, 1)
    return Value(trial.sinker.fresh(w.name), const=filters)


def _dense(trial: Trial, node: Node) -> list[Node] | None:
    """y[n, h, w, :] @ W for NHWC y = transpose(x, (0, 2, 3, 1)): a 1x1 Conv of x by W^T."""
    y, w = node.inputs
    source = trial.source(y)
    if source is None or source[1] != NHWC_TO_NCHW_INVERSE or not _constant_matrix(w, node):
        return None
    return trial.emit(node, "Conv", [source[0], _filters(trial, w)], dict(_POINTWISE), [source[1]])


def _layernorm(trial: Trial, node: Node, perm: Perm) -> list[Node] | None:
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


def _normalise(trial: Trial, node: Node, x: Value, axes: tuple[int, ...]) -> tuple[list[Node], Value]:
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


def _step(trial: Trial, nodes: list[Node], node: Node, op: str, inputs: list[Value], type: TensorType,
          attrs: dict | None = None) -> Value:
    out = Value(trial.sinker.fresh(f"{node.name}/{op}"), type)
    nodes.append(Node(op, trial.sinker.fresh(f"{node.name}/{op}"), inputs, [out], attrs or {}))
    out.producer = nodes[-1]
    return out
