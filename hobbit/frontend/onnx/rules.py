"""What the ONNX spec demands of a node's attribute values, in one table checked before
the node's converter runs.

onnx's schema says which attributes an operator has, their types and which are required
(hobbit.frontend.onnx.validate checks those); it cannot say that strides are positive, that an
axis lies within the input's rank or that Unsqueeze's axes are distinct. Those facts are
here, one row per operator. A rule names a parameter as the spec does; it is found as the
node's attribute of that name, or as the constant input the schema gives that name (the
attributes later opsets turned into inputs: Unsqueeze's axes, Split's split, Resize's
scales), so one rule serves every opset. Operators that slide a window (those whose schema
has `kernel_shape`: Conv, the pools, ...) share the window rules, derived from the schema.

A node that breaks a rule is refused with an InvalidAttributeError naming the node, its
operator, the parameter and what the spec allows; onnxruntime refuses such nodes too,
where hobbit used to answer with numbers or fail deep inside a converter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import defs

from hobbit.errors import InvalidAttributeError
from hobbit.graph.ir import Value


class NodeView:
    """What a rule reads of one node: its attributes, constant inputs and input shapes."""

    def __init__(self, node: onnx.NodeProto, opset: int, schema: defs.OpSchema, attrs: dict[str, Any],
                 ins: list[Any]):
        self.node, self.opset, self.schema, self.attrs, self.ins = node, opset, schema, attrs, ins

    def param(self, name: str) -> tuple[str, np.ndarray] | None:
        """(how the message calls it, its values) of the attribute or constant input `name`;
        None when the node has neither (the spec's default applies, or it is computed)."""
        if name in self.attrs:
            return f"attribute '{name}'", np.asarray(self.attrs[name])
        for i, formal in enumerate(self.schema.inputs):
            if formal.name == name and i < len(self.ins):
                value = self.ins[i]
                if isinstance(value, Value) and value.const is not None:
                    return f"input {i} ('{name}')", np.asarray(value.const)
        return None

    def given(self, name: str) -> bool:
        """Whether the node sets `name` at all: as an attribute, or as an input (constant or not)."""
        if name in self.attrs:
            return True
        return any(formal.name == name and i < len(self.node.input) and self.node.input[i]
                   for i, formal in enumerate(self.schema.inputs))

    def shape(self, index: int) -> tuple | None:
        """Input `index`'s shape, None when it is absent or not a tensor."""
        value = self.ins[index] if index < len(self.ins) else None
        return tuple(value.shape) if isinstance(value, Value) and value.type is not None else None

    def rank(self, index: int = 0) -> int | None:
        shape = self.shape(index)
        return None if shape is None else len(shape)


def _shown(values: np.ndarray) -> str:
    return str(values.tolist())


@dataclass(frozen=True)
class AtLeast:
    """Every entry of the parameter is >= `low` (NaN is not)."""
    name: str
    low: int

    def broken(self, view: NodeView) -> str | None:
        found = view.param(self.name)
        if found is None:
            return None
        where, values = found
        if values.dtype.kind not in "iuf" or np.all(values >= self.low):
            return None
        each = "it" if values.ndim == 0 else "each entry"
        return f"{where} is {_shown(values)}; {each} must be >= {self.low}"


@dataclass(frozen=True)
class Positive:
    """Every entry is finite and > 0 (scale factors)."""
    name: str

    def broken(self, view: NodeView) -> str | None:
        found = view.param(self.name)
        if found is None or found[1].size == 0:
            return None
        where, values = found
        if values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values > 0):
            return None
        return f"{where} is {_shown(values)}; each entry must be finite and > 0"


@dataclass(frozen=True)
class Axes:
    """Every entry is an axis of input 0: in [-r, r-1], or [-r, r] with `past_end` (Flatten);
    with `grows`, r is the output's rank, the input's plus one per axis (Unsqueeze);
    with `unique`, no axis is named twice (counting negatives from the end)."""
    name: str
    past_end: bool = False
    grows: bool = False
    unique: bool = False

    def broken(self, view: NodeView) -> str | None:
        found, rank = view.param(self.name), view.rank(0)
        if found is None or rank is None:
            return None
        where, values = found
        axes = [int(a) for a in values.reshape(-1)]
        if self.grows:
            rank += len(axes)
        hi = rank if self.past_end else rank - 1
        if any(not -rank <= a <= hi for a in axes):
            return f"{where} is {_shown(values)}; for rank {rank} each axis must lie in [{-rank}, {hi}]"
        if self.unique and len({a % rank for a in axes}) < len(axes):
            return f"{where} is {_shown(values)}; it names an axis twice"
        return None


@dataclass(frozen=True)
class SpatialLength:
    """The parameter has `per_axis` entries per spatial axis of input 0 (rank - 2)."""
    name: str
    per_axis: int = 1

    def broken(self, view: NodeView) -> str | None:
        found, rank = view.param(self.name), view.rank(0)
        if found is None or rank is None or rank < 3:
            return None
        where, values = found
        wanted = self.per_axis * (rank - 2)
        if values.size == wanted:
            return None
        return f"{where} is {_shown(values)}; an input of rank {rank} needs {wanted} entries"


@dataclass(frozen=True)
class Holds:
    """A rule of its own: `ok(view)` is False when the node breaks `requirement`. `name` is
    the parameter the message names."""
    name: str
    ok: Callable[[NodeView], bool]
    requirement: str

    def broken(self, view: NodeView) -> str | None:
        if self.ok(view):
            return None
        found = view.param(self.name)
        shown = f"{found[0]} is {_shown(found[1])}" if found is not None else f"'{self.name}'"
        return f"{shown}; {self.requirement}"


Rule = AtLeast | Positive | Axes | SpatialLength | Holds


# -- rules that need more than one parameter -------------------------------------------

def _pads_below_kernel(view: NodeView) -> bool:
    """Pooling: each pad is smaller than the window along its axis (onnxruntime refuses others:
    a window lying wholly in the padding has nothing to pool)."""
    pads, kernel = view.param("pads"), view.param("kernel_shape")
    if pads is None or kernel is None or pads[1].size != 2 * kernel[1].size:
        return True
    k = np.concatenate([kernel[1], kernel[1]])
    return bool(np.all(pads[1] < k))


def _per_channel(view: NodeView) -> bool:
    """BatchNormalization: scale, bias, mean and variance have one entry per channel (dim 1)."""
    x = view.shape(0)
    if x is None or len(x) < 2:
        return True
    return all(view.shape(i) in (None, (x[1],)) for i in range(1, min(5, len(view.ins))))


def _scan_inputs(view: NodeView) -> bool:
    """Scan: at least one scan input, and no more than the node has (after the states;
    opset 8 also puts sequence_lens first)."""
    count = view.attrs.get("num_scan_inputs")
    if count is None:
        return True
    available = len(view.node.input) - (1 if view.opset < 9 else 0)
    return 1 <= int(count) <= available


def _permutation(view: NodeView) -> bool:
    perm, rank = view.param("perm"), view.rank(0)
    if perm is None or rank is None:
        return True
    return sorted(int(p) for p in perm[1].reshape(-1)) == list(range(rank))


def _zeros_copy_dims(view: NodeView) -> bool:
    """Reshape without allowzero: a 0 copies the input's dim at its position, which must exist."""
    shape, rank = view.param("shape"), view.rank(0)
    if shape is None or rank is None or view.attrs.get("allowzero", 0):
        return True
    return all(d != 0 or i < rank for i, d in enumerate(shape[1].reshape(-1).tolist()))


def _one_output_each(view: NodeView) -> bool:
    """Split with num_outputs: the node has that many outputs."""
    count = view.attrs.get("num_outputs")
    return count is None or int(count) == len(view.node.output)


def _no_zero_step(view: NodeView) -> bool:
    steps = view.param("steps")
    return steps is None or bool(np.all(steps[1] != 0))


def _reflection_fits(view: NodeView) -> bool:
    """Pad in reflect mode: each pad is smaller than its axis (a reflection repeats no edge)."""
    pads, shape = view.param("pads"), view.shape(0)
    if view.attrs.get("mode") != "reflect" or pads is None or shape is None or view.given("axes") \
            or pads[1].size != 2 * len(shape):
        return True
    return all(p < d for p, d in zip(pads[1].tolist(), shape * 2))


def _pad_count(view: NodeView) -> bool:
    """Pad without `axes`: two pads (begin, end) per axis of the input."""
    pads, rank = view.param("pads"), view.rank(0)
    if pads is None or rank is None or view.given("axes"):
        return True
    return pads[1].size == 2 * rank


_WINDOW: tuple[Rule, ...] = (
    AtLeast("kernel_shape", 1), AtLeast("strides", 1), AtLeast("dilations", 1), AtLeast("pads", 0),
    SpatialLength("kernel_shape"), SpatialLength("strides"), SpatialLength("dilations"),
    SpatialLength("pads", 2))
_POOL: tuple[Rule, ...] = (Holds("pads", _pads_below_kernel, "each pad must be smaller than the kernel"),)
_REDUCE: tuple[Rule, ...] = (Axes("axes"),)
_RNN: tuple[Rule, ...] = (AtLeast("hidden_size", 1),)
_AXIS: tuple[Rule, ...] = (Axes("axis"),)

RULES: dict[str, tuple[Rule, ...]] = {
    "Conv": (AtLeast("group", 1),),
    "ConvTranspose": (AtLeast("group", 1),),
    "MaxPool": _POOL, "AveragePool": _POOL, "LpPool": _POOL,
    "BatchNormalization": (Holds("scale", _per_channel,
                                 "scale, B, input_mean and input_var must have one entry per channel "
                                 "(dim 1 of the input)"),),
    "Flatten": (Axes("axis", past_end=True),),
    "Concat": _AXIS, "Gather": _AXIS, "GatherElements": _AXIS, "Compress": _AXIS,
    "Softmax": _AXIS, "LogSoftmax": _AXIS, "Hardmax": _AXIS, "ArgMax": _AXIS, "ArgMin": _AXIS,
    "TopK": _AXIS, "LayerNormalization": _AXIS, "CumSum": _AXIS,
    "Split": (Axes("axis"), AtLeast("num_outputs", 1), AtLeast("split", 0),
              Holds("num_outputs", _one_output_each, "the node must have that many outputs")),
    "Squeeze": (Axes("axes"),),
    "Unsqueeze": (Axes("axes", grows=True, unique=True),),
    "Transpose": (Holds("perm", _permutation, "it must be a permutation of the input's axes"),),
    "Slice": (Axes("axes", unique=True), Holds("steps", _no_zero_step, "no step may be 0")),
    "Pad": (Axes("axes", unique=True), Holds("pads", _pad_count, "it needs two entries per axis of the input"),
            Holds("pads", _reflection_fits, "in reflect mode each pad must be smaller than its axis")),
    "Reshape": (AtLeast("shape", -1),
                Holds("shape", _zeros_copy_dims, "a 0 copies the input's dim at its position, and the input "
                                                 "has no dim there (set allowzero=1 for an empty dim)")),
    "Tile": (AtLeast("repeats", 0),),
    "Resize": (Positive("scales"), AtLeast("sizes", 0)),
    "Upsample": (Positive("scales"),),
    "DepthToSpace": (AtLeast("blocksize", 1),), "SpaceToDepth": (AtLeast("blocksize", 1),),
    "LRN": (AtLeast("size", 1),),
    "RNN": _RNN, "GRU": _RNN, "LSTM": _RNN,
    "Scan": (Holds("num_scan_inputs", _scan_inputs,
                   "it must be at least 1 and at most the number of inputs after the loop states"),),
    **{op: _REDUCE for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}


def rules_for(schema: defs.OpSchema) -> tuple[Rule, ...]:
    """The operator's rules: the window rules when its schema has `kernel_shape`, then its row."""
    window = _WINDOW if "kernel_shape" in schema.attributes else ()
    return window + RULES.get(schema.name, ())


def check_node(node: onnx.NodeProto, name: str, opset: int, schema: defs.OpSchema | None,
               attrs: dict[str, Any], ins: list[Any]) -> None:
    """Refuse a node of the standard domain whose attribute values break its operator's spec."""
    if schema is None or schema.domain != "":
        return
    view = NodeView(node, opset, schema, attrs, ins)
    for rule in rules_for(schema):
        problem = rule.broken(view)
        if problem is not None:
            raise InvalidAttributeError(f"node '{name}' ({node.op_type}, opset {opset}): {problem}")
