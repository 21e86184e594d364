"""The TFGraph under construction while TFLite operators are translated: which node
produces each TFLite tensor, Const nodes for tensors with data, unique node names.

One TFLite operator often becomes several TensorFlow nodes (a convolution, its bias, its
fused activation); the last one takes the name of the operator's output tensor, so errors
about it name what the TFLite model calls it, and the others are named after it."""

from __future__ import annotations

from typing import Any

import numpy as np
from flatbuffers import number_types as N

from hobbit.errors import GraphStructureError, ShapeError
from hobbit.frontend.tf.graph import TensorRef, TFNode
from hobbit.frontend.tflite.model import Operator, TFLiteModel, Tensor


class Emitter:
    def __init__(self, model: TFLiteModel):
        self.model = model
        self.nodes: dict[str, TFNode] = {}
        self._produced: dict[int, TensorRef] = {}

    def unique(self, hint: str) -> str:
        name, n = hint, 0
        while name in self.nodes:
            n += 1
            name = f"{hint}_{n}"
        return name

    def add(self, name: str, op: str, inputs: list[TensorRef], attrs: dict[str, Any]) -> TFNode:
        node = TFNode(self.unique(name), op, list(inputs), dict(attrs))
        self.nodes[node.name] = node
        return node

    def const(self, name: str, value: np.ndarray) -> TensorRef:
        node = self.add(name, "Const", [], {"dtype": value.dtype, "value": value})
        return TensorRef(node.name)

    def bind(self, tensor: int, ref: TensorRef) -> None:
        self._produced[tensor] = ref

    def producer(self, tensor: int) -> TFNode | None:
        ref = self._produced.get(tensor)
        return None if ref is None else self.nodes[ref.node]

    def rename(self, ref: TensorRef, name: str) -> TensorRef:
        """Give the node behind `ref` a new name; only for nodes nothing reads yet."""
        node = self.nodes.pop(ref.node)
        node.name = self.unique(name)
        self.nodes[node.name] = node
        return TensorRef(node.name, ref.index)

    def ref(self, tensor: Tensor, reader: str) -> TensorRef:
        """The node output that holds `tensor`: its producer, or a Const made on first use."""
        if tensor.index in self._produced:
            return self._produced[tensor.index]
        if tensor.data is not None:
            ref = self.const(tensor.name, tensor.data)
            self._produced[tensor.index] = ref
            return ref
        raise GraphStructureError(
            f"{self.model.source}: {reader} reads tensor {tensor.index} '{tensor.name}', which is "
            "not a model input, not a constant and not written by an earlier operator"
        )


class OpContext:
    """What a translation of one operator needs: its input tensors and their nodes, its
    options, and node-making helpers that name nodes after the operator's output."""

    def __init__(self, emitter: Emitter, op: Operator):
        self.emitter = emitter
        self.op = op
        tensors = emitter.model.tensors
        self.base = tensors[op.outputs[0]].name if op.outputs else f"operator_{op.index}"
        self.label = f"operator {op.index} ({op.builtin})"
        self._made: set[str] = set()

    def has_input(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] is not None

    def tensor(self, i: int) -> Tensor:
        if not self.has_input(i):
            raise GraphStructureError(
                f"{self.emitter.model.source}: {self.label} writing '{self.base}' "
                f"has no input {i}, which it needs"
            )
        return self.emitter.model.tensors[self.op.inputs[i]]

    def static_shape(self, i: int, rank: int) -> tuple[int, ...]:
        """Input i's shape, which the translation needs to be known and of this rank."""
        tensor = self.tensor(i)
        if tensor.shape is None or len(tensor.shape) != rank or any(d <= 0 for d in tensor.shape):
            raise ShapeError(
                f"{self.emitter.model.source}: {self.label} writing '{self.base}' needs input {i} "
                f"('{tensor.name}') to have a known rank-{rank} shape, not {tensor.shape}"
            )
        return tensor.shape

    def output(self, i: int) -> Tensor:
        if i >= len(self.op.outputs):
            raise GraphStructureError(
                f"{self.emitter.model.source}: {self.label} has no output {i}, which it needs"
            )
        return self.emitter.model.tensors[self.op.outputs[i]]

    def input(self, i: int) -> TensorRef:
        return self.emitter.ref(self.tensor(i), self.label)

    def inputs(self) -> list[TensorRef]:
        return [self.input(i) for i in range(len(self.op.inputs))]

    def constant(self, i: int) -> np.ndarray | None:
        """Input i's value when it is a constant (its own data, or a Const an earlier
        operator made for it, e.g. a dequantized float16 weight), else None."""
        tensor = self.tensor(i)
        if tensor.data is not None:
            return tensor.data
        node = self.emitter.producer(tensor.index)
        return node.attrs["value"] if node is not None and node.op == "Const" else None

    def dtype(self, i: int = 0):
        return self.tensor(i).dtype

    def option(self, field: int, flags, default):
        if self.op.options is None:
            return default
        return self.op.options.scalar(field, flags, default)

    def int_option(self, field: int, default: int = 0) -> int:
        return self.option(field, N.Int32Flags, default)

    def bool_option(self, field: int) -> bool:
        return bool(self.option(field, N.BoolFlags, False))

    def float_option(self, field: int, default: float = 0.0) -> float:
        return self.option(field, N.Float32Flags, default)

    def enum_option(self, field: int) -> int:
        return self.option(field, N.Int8Flags, 0)

    def ints_option(self, field: int) -> list[int] | None:
        if self.op.options is None or not self.op.options.has(field):
            return None
        return self.op.options.ints(field, f"{self.label}'s options")

    def node(self, op: str, inputs: list[TensorRef], **attrs: Any) -> TensorRef:
        made = self.emitter.add(f"{self.base}/{op}", op, inputs, attrs)
        self._made.add(made.name)
        return TensorRef(made.name)

    def const(self, value, dtype=np.int32, suffix: str = "const") -> TensorRef:
        ref = self.emitter.const(f"{self.base}/{suffix}", np.asarray(value, dtype=dtype))
        self._made.add(ref.node)
        return ref

    def finish(self, refs: list[TensorRef]) -> None:
        """Bind the operator's outputs; a single output made here takes the tensor's name."""
        if len(refs) == 1 and refs[0].index == 0 and refs[0].node in self._made:
            refs = [self.emitter.rename(refs[0], self.base)]
        for tensor, ref in zip(self.op.outputs, refs):
            self.emitter.bind(tensor, ref)
