"""Bad .tflite input gets a specific hobbit error naming the file (and the tensor or
operator), never a struct.error or IndexError from inside the reader. Broken models are
made by patching fields of a converter-made model, located with the flatbuffers runtime."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from flatbuffers import number_types as N
from flatbuffers.table import Table

from tests.frontend.tflite.oracle import convert, tf

from hobbit.errors import CorruptModelError, GraphStructureError, HobbitError, UnsupportedModelError
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.reader import read_tflite


@pytest.fixture(scope="module")
def model() -> bytes:
    w = np.linspace(-1, 1, 3 * 3 * 3 * 4, dtype=np.float32).reshape(3, 3, 3, 4)

    def fn(x):
        return tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(x, tf.constant(w), 1, "SAME")), [1, 2])

    return convert(fn, [tf.TensorSpec([1, 6, 6, 3], tf.float32)])


def _field(buf: bytes, table_pos: int, index: int) -> int:
    table = Table(buf, table_pos)
    off = table.Offset(4 + 2 * index)
    assert off, f"field {index} is absent"
    return table_pos + off


def _vector(buf: bytes, table_pos: int, index: int) -> tuple[int, int]:
    pos = _field(buf, table_pos, index)
    start = pos + Table(buf, 0).Get(N.UOffsetTFlags, pos)
    return start + 4, Table(buf, 0).Get(N.UOffsetTFlags, start)


def _tables(buf: bytes, table_pos: int, index: int) -> list[int]:
    start, count = _vector(buf, table_pos, index)
    return [Table(buf, 0).Indirect(start + 4 * i) for i in range(count)]


def _subgraph(buf: bytes) -> int:
    root = Table(buf, 0).Indirect(0)
    return _tables(buf, root, S.ModelField.SUBGRAPHS)[0]


def _patched(buf: bytes, pos: int, fmt: str, value: int) -> bytes:
    data = bytearray(buf)
    struct.pack_into(fmt, data, pos, value)
    return bytes(data)


def _write(tmp_path, content: bytes):
    path = tmp_path / "model.tflite"
    path.write_bytes(content)
    return path


def test_not_a_flatbuffer(tmp_path):
    path = _write(tmp_path, b"this is not a model, just some text")
    with pytest.raises(CorruptModelError, match=r"model\.tflite.*TFL3"):
        read_tflite(path)


def test_wrong_file_identifier(tmp_path, model):
    path = _write(tmp_path, model[:4] + b"XXXX" + model[8:])
    with pytest.raises(CorruptModelError, match=r"model\.tflite.*TFL3"):
        read_tflite(path)


def test_empty_file(tmp_path):
    with pytest.raises(CorruptModelError, match=r"model\.tflite"):
        read_tflite(_write(tmp_path, b""))


def test_truncated_in_half(tmp_path, model):
    path = _write(tmp_path, model[: len(model) // 2])
    with pytest.raises(CorruptModelError, match=r"model\.tflite.*truncated or corrupt"):
        read_tflite(path)


def test_every_truncation_is_a_model_error(model):
    for cut in range(0, len(model), max(1, len(model) // 200)):
        with pytest.raises(HobbitError):
            read_tflite(model[:cut])


def test_random_byte_damage_is_never_a_crash(model):
    rng = np.random.default_rng(3)
    for _ in range(300):
        data = bytearray(model)
        for pos in rng.integers(8, len(model), 4):
            data[pos] = int(rng.integers(0, 256))
        try:
            read_tflite(bytes(data))
        except HobbitError:
            pass


def test_tensor_with_missing_buffer(tmp_path, model):
    tensors = _tables(model, _subgraph(model), S.SubGraphField.TENSORS)
    index = next(
        i for i, t in enumerate(tensors)
        if Table(model, t).Offset(4 + 2 * S.TensorField.BUFFER)
        and Table(model, t).Get(N.Uint32Flags, _field(model, t, S.TensorField.BUFFER)) > 0
    )
    broken = _patched(model, _field(model, tensors[index], S.TensorField.BUFFER), "<I", 999)
    with pytest.raises(CorruptModelError, match=rf"model\.tflite: subgraph 0, tensor {index} .* buffer 999"):
        read_tflite(_write(tmp_path, broken))


def test_operator_with_missing_tensor(tmp_path, model):
    operators = _tables(model, _subgraph(model), S.SubGraphField.OPERATORS)
    start, _ = _vector(model, operators[0], S.OperatorField.INPUTS)
    broken = _patched(model, start, "<i", 4242)
    with pytest.raises(GraphStructureError, match=r"model\.tflite: subgraph 0, operator 0 .*input 0.* tensor 4242"):
        read_tflite(_write(tmp_path, broken))


def test_operator_with_missing_opcode(tmp_path, model):
    operators = _tables(model, _subgraph(model), S.SubGraphField.OPERATORS)
    index, op = next(
        (i, op) for i, op in enumerate(operators) if Table(model, op).Offset(4 + 2 * S.OperatorField.OPCODE_INDEX)
    )
    broken = _patched(model, _field(model, op, S.OperatorField.OPCODE_INDEX), "<I", 77)
    with pytest.raises(CorruptModelError, match=rf"model\.tflite: subgraph 0, operator {index} .*operator code 77"):
        read_tflite(_write(tmp_path, broken))


def test_missing_file(tmp_path):
    with pytest.raises(CorruptModelError, match=r"absent\.tflite"):
        read_tflite(tmp_path / "absent.tflite")


def test_int8_quantized_model_is_unsupported(tmp_path):
    w = np.linspace(-1, 1, 6 * 4, dtype=np.float32).reshape(6, 4)
    function = tf.function(lambda x: tf.nn.relu(tf.matmul(x, tf.constant(w))),
                           input_signature=[tf.TensorSpec([1, 6], tf.float32)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = lambda: ([rng.standard_normal((1, 6)).astype(np.float32)] for _ in range(8))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    path = _write(tmp_path, converter.convert())
    with pytest.raises(UnsupportedModelError, match="quantized TFLite models are not supported yet") as info:
        read_tflite(path)
    ops = {item.op_type for item in info.value.items}
    assert {"QUANTIZE", "FULLY_CONNECTED"} <= ops
    assert all(item.domain == "tflite" for item in info.value.items)


@pytest.mark.parametrize("field", [S.TensorField.SHAPE, S.TensorField.SHAPE_SIGNATURE], ids=["shape", "signature"])
def test_a_dim_below_minus_one_is_refused_not_taken_as_dynamic(tmp_path, field):
    """Only -1 means an unknown size; -4 was read as one more dynamic dim."""
    model = convert(lambda x: tf.nn.relu(x), [tf.TensorSpec([None, 5], tf.float32)])
    subgraph = _subgraph(model)
    start, _ = _vector(model, subgraph, S.SubGraphField.INPUTS)
    index = Table(model, 0).Get(N.Int32Flags, start)
    dims, _ = _vector(model, _tables(model, subgraph, S.SubGraphField.TENSORS)[index], field)
    broken = _patched(model, dims, "<i", -4)
    with pytest.raises(CorruptModelError, match=rf"model\.tflite: subgraph 0, tensor {index} '[^']+' has the "
                                                rf"shape( signature)? \[-4, 5\]; a dim is a size >= 0, or -1"):
        read_tflite(_write(tmp_path, broken))
