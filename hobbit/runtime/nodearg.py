"""Inputs and outputs described the way onnxruntime describes them (its NodeArg), so code
written against `InferenceSession.get_inputs()` / `get_outputs()` works on a hobbit model.

`shape` is a list: an int for a static dim, the dim_param string for a named symbolic dim,
None for an unnamed one, and [] where the shape is unknown or the value is not a tensor
(what onnxruntime returns for a sequence). `type` is onnxruntime's string: 'tensor(float)',
'tensor(int64)', 'seq(tensor(float))', built from the ONNX element type names. A model
compiled per input signature is described by its Source (Source.described), from what the
model declares; a compiled one by its tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hobbit.frontend.common.dtypes import tensor_type
from hobbit.graph.ir import BoundedOutput
from hobbit.runtime.layout import Layout, width

if TYPE_CHECKING:  # source.py imports onnx, which an unpickled compiled model never needs
    from hobbit.frontend.common.source import Described

Dim = int | str | None


class NodeArg:
    """One model input or output: `.name`, `.shape` (a list, fresh on each read, so a caller
    who edits it changes nothing the model keeps) and `.type` (a string)."""

    __slots__ = ("name", "_shape", "type")

    def __init__(self, name: str, shape: list[Dim], type: str):
        self.name = name
        self._shape = tuple(shape)
        self.type = type

    @property
    def shape(self) -> list[Dim]:
        return list(self._shape)

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeArg):
            return NotImplemented
        return (self.name, self._shape, self.type) == (other.name, other._shape, other.type)

    __hash__ = None


def compiled_args(specs: list, layout: Layout | None) -> list[NodeArg]:
    """NodeArgs of a compiled model's flat tensor specs; with a `layout`, each sequence output
    is one seq(...) NodeArg over its `count` flat tensors (the type of an empty one is unknown),
    and a bounded output's data-dependent dim is None, as onnxruntime shows an unknown dim."""
    if layout is None:
        return [NodeArg(s.name, list(s.shape), tensor_type(s.dtype)) for s in specs]
    args, position = [], 0
    for name, kind in layout:
        if kind is None:
            spec = specs[position]
            args.append(NodeArg(name, list(spec.shape), tensor_type(spec.dtype)))
        elif isinstance(kind, BoundedOutput):
            spec = specs[position]
            shape = [None if d == kind.axis else n for d, n in enumerate(spec.shape)]
            args.append(NodeArg(name, shape, tensor_type(spec.dtype)))
        else:
            item = tensor_type(specs[position].dtype) if kind else "tensor(undefined)"
            args.append(NodeArg(name, [], f"seq({item})"))
        position += width(kind)
    return args


def node_args(described: tuple[list[Described], list[Described]]) -> tuple[list[NodeArg], list[NodeArg]]:
    """NodeArgs of a model's inputs and outputs as its Source describes them (Source.described)."""
    inputs, outputs = described
    return [NodeArg(*d) for d in inputs], [NodeArg(*d) for d in outputs]
