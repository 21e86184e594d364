"""Test helpers for the TFLite reader: models made by TensorFlow's own converter, run by
TensorFlow's own interpreter, and a TFGraph evaluated op by op with tf.raw_ops, so the
reader's translations are checked against TensorFlow's op definitions on their own,
before (and apart from) hobbit's converters."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import inspect  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

from hobbit.frontend.tf.graph import TensorRef, TFGraph, TFNode  # noqa: E402


def convert(fn, specs: list[tf.TensorSpec], *, float16: bool = False) -> bytes:
    """`fn` (a Python function of tensors) as a float .tflite model."""
    function = tf.function(fn, input_signature=specs)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
    if float16:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def interpreter(content: bytes) -> tf.lite.Interpreter:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interp = tf.lite.Interpreter(model_content=content)
    interp.allocate_tensors()
    return interp


def run_interpreter(content: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    interp = interpreter(content)
    for detail in interp.get_input_details():
        value = feeds[detail["name"]]
        if list(detail["shape"]) != list(value.shape):
            interp.resize_tensor_input(detail["index"], value.shape)
    interp.allocate_tensors()
    for detail in interp.get_input_details():
        interp.set_tensor(detail["index"], feeds[detail["name"]])
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def evaluate(graph: TFGraph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs, each node run by tf.raw_ops.<op> with the node's attributes,
    which must be exactly those TensorFlow's op definition has (none unknown, none
    required missing, type attributes equal to the operands' types)."""
    results: dict[str, list] = {}

    def value(ref: TensorRef):
        if ref.node not in results:
            results[ref.node] = run(graph.nodes[ref.node])
        return results[ref.node][ref.index]

    def run(node: TFNode) -> list:
        if node.op == "Const":
            return [tf.constant(node.attrs["value"])]
        if node.op == "Placeholder":
            return [tf.constant(feeds[node.name])]  # feeds are keyed by tensor name, as the interpreter names them
        return _run_raw(node, [value(r) for r in node.inputs])

    return [np.asarray(value(t.ref)) for t in graph.outputs]


def _run_raw(node: TFNode, args: list) -> list:
    op_def = op_def_registry.get(node.op)
    assert op_def is not None, f"{node.name}: {node.op} is not a TensorFlow op"
    raw_op = getattr(tf.raw_ops, node.op)
    python_names = list(inspect.signature(raw_op).parameters)
    kwargs, inferred = {}, {}
    remaining = list(args)
    for arg, python_name in zip(op_def.input_arg, python_names):
        if arg.number_attr:
            count = node.attrs[arg.number_attr]
            kwargs[python_name], remaining = remaining[:count], remaining[count:]
            inferred[arg.number_attr] = count
            types = [v.dtype for v in kwargs[python_name]]
        else:
            kwargs[python_name], remaining = remaining[0], remaining[1:]
            types = [kwargs[python_name].dtype]
        if arg.type_attr:
            inferred[arg.type_attr] = types[0]
    assert not remaining, f"{node.name}: {len(remaining)} inputs more than {node.op} takes"
    explicit = [a.name for a in op_def.attr if a.name not in inferred]
    python_attr = {a: a for a in explicit if a in python_names}
    renamed = [p for p in python_names[len(op_def.input_arg) :] if p not in explicit and p != "name"]
    python_attr.update(zip([a for a in explicit if a not in python_names], renamed))
    known = {a.name for a in op_def.attr}
    assert set(node.attrs) <= known, f"{node.name}: {node.op} has no attrs {set(node.attrs) - known}"
    for attr in op_def.attr:
        if attr.name in inferred:
            if attr.name in node.attrs:
                given = node.attrs[attr.name]
                expected = inferred[attr.name]
                given = tf.as_dtype(given) if isinstance(given, np.dtype) else given
                assert given == expected, f"{node.name}: attr {attr.name}={given}, operands say {expected}"
        elif attr.name in node.attrs:
            given = node.attrs[attr.name]
            kwargs[python_attr[attr.name]] = tf.as_dtype(given) if isinstance(given, np.dtype) else given
        else:
            assert attr.HasField("default_value"), f"{node.name}: {node.op} needs attr {attr.name}"
    result = raw_op(**kwargs)
    single = len(op_def.output_arg) == 1 and not op_def.output_arg[0].number_attr
    return [result] if single else list(result)
