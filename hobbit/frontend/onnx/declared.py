"""What a model declares about its inputs and outputs, before any import: the names,
dtypes and dims (None where symbolic) that hobbit.compile needs to decide whether the
model compiles as is or per input signature (hobbit/runtime/specialize.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from hobbit.errors import ModelFormatError
from hobbit.frontend.onnx.importer import input_type
from hobbit.frontend.onnx.types import ONNX_DTYPES, onnx_dtype


@dataclass(frozen=True)
class DeclaredInput:
    """A graph input as the model declares it: None for a symbolic dim, its name in `symbols`."""

    name: str
    shape: tuple[int | None, ...]
    symbols: tuple[str | None, ...]
    dtype: np.dtype
    sequence: bool = False  # a sequence of tensors of `dtype`; `shape` is then ()


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
