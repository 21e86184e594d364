"""The table of TFLite builtin translations: each family module of this package registers
its functions under the builtin names they read (translates), and translate() runs the
one an operator names, or makes the placeholder node "TFLite:<NAME>" that the converter
reports with the model's other unsupported ops."""

from __future__ import annotations

from collections.abc import Callable

from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite.emit import OpContext


Translation = Callable[[OpContext], list[TensorRef]]

TRANSLATIONS: dict[str, Translation] = {}


def translates(*builtins: str):
    def register(fn: Translation) -> Translation:
        for builtin in builtins:
            TRANSLATIONS[builtin] = fn
        return fn

    return register


def unsupported(c: OpContext, op: str) -> list[TensorRef]:
    """A placeholder node the converter lists as unsupported, with one output per tensor."""
    inputs = [c.input(i) for i in range(len(c.op.inputs)) if c.has_input(i)]
    node = c.node(op, inputs, tflite_operator=c.op.index, tflite_version=c.op.version)
    return [TensorRef(node.node, i) for i in range(len(c.op.outputs))]


def translate(c: OpContext) -> list[TensorRef]:
    if c.op.builtin == "CUSTOM":
        return unsupported(c, f"TFLite:CUSTOM:{c.op.custom_code}")
    translation = TRANSLATIONS.get(c.op.builtin)
    if translation is None:
        return unsupported(c, f"TFLite:{c.op.builtin}")
    return translation(c)
