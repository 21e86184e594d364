"""A TensorFlow model (frozen GraphDef, SavedModel, Keras file) as a Source
(hobbit.frontend.common.source): read once into a TFGraph, imported through the TensorFlow
converters. TFLite's source (hobbit.frontend.tflite.source) is this one with its own reader."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from hobbit.errors import InputError, ModelFormatError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.common.source import DeclaredInput, ModelInput, Source, feed, feed_file
from hobbit.frontend.tf.convert import import_tf
from hobbit.frontend.tf.graph import TFGraph, TFTensor
from hobbit.frontend.tf.graphdef import read_graphdef
from hobbit.frontend.tf.keras import read_keras
from hobbit.frontend.tf.savedmodel import read_saved_model
from hobbit.graph.ir import Graph


@dataclass
class TFSource(Source):
    """A TensorFlow model: frozen GraphDef, SavedModel (`signature` picks the signature,
    default serving_default) or Keras file (exported to a SavedModel through Keras)."""

    model: str | os.PathLike | bytes
    format: str
    signature: str | None = None
    _graph: TFGraph | None = field(default=None, repr=False)

    def tf_graph(self) -> TFGraph:
        if self._graph is None:
            self._graph = self._read()
        return self._graph

    def _read(self) -> TFGraph:
        if self.signature is not None and self.format not in ("savedmodel", "keras"):
            raise InputError(f"signature={self.signature!r} was given, but a {self.format} model has no signatures "
                             "(only SavedModels and Keras files do)")
        return self._read_format(self.signature or "serving_default")

    def _read_format(self, signature: str) -> TFGraph:
        if self.format == "graphdef":
            return read_graphdef(self.model)
        if self.format == "savedmodel":
            path = Path(os.fspath(self.model))
            return read_saved_model(path.parent if path.name == "saved_model.pb" else path, signature)
        return read_keras(self.model, signature)

    def files(self) -> list[Path]:
        """The files the model consists of, for the compile cache's key."""
        if isinstance(self.model, (bytes, bytearray)):
            return []
        path = Path(os.fspath(self.model))
        if self.format != "savedmodel":
            return [path]
        root = path.parent if path.name == "saved_model.pb" else path
        variables = root / "variables"
        return [root / "saved_model.pb"] + (sorted(p for p in variables.iterdir() if p.is_file())
                                            if variables.is_dir() else [])

    def declared_inputs(self, input_shapes: dict[str, tuple[int, ...]] | None = None) -> list[DeclaredInput]:
        fixed = input_shapes or {}
        names = [t.name for t in self.tf_graph().inputs]
        unknown = sorted(set(fixed) - set(names))
        if unknown:
            raise InputError(f"input_shapes names {unknown}, which are not model inputs; the model takes {names}")
        return [_declared(t, fixed.get(t.name)) for t in self.tf_graph().inputs]

    def declared_outputs(self) -> list[tuple[str, tuple[int | None, ...], np.dtype | None]]:
        return [(t.name, tuple(t.shape or ()), t.dtype if isinstance(t.dtype, np.dtype) else None)
                for t in self.tf_graph().outputs]

    def shapeless_inputs(self) -> list[str]:
        return [t.name for t in self.tf_graph().inputs if t.shape is None]

    def import_graph(self, input_shapes: dict[str, tuple[int, ...]] | None = None,
                     input_values: dict[str, np.ndarray] | None = None) -> Graph:
        return import_tf(self.tf_graph(), input_shapes, input_values)

    def fingerprint(self) -> str | None:
        """The format and signature, and every file the model consists of, by name and content."""
        h = hashlib.sha256()
        try:
            feed(h, "tf", json.dumps([self.format, self.signature]).encode())
            if isinstance(self.model, (bytes, bytearray)):
                feed(h, "bytes", bytes(self.model))
            for path in self.files():
                feed(h, "file", path.name.encode())
                feed_file(h, path)
        except (OSError, ValueError, TypeError):
            return None
        return h.hexdigest()

    @staticmethod
    def portable_model(model: ModelInput) -> ModelInput:
        """A TensorFlow model travels as its path: a SavedModel is a folder, and the bytes of a
        frozen GraphDef would read as ONNX; a worker on this machine reads the same files (and
        a changed file is a new cache key, so it cannot load stale code). TFLite bytes stay bytes."""
        if isinstance(model, (bytes, onnx.ModelProto)):
            return model
        if isinstance(model, bytearray):
            return bytes(model)
        return os.fspath(model)


def _declared(tensor: TFTensor, fixed: tuple[int, ...] | None) -> DeclaredInput:
    if not isinstance(tensor.dtype, np.dtype):
        what = tensor.dtype.name if tensor.dtype is not None else "no dtype"
        raise UnsupportedModelError([UnsupportedItem("input", "tf", 0, tensor.name,
                                                     f"element type {what} is not supported")])
    if fixed is not None:
        dims = tuple(int(d) for d in fixed)
        if tensor.shape is not None and len(tensor.shape) != len(dims):
            raise InputError(f"input_shapes gives input '{tensor.name}' the shape {dims}, "
                             f"but the model declares rank {len(tensor.shape)}")
        return DeclaredInput(tensor.name, dims, (None,) * len(dims), tensor.dtype)
    if tensor.shape is None:
        raise ModelFormatError(f"input '{tensor.name}' has no shape; pass input_shapes={{'{tensor.name}': (...)}}")
    symbols = tuple(None if d is not None else f"{tensor.name}:{axis}" for axis, d in enumerate(tensor.shape))
    return DeclaredInput(tensor.name, tuple(tensor.shape), symbols, tensor.dtype)
