"""Read a float TFLite flatbuffer into a TFGraph, with no TensorFlow: the model's first
subgraph, its builtins translated into TensorFlow ops (the ops package) so that TFLite shares
the TensorFlow converters. Quantized models are refused here, all their quantized
operators named at once, since their integer arithmetic has no TF-op translation."""

from __future__ import annotations

import os
from pathlib import Path

from hobbit.errors import CorruptModelError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.tf.graph import TensorRef, TFGraph, TFTensor
from hobbit.frontend.tflite.emit import Emitter, OpContext
from hobbit.frontend.tflite.model import Operator, TFLiteModel, decode_model
from hobbit.frontend.tflite.ops.table import translate

QUANTIZED_BUILTINS = ("QUANTIZE", "FAKE_QUANT")


def read_tflite(model: str | os.PathLike | bytes) -> TFGraph:
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, source = model, "<tflite bytes>"
    else:
        source = os.fspath(model)
        try:
            data = Path(source).read_bytes()
        except OSError as e:
            raise CorruptModelError(f"{source}: cannot read the TFLite file: {e.strerror}") from None
    decoded = decode_model(data, source)
    _refuse_quantized(decoded)
    return _translate(decoded)


def _refuse_quantized(model: TFLiteModel) -> None:
    items = [_quantized_item(model, op) for op in model.operators]
    items = [item for item in items if item is not None]
    if items:
        raise UnsupportedModelError(items)


def _quantized_item(model: TFLiteModel, op: Operator) -> UnsupportedItem | None:
    touched = [model.tensors[t] for t in [*op.inputs, *op.outputs] if t is not None]
    quantized = [t for t in touched if t.quantized]
    if not quantized and op.builtin not in QUANTIZED_BUILTINS:
        return None
    if quantized:
        names = ", ".join(f"'{t.name}' ({t.dtype})" for t in quantized)
        detail = f"quantized tensors {names}"
    else:
        detail = f"a {op.builtin} operator"
    output = model.tensors[op.outputs[0]].name if op.outputs else f"operator {op.index}"
    return UnsupportedItem(
        op.builtin, "tflite", op.version, output,
        f"quantized TFLite models are not supported yet (operator {op.index} has {detail})",
    )


def _translate(model: TFLiteModel) -> TFGraph:
    emitter = Emitter(model)
    inputs = [_placeholder(emitter, model, t) for t in model.inputs]
    for op in model.operators:
        context = OpContext(emitter, op)
        context.finish(translate(context))
    outputs = [
        _declared(model, t, emitter.ref(model.tensors[t], f"subgraph 0's output {i}"))
        for i, t in enumerate(model.outputs)
    ]
    return TFGraph(emitter.nodes, inputs, outputs, "tflite", model.source)


def _placeholder(emitter: Emitter, model: TFLiteModel, index: int) -> TFTensor:
    tensor = model.tensors[index]
    node = emitter.add(tensor.name, "Placeholder", [], {"dtype": tensor.dtype, "shape": tensor.signature})
    ref = TensorRef(node.name)
    emitter.bind(index, ref)
    return _declared(model, index, ref)


def _declared(model: TFLiteModel, index: int, ref: TensorRef) -> TFTensor:
    tensor = model.tensors[index]
    return TFTensor(model.signature_names.get(index, tensor.name), ref, tensor.dtype, tensor.signature)
