"""A TFLite flatbuffer's first subgraph as plain Python records: its tensors (with the
constant data of those that have a buffer, as numpy views into the file), its operators
(builtin name, tensor indices, options table) and its inputs and outputs. Every index
the file holds is checked against what it indexes, so the translation can trust them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flatbuffers import number_types as N

from hobbit.errors import CorruptModelError, GraphStructureError
from hobbit.frontend.tf.graph import TFDType
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.flatbuffer import FlatBuffer, Table


@dataclass
class Tensor:
    index: int
    name: str
    dtype: np.dtype | TFDType
    shape: tuple[int, ...] | None
    signature: tuple[int | None, ...] | None
    data: np.ndarray | None
    quantized: bool


@dataclass
class Operator:
    index: int
    builtin: str
    custom_code: str | None
    version: int
    inputs: list[int | None]
    outputs: list[int]
    options: Table | None


@dataclass
class TFLiteModel:
    source: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    subgraph_count: int
    # Tensor index -> its name in the model's signature (what TensorFlow's converter calls
    # a Keras input or a SavedModel signature's key), for subgraph 0's inputs and outputs.
    signature_names: dict[int, str]


def decode_model(data: bytes | memoryview, source: str) -> TFLiteModel:
    fb = FlatBuffer(data, source, "TFLite")
    if fb.size < 8 or fb.identifier() != S.FILE_IDENTIFIER:
        raise CorruptModelError(
            f"{source}: not a TFLite flatbuffer (expected file identifier "
            f"{S.FILE_IDENTIFIER.decode()!r} at bytes 4..8)"
        )
    model = fb.root("the model table")
    subgraphs = model.tables(S.ModelField.SUBGRAPHS, "subgraph")
    if not subgraphs:
        raise CorruptModelError(f"{source}: the TFLite model has no subgraph")
    buffers = model.tables(S.ModelField.BUFFERS, "buffer")
    codes = [_opcode(t) for t in model.tables(S.ModelField.OPERATOR_CODES, "operator code")]
    graph = subgraphs[0]
    tensors = [
        _tensor(fb, t, i, buffers)
        for i, t in enumerate(graph.tables(S.SubGraphField.TENSORS, "subgraph 0, tensor"))
    ]
    operators = [
        _operator(fb, t, i, codes, len(tensors))
        for i, t in enumerate(graph.tables(S.SubGraphField.OPERATORS, "subgraph 0, operator"))
    ]
    inputs = _tensor_indices(fb, graph, S.SubGraphField.INPUTS, "subgraph 0's inputs", len(tensors))
    outputs = _tensor_indices(fb, graph, S.SubGraphField.OUTPUTS, "subgraph 0's outputs", len(tensors))
    names = _signature_names(model, len(tensors))
    return TFLiteModel(source, tensors, operators, inputs, outputs, len(subgraphs), names)


def _signature_names(model: Table, tensor_count: int) -> dict[int, str]:
    """The names of subgraph 0's signature (serving_default if it has several), when every
    name is unique and every index in range; else none, and tensors keep their own names."""
    signatures = [t for t in model.tables(S.ModelField.SIGNATURE_DEFS, "signature def")
                  if t.scalar(S.SignatureDefField.SUBGRAPH_INDEX, N.Uint32Flags, 0) == 0]
    if not signatures:
        return {}
    keys = [t.string(S.SignatureDefField.SIGNATURE_KEY, f"{t.part}'s key") for t in signatures]
    chosen = signatures[keys.index("serving_default")] if "serving_default" in keys else signatures[0]
    names: dict[int, str] = {}
    for field in (S.SignatureDefField.INPUTS, S.SignatureDefField.OUTPUTS):
        for entry in chosen.tables(field, "signature tensor"):
            name = entry.string(S.TensorMapField.NAME, f"{entry.part}'s name")
            index = entry.scalar(S.TensorMapField.TENSOR_INDEX, N.Uint32Flags, 0)  # 0 is not written
            if not name or index >= tensor_count or index in names:
                return {}
            names[index] = name
    return names if len(set(names.values())) == len(names) else {}


def _opcode(table: Table) -> tuple[str, str | None, int]:
    """(builtin name, custom code, version). Old files keep the code only in the
    deprecated byte field; new ones write both and the int field wins when larger."""
    deprecated = table.scalar(S.OperatorCodeField.DEPRECATED_BUILTIN_CODE, N.Int8Flags, 0)
    code = max(deprecated, table.scalar(S.OperatorCodeField.BUILTIN_CODE, N.Int32Flags, 0))
    if 0 <= code < len(S.BUILTIN_OPERATORS):
        name = S.BUILTIN_OPERATORS[code]
    else:
        name = f"BUILTIN_{code}"
    custom = table.string(S.OperatorCodeField.CUSTOM_CODE, f"{table.part}'s custom code")
    version = table.scalar(S.OperatorCodeField.VERSION, N.Int32Flags, 1)
    return name, custom, version


def _tensor(fb: FlatBuffer, table: Table, index: int, buffers: list[Table]) -> Tensor:
    part = table.part
    name = table.string(S.TensorField.NAME, f"{part}'s name") or f"tensor_{index}"
    type_code = table.scalar(S.TensorField.TYPE, N.Int8Flags, 0)
    dtype = S.TENSOR_TYPES.get(type_code)
    if dtype is None:
        raise CorruptModelError(f"{fb.source}: {part} '{name}' has unknown tensor type {type_code}")
    shape = tuple(table.ints(S.TensorField.SHAPE, f"{part}'s shape"))
    signature = tuple(table.ints(S.TensorField.SHAPE_SIGNATURE, f"{part}'s shape signature"))
    known_rank = bool(shape) or table.scalar(S.TensorField.HAS_RANK, N.BoolFlags, False)
    if not table.has(S.TensorField.SHAPE) and not known_rank:
        shape_or_none = None
    else:
        shape_or_none = shape
    for what, values in (("shape", shape), ("shape signature", signature)):
        if any(d < -1 for d in values):
            raise CorruptModelError(f"{fb.source}: {part} '{name}' has the {what} {list(values)}; a dim is a size "
                                    ">= 0, or -1 for an unknown size")
    dims = signature if signature and len(signature) == len(shape) else shape
    declared = None if shape_or_none is None else tuple(None if d < 0 else d for d in dims)
    buffer_index = table.scalar(S.TensorField.BUFFER, N.Uint32Flags, 0)
    if buffer_index >= len(buffers):
        raise CorruptModelError(
            f"{fb.source}: {part} '{name}' refers to buffer {buffer_index}, "
            f"but the model has {len(buffers)} buffers"
        )
    raw = _buffer_bytes(fb, buffers[buffer_index])
    data = None if raw is None else _constant(fb, part, name, dtype, shape, raw)
    return Tensor(index, name, dtype, shape_or_none, declared, data, _is_quantized(table, dtype))


def _buffer_bytes(fb: FlatBuffer, buffer: Table) -> np.ndarray | None:
    """The buffer's bytes as a uint8 view, None for an empty buffer. Models over 2 GB keep
    the bytes after the flatbuffer, at an offset from the file's start (valid when > 1)."""
    offset = buffer.scalar(S.BufferField.OFFSET, N.Uint64Flags, 0)
    if offset > 1:
        size = buffer.scalar(S.BufferField.SIZE, N.Uint64Flags, 0)
        fb.check(offset, size, f"{buffer.part}'s data")
        return np.frombuffer(fb.data, np.uint8, size, offset)
    data = buffer.numbers(S.BufferField.DATA, N.Uint8Flags, f"{buffer.part}'s data")
    return data if data.size else None


def _constant(fb: FlatBuffer, part: str, name: str, dtype, shape: tuple[int, ...], raw: np.ndarray):
    if isinstance(dtype, TFDType):
        return raw
    count = int(np.prod(shape, dtype=np.int64))
    if any(d < 0 for d in shape) or count * dtype.itemsize != raw.size:
        raise CorruptModelError(
            f"{fb.source}: {part} '{name}' of shape {list(shape)} and type {dtype} needs "
            f"{max(count, 0) * dtype.itemsize} bytes, but its buffer holds {raw.size}"
        )
    return raw.view(dtype).reshape(shape)


def _is_quantized(table: Table, dtype) -> bool:
    if dtype not in S.INTEGER_TYPES_QUANTIZED_WHEN_SCALED:
        return False
    params = table.table(S.TensorField.QUANTIZATION, f"{table.part}'s quantization")
    if params is None:
        return False
    return params.numbers(S.QuantizationField.SCALE, N.Float32Flags, f"{params.part}'s scales").size > 0


def _operator(fb: FlatBuffer, table: Table, index: int, codes: list, tensor_count: int) -> Operator:
    part = table.part
    code_index = table.scalar(S.OperatorField.OPCODE_INDEX, N.Uint32Flags, 0)
    if code_index >= len(codes):
        raise CorruptModelError(
            f"{fb.source}: {part} uses operator code {code_index}, "
            f"but the model has {len(codes)} operator codes"
        )
    builtin, custom, version = codes[code_index]
    inputs = [
        None if t == -1 else _checked_index(fb, t, f"{part} ({builtin}) input {i}", tensor_count)
        for i, t in enumerate(table.ints(S.OperatorField.INPUTS, f"{part}'s inputs"))
    ]
    outputs = [
        _checked_index(fb, t, f"{part} ({builtin}) output {i}", tensor_count)
        for i, t in enumerate(table.ints(S.OperatorField.OUTPUTS, f"{part}'s outputs"))
    ]
    options = table.table(S.OperatorField.BUILTIN_OPTIONS, f"{part}'s options")
    return Operator(index, builtin, custom, version, inputs, outputs, options)


def _tensor_indices(fb: FlatBuffer, table: Table, field: int, part: str, count: int) -> list[int]:
    return [_checked_index(fb, t, f"{part} {i}", count) for i, t in enumerate(table.ints(field, part))]


def _checked_index(fb: FlatBuffer, index: int, part: str, count: int) -> int:
    if not 0 <= index < count:
        raise GraphStructureError(
            f"{fb.source}: {part} refers to tensor {index}, but subgraph 0 has {count} tensors"
        )
    return index
