"""Keras files, read through Keras's own SavedModel export.

A .keras file is a zip of a layer configuration and weights, and only Keras knows which ops
its layers compute, so hobbit asks Keras to export the model as a SavedModel and reads that
with its own reader (savedmodel.py). This is the one place hobbit needs TensorFlow outside the
tests; it is imported here, on first use, and installed with the optional extra hobbit[tf]."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import tempfile
from pathlib import Path

from hobbit.errors import CorruptModelError, MissingDependencyError, ModelFormatError
from hobbit.frontend.tf.graph import TFGraph
from hobbit.frontend.tf.savedmodel import read_saved_model


def read_keras(path: str | os.PathLike, signature: str = "serving_default") -> TFGraph:
    path = Path(os.fspath(path))
    if not path.is_file():
        raise CorruptModelError(f"Keras file '{path}' does not exist")
    keras = _keras()
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # Keras raises many types (ValueError, OSError, zipfile errors ...)
        raise CorruptModelError(f"'{path}' cannot be read as a Keras model: {exc}") from exc
    with tempfile.TemporaryDirectory(prefix="hobbit-keras-") as tmp:
        exported = Path(tmp) / "saved_model"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # export prints a summary of the signature
                model.export(exported, format="tf_saved_model")
        except Exception as exc:
            raise ModelFormatError(f"Keras could not export '{path}' as a SavedModel: {exc}") from exc
        graph = read_saved_model(exported, signature)
    return TFGraph(graph.nodes, graph.inputs, graph.outputs, "keras", str(path))


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        importlib.import_module("tensorflow")  # Keras's SavedModel export runs on TensorFlow's ops
        import keras
    except ImportError as exc:
        raise MissingDependencyError("reading .keras files needs TensorFlow and Keras (Keras exports the model "
                                     "for hobbit to read): pip install 'hobbit[tf]'") from exc
    return keras
