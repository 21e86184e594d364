"""What a converter sees while a model is imported, whatever its format: constant lookup,
and `emit`, which adds a graph op, type-checks it through the op registry and folds it on the
spot when its inputs are all constant, so the shape arithmetic exporters write never reaches
the runtime graph. The ONNX and TensorFlow importers convert node by node through one of
these, and both end in raise_problems, which reports every unsupported node at once."""

from __future__ import annotations

from typing import Any

import numpy as np

from hobbit.errors import InputValuesNeeded, NeedsInputValues, Unsupported, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.common import bounded
from hobbit.frontend.common.sizes import check_fold_size
from hobbit.graph.ir import Node, Value
from hobbit.ops.registry import get_op


class ConvertContext:
    """What a converter sees: constant lookup, and `emit` for graph ops (each format's
    importer adds how its nodes' attributes are read)."""

    def __init__(self, opset: int):
        self.opset = opset
        self.graph_inputs: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.node_name = ""
        self._counter = 0
        # What is known of run-time shape arithmetic on data-dependent dims, by id of the value.
        self.known: dict[int, tuple[Value, bounded.Known]] = {}
        # The extents of bounded Concats, by their parts' extents (hobbit.frontend.onnx.ops.bounded).
        self.extent_sums: dict[tuple, Value] = {}

    # -- constants ------------------------------------------------------------------
    def const_value(self, value: Value | None, what: str, specialize: bool = True) -> np.ndarray:
        """The data of an input that must be known at compile time.

        When it is computed from graph inputs, the error says which: hobbit.compile then
        specialises the model on those inputs' values at run time (runtime/specialize.py).
        `specialize=False` is for data whose values change every call (NonZero's input):
        compiling per value would be absurd, so it stays unsupported."""
        if value is not None and value.const is not None:
            return value.const
        sources = self._graph_input_sources(value) if value is not None and specialize else set()
        if sources:
            raise NeedsInputValues(f"{what} depends on graph input(s) {sorted(sources)} "
                                   "and must be known at compile time", sources)
        raise Unsupported(f"{what} must be a constant (or computable at compile time)")

    def _graph_input_sources(self, value: Value) -> set[str]:
        producers = {id(out): node for node in self.nodes for out in node.outputs}
        found, seen, stack = set(), set(), [value]
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if self.graph_inputs.get(v.name) is v:
                found.add(v.name)
            node = producers.get(id(v))
            if node is not None:
                stack.extend(i for i in node.inputs if i is not None)
        return found

    def const(self, array: np.ndarray | float | int, dtype: np.dtype | None = None) -> Value:
        data = np.asarray(array, dtype=dtype)
        self._counter += 1
        return Value(f"{self.node_name}/const{self._counter}", const=data)

    # -- emitting graph ops -----------------------------------------------------------
    def emit(self, op: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None,
             n_outputs: int = 1, name: str | None = None, marks_own: bool = False) -> list[Value]:
        """Add graph op `op`; infer its output types; fold it if every input is constant.
        `marks_own`: the caller has prepared its bounded inputs (a TopK over padding set to
        -inf) and marks the outputs itself (hobbit.frontend.common.bounded)."""
        attrs = dict(attrs or {})
        inputs = bounded.padded_for_reduction(self, op, inputs, attrs)
        self._counter += 1
        name = name or (self.node_name if self._counter == 1 else f"{self.node_name}#{op}{self._counter}")
        outputs = [Value(f"{name}:{i}") for i in range(n_outputs)]
        node = Node(op, name, list(inputs), outputs, attrs)
        opdef = get_op(op)
        merged = {**opdef.attrs, **attrs}
        node.attrs = merged
        present = [v for v in inputs if v is not None]
        constant = (present and all(v.const is not None and v.bounded is None for v in present)
                    and opdef.fold_at_import)
        if constant or (not present and opdef.kernel is None):
            check_fold_size(node, opdef.infer)
            results = opdef.reference([None if v is None else v.const for v in inputs], merged)
            return [Value(o.name, const=np.asarray(r)) for o, r in zip(outputs, results)]
        for out, ty in zip(outputs, opdef.infer(node)):
            out.type = ty
        self.nodes.append(node)
        bounded.propagate(self, node, marks_own)
        return [bounded.folded(self, out) for out in outputs]

    def emit1(self, op: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None) -> Value:
        return self.emit(op, inputs, attrs)[0]


def raise_problems(problems: list[UnsupportedItem], hard_problems: int, needed_inputs: set[str]) -> None:
    """An importer's collected problems as one error: InputValuesNeeded when every one is a
    value that must be known at compile time (compile() then specialises on those inputs),
    else UnsupportedModelError listing them all."""
    if not problems:
        return
    if hard_problems == 0:
        raise InputValuesNeeded(problems, sorted(needed_inputs))
    raise UnsupportedModelError(problems)
