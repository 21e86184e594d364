"""The graph IR: SSA values with static tensor types, nodes with attributes,
constants as numpy arrays. Frontends build it, passes rewrite it, lowering reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Dim = int | str


@dataclass(frozen=True)
class Bounded:
    """A data-dependent dim (NonZero's count, NonMaxSuppression's selections, ...).

    The value is stored in its static shape, which is the dim's upper bound, so every
    stride stays a compile-time constant; only indices [0, extent) along `axis` hold
    data, and `extent` is the int64 scalar value that holds that length at run time.
    What lies past the extent is unspecified: a kernel that reads along `axis` takes
    `extent` as an input, one that only maps elements (Add, Cast) may compute it too."""

    axis: int
    extent: "Value"


@dataclass(frozen=True)
class BoundedOutput:
    """A model output with a data-dependent dim, as an `output_layout` entry's kind: two
    flat outputs, the data in its bound shape and its int64 extent along `axis`; run()
    returns the data cut to the extent."""

    axis: int


@dataclass(frozen=True)
class TensorType:
    dtype: np.dtype
    shape: tuple[Dim, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        return f"{np.dtype(self.dtype).name}[{dims}]"


class Value:
    """One SSA tensor. `const` holds the data of a constant (weights, folded values)."""

    def __init__(self, name: str, type: TensorType | None = None, const: np.ndarray | None = None):
        self.name = name
        self.const = const
        if const is not None:
            type = TensorType(const.dtype, tuple(int(d) for d in const.shape))
        self.type = type
        self.producer: Node | None = None
        # Set when this value is written straight into a slice of another value's memory
        # (the inputs of an in-place Concat): (that value, byte offset).
        self.slice_of: tuple[Value, int] | None = None
        # Set when a dim of this value depends on the data (see Bounded).
        self.bounded: Bounded | None = None
        # Set on a model compiled for run-time dims: per dim, None or the Extent
        # (hobbit.graph.extents) that holds its length at run time; the shape is the bound.
        self.extents: tuple | None = None

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    def __repr__(self) -> str:
        kind = "const " if self.const is not None else ""
        text = f"%{self.name}: {kind}{self.type}"
        if self.bounded is not None:
            text += f" (dim {self.bounded.axis} <= bound, length %{self.bounded.extent.name})"
        return text


@dataclass
class EpilogueStep:
    """One element-wise op applied to a kernel's output before it is stored.

    `operand` is the op's second input (None for unary ops); `swap` means the
    running value is the op's second argument (e.g. Sub(c, x)). `origin` is the
    name of the graph node the step came from, kept for readable IR and inspect."""

    op: str
    operand: Value | None
    attrs: dict[str, Any]
    origin: str
    swap: bool = False


@dataclass
class Node:
    op: str
    name: str
    inputs: list[Value | None]
    outputs: list[Value]
    attrs: dict[str, Any] = field(default_factory=dict)
    epilogue: list[EpilogueStep] = field(default_factory=list)

    @property
    def fused_names(self) -> list[str]:
        """The graph node names this node implements: its own, those of steps a fused kernel
        carries in its attributes (ExpandDepthwise's activations), and its epilogue's."""
        inner = [step.origin for value in self.attrs.values() if isinstance(value, tuple)
                 for step in value if isinstance(step, EpilogueStep)]
        return [self.name] + inner + [s.origin for s in self.epilogue]

    def operands(self) -> list[Value]:
        """Every value the generated kernel reads: inputs, then epilogue operands."""
        vals = [v for v in self.inputs if v is not None]
        return vals + [s.operand for s in self.epilogue if s.operand is not None]

    def __repr__(self) -> str:
        ins = ", ".join("_" if v is None else f"%{v.name}" for v in self.inputs)
        outs = ", ".join(f"%{v.name}" for v in self.outputs)
        text = f"{outs} = {self.op}[{self.name}]({ins})"
        for step in self.epilogue:
            operand = f"%{step.operand.name}" if step.operand is not None else ""
            text += f" -> {step.op}[{step.origin}]({operand})"
        return text


class Graph:
    def __init__(self, name: str, inputs: list[Value], outputs: list[Value], nodes: list[Node]):
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.nodes = nodes
        self.output_names = [v.name for v in outputs]
        # Per model output: (name, None) for a tensor, (name, n) for a sequence of the next n
        # outputs, (name, BoundedOutput) for data cut to the extent the next output holds.
        self.output_layout: list[tuple[str, int | BoundedOutput | None]] = [(v.name, None) for v in outputs]
        self.relink()

    def relink(self) -> None:
        """Recompute producer links after nodes were added or removed."""
        for node in self.nodes:
            for out in node.outputs:
                out.producer = node

    def constants(self) -> list[Value]:
        seen: dict[int, Value] = {}
        for node in self.nodes:
            for v in node.operands():
                if v.const is not None:
                    seen.setdefault(id(v), v)
        for v in self.outputs:
            if v.const is not None:
                seen.setdefault(id(v), v)
        return list(seen.values())

    def __str__(self) -> str:
        lines = [f"graph {self.name}("]
        lines += [f"    {v!r}" for v in self.inputs]
        lines.append(") {")
        for node in self.nodes:
            lines.append(f"  {node!r}")
        lines.append("  return " + ", ".join(f"%{v.name}" for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)
