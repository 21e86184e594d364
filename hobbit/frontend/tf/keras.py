"""Keras files, traced by TensorFlow into a frozen GraphDef.

A .keras file is a zip of a layer configuration and weights, and only Keras knows which ops
its layers compute, so hobbit loads the model with Keras, traces its inference call
(`training=False`) once as a TensorFlow function over the model's declared inputs, freezes the
variables into constants and reads that GraphDef with its own reader (graphdef.py). This is
the one place hobbit needs TensorFlow outside the tests; it is imported here, on first use,
and installed with the optional extra hobbit[tf].

Why not Keras's SavedModel export, which this reader used before: the export traces the model
several times and serialises a checkpoint and object graph that the SavedModel reader then
parses back. For a NASNetMobile that took 22 s of a 23 s read (measured on 2 cores); the one
trace and freeze take 5 s. The names and their order are the export's: inputs are the Keras inputs' names in
sorted order, outputs the serving signature's (`output_0`, `output_1`, ... or a dict
output's keys, sorted)."""

from __future__ import annotations

import importlib
import os
from dataclasses import replace
from pathlib import Path

from hobbit.errors import CorruptModelError, MissingDependencyError, ModelFormatError, SignatureError
from hobbit.frontend.tf.graph import TFGraph
from hobbit.frontend.tf.graphdef import read_graphdef

SIGNATURE = "serving_default"


def read_keras(path: str | os.PathLike, signature: str = SIGNATURE) -> TFGraph:
    """The Keras file at `path`; its one signature is the inference call, named as a SavedModel
    export names it (`signature` must be that name)."""
    path = Path(os.fspath(path))
    if not path.is_file():
        raise CorruptModelError(f"Keras file '{path}' does not exist")
    if signature != SIGNATURE:
        raise SignatureError(f"{path}: no signature '{signature}'; a Keras file has one: {SIGNATURE}")
    tf, keras = _keras()
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # Keras raises many types (ValueError, OSError, zipfile errors ...)
        raise CorruptModelError(f"'{path}' cannot be read as a Keras model: {exc}") from exc
    try:
        frozen, names = _frozen(tf, model)
    except Exception as exc:
        raise ModelFormatError(f"TensorFlow could not trace the Keras model '{path}': {exc}") from exc
    graph = read_graphdef(frozen.graph.as_graph_def().SerializeToString(), [t.name for t in frozen.outputs])
    inputs = sorted(graph.inputs, key=lambda tensor: tensor.name)  # as the signature orders them
    outputs = [replace(tensor, name=name) for tensor, name in zip(graph.outputs, names)]
    return TFGraph(graph.nodes, inputs, outputs, "keras", str(path))


def _frozen(tf, model) -> tuple[object, list[str]]:
    """The model's inference call as a frozen concrete function, and its outputs' names."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    structure = model.input
    specs = [tf.TensorSpec(x.shape, x.dtype, name=x.name) for x in tf.nest.flatten(structure)]

    @tf.function
    def serve(*inputs):
        return model(tf.nest.pack_sequence_as(structure, list(inputs)), training=False)
    concrete = serve.get_concrete_function(*specs)
    outputs = concrete.structured_outputs
    names = sorted(outputs) if isinstance(outputs, dict) else \
        [f"output_{i}" for i in range(len(tf.nest.flatten(outputs)))]
    return convert_variables_to_constants_v2(concrete), names


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        tf = importlib.import_module("tensorflow")  # Keras's models trace into TensorFlow's ops
        import keras
    except ImportError as exc:
        raise MissingDependencyError("reading .keras files needs TensorFlow and Keras (TensorFlow traces the model "
                                     "for hobbit to read): pip install 'hobbit[tf]'") from exc
    return tf, keras
