"""Inputs and outputs described the way onnxruntime describes them (its NodeArg), so code
written against `InferenceSession.get_inputs()` / `get_outputs()` works on a hobbit model.

`shape` is a list: an int for a static dim, the dim_param string for a named symbolic dim,
None for an unnamed one, and [] where the shape is unknown or the value is not a tensor
(what onnxruntime returns for a sequence). `type` is onnxruntime's string: 'tensor(float)',
'tensor(int64)', 'seq(tensor(float))', built from the ONNX element type names."""

from __future__ import annotations

import numpy as np
import onnx

from hobbit.frontend.onnx.declared import DeclaredInput
from hobbit.frontend.onnx.types import ONNX_DTYPES
from hobbit.graph.ir import BoundedOutput
from hobbit.runtime.layout import Layout, width

# numpy dtype -> ONNX element type, the inverse of the frontend's table (one place for the fact).
_ELEM_TYPES = {np.dtype(dtype): elem for elem, dtype in ONNX_DTYPES.items()}

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


def tensor_type(dtype: np.dtype) -> str:
    """'tensor(float)' for float32: onnxruntime's spelling is the lower-cased ONNX enum name."""
    return f"tensor({_elem_name(_ELEM_TYPES[np.dtype(dtype)])})"


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


def declared_args(proto: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None
                  ) -> tuple[list[NodeArg], list[NodeArg]]:
    """NodeArgs of the model's graph inputs (initializers excluded, as onnxruntime lists them)
    and outputs, as declared; `input_shapes` fixes inputs' dims. An output declared without a
    shape gets the one ONNX shape inference finds, as onnxruntime shows its inferred shapes."""
    initializers = {t.name for t in proto.graph.initializer}
    fixed = input_shapes or {}
    inputs = []
    for vi in proto.graph.input:
        if vi.name in initializers:
            continue
        arg = _declared(vi)
        if fixed.get(vi.name) is not None:
            arg = NodeArg(arg.name, [int(d) for d in fixed[vi.name]], arg.type)
        inputs.append(arg)
    outputs = list(proto.graph.output)
    if any(not _has_shape(vi.type) for vi in outputs):
        outputs = _inferred_outputs(proto, outputs)
    return inputs, [_declared(vi) for vi in outputs]


def node_args_of(inputs: list[DeclaredInput], outputs: list[tuple[str, tuple[int | None, ...], np.dtype | None]]
                 ) -> tuple[list[NodeArg], list[NodeArg]]:
    """NodeArgs of a model known only by its declarations (a TensorFlow model): a symbolic dim
    is None, as onnxruntime shows an unnamed one."""
    args_in = [NodeArg(d.name, list(d.shape), tensor_type(d.dtype)) for d in inputs]
    args_out = [NodeArg(name, list(dims), tensor_type(dtype) if dtype is not None else "tensor(undefined)")
                for name, dims, dtype in outputs]
    return args_in, args_out


def _declared(vi: onnx.ValueInfoProto) -> NodeArg:
    shape: list[Dim] = []
    if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
        shape = [_dim(d) for d in vi.type.tensor_type.shape.dim]
    return NodeArg(vi.name, shape, _type_string(vi.type))


def _dim(d: onnx.TensorShapeProto.Dimension) -> Dim:
    if d.HasField("dim_value"):
        return int(d.dim_value)
    return d.dim_param or None


def _type_string(t: onnx.TypeProto) -> str:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return f"tensor({_elem_name(t.tensor_type.elem_type)})"
    if kind == "sequence_type":
        return f"seq({_type_string(t.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_type_string(t.optional_type.elem_type)})"
    if kind == "map_type":
        return f"map({_elem_name(t.map_type.key_type)},{_type_string(t.map_type.value_type)})"
    return "undefined"


def _elem_name(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type).lower()


def _has_shape(t: onnx.TypeProto) -> bool:
    """Whether the declaration is complete: a type, and for a tensor its element type and shape."""
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return kind is not None
    return t.tensor_type.elem_type != 0 and t.tensor_type.HasField("shape")


# ONNX shape inference names the dims it cannot resolve "unk__<n>"; onnxruntime shows them as None.
_INVENTED_DIM = "unk__"


def _inferred_outputs(proto: onnx.ModelProto, outputs: list[onnx.ValueInfoProto]) -> list[onnx.ValueInfoProto]:
    """The outputs with ONNX shape inference's types where the model declares none (as declared
    where inference fails: onnxruntime then shows what the model says)."""
    try:
        inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(proto).graph.output}
    except (onnx.shape_inference.InferenceError, ValueError):
        return outputs
    merged = []
    for vi in outputs:
        if _has_shape(vi.type) or vi.name not in inferred:
            merged.append(vi)
            continue
        found = onnx.ValueInfoProto()
        found.CopyFrom(inferred[vi.name])
        if found.type.HasField("tensor_type"):
            for d in found.type.tensor_type.shape.dim:
                if d.dim_param.startswith(_INVENTED_DIM):
                    d.ClearField("dim_param")
        merged.append(found)
    return merged
