"""What an ONNX model declares about its inputs and outputs, before any import: the names,
dtypes and dims (None where symbolic) that hobbit.compile needs to decide whether the
model compiles as is or per input signature (hobbit/runtime/specialize.py), and the same
declarations as onnxruntime describes them (its NodeArgs: named dims, sequence and
optional types, output shapes from ONNX shape inference)."""

from __future__ import annotations

import numpy as np
import onnx

from hobbit.errors import ModelFormatError
from hobbit.frontend.common.source import DeclaredInput, Described
from hobbit.frontend.onnx.importer import input_type
from hobbit.frontend.onnx.types import ONNX_DTYPES, elem_name, onnx_dtype


def declared_inputs(proto: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None
                    ) -> list[DeclaredInput]:
    """The graph inputs (initializers excluded) with their declared dims; `input_shapes` fixes dims."""
    initializers = {t.name for t in proto.graph.initializer}
    declared = []
    for vi in proto.graph.input:
        if vi.name in initializers:
            continue
        if vi.type.HasField("sequence_type") and vi.type.sequence_type.elem_type.HasField("tensor_type"):
            dtype = onnx_dtype(vi.type.sequence_type.elem_type.tensor_type.elem_type, vi.name)
            declared.append(DeclaredInput(vi.name, (), (), dtype, sequence=True))
            continue
        if (input_shapes or {}).get(vi.name) is not None or not vi.type.HasField("tensor_type"):
            ty = input_type(vi, (input_shapes or {}).get(vi.name))
            declared.append(DeclaredInput(vi.name, ty.shape, (None,) * len(ty.shape), ty.dtype))
            continue
        tt = vi.type.tensor_type
        dtype = onnx_dtype(tt.elem_type, vi.name)
        if not tt.HasField("shape"):
            raise ModelFormatError(f"input '{vi.name}' has no shape; pass input_shapes={{'{vi.name}': (...)}}")
        shape, symbols = [], []
        for axis, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                if d.dim_value < 0:
                    raise ModelFormatError(f"input '{vi.name}' has a negative dimension {d.dim_value}")
                shape.append(int(d.dim_value))
                symbols.append(None)
            else:
                shape.append(None)
                symbols.append(d.dim_param or f"{vi.name}:{axis}")
        declared.append(DeclaredInput(vi.name, tuple(shape), tuple(symbols), dtype))
    return declared


def declared_output_types(proto: onnx.ModelProto) -> list[tuple[str, tuple[int | None, ...], np.dtype | None]]:
    """Graph outputs as declared (None where the model leaves a dim or the type open)."""
    result = []
    for vi in proto.graph.output:
        tt = vi.type.tensor_type
        dtype = np.dtype(ONNX_DTYPES[tt.elem_type]) if tt.elem_type in ONNX_DTYPES else None
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        result.append((vi.name, dims, dtype))
    return result


def declared_args(proto: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None
                  ) -> tuple[list[Described], list[Described]]:
    """The model's graph inputs (initializers excluded, as onnxruntime lists them)
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
            arg = (arg[0], [int(d) for d in fixed[vi.name]], arg[2])
        inputs.append(arg)
    outputs = list(proto.graph.output)
    if any(not _has_shape(vi.type) for vi in outputs):
        outputs = _inferred_outputs(proto, outputs)
    return inputs, [_declared(vi) for vi in outputs]


def _declared(vi: onnx.ValueInfoProto) -> Described:
    shape: list[int | str | None] = []
    if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
        shape = [_dim(d) for d in vi.type.tensor_type.shape.dim]
    return vi.name, shape, _type_string(vi.type)


def _dim(d: onnx.TensorShapeProto.Dimension) -> int | str | None:
    if d.HasField("dim_value"):
        return int(d.dim_value)
    return d.dim_param or None


def _type_string(t: onnx.TypeProto) -> str:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return f"tensor({elem_name(t.tensor_type.elem_type)})"
    if kind == "sequence_type":
        return f"seq({_type_string(t.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_type_string(t.optional_type.elem_type)})"
    if kind == "map_type":
        return f"map({elem_name(t.map_type.key_type)},{_type_string(t.map_type.value_type)})"
    return "undefined"


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
