"""A model as the compiler sees it, whatever its format: what it declares about its inputs and
outputs (for the CLI and for per-shape specialisation) and its import into hobbit's graph.

The format is decided once, from the path: a directory with saved_model.pb is a SavedModel,
`.keras` (and Keras 2's `.h5`) a Keras file, `.tflite` a TFLite flatbuffer (also recognised
by its file identifier, whatever the name), `.pb` a frozen GraphDef, anything else ONNX.
Bytes and ModelProtos are ONNX (TFLite bytes are recognised by their identifier). A source
reads its file at most once: a SpecializingModel imports the model once per input signature,
and a Keras file costs a TensorFlow export each time it is read."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from hobbit.errors import (ConfigError, CorruptModelError, InputError, ModelFormatError, UnsupportedItem,
                           UnsupportedModelError)
from hobbit.frontend.onnx.declared import DeclaredInput, declared_inputs, declared_output_types
from hobbit.frontend.onnx.importer import import_onnx, load_model
from hobbit.frontend.tf.convert import import_tf
from hobbit.frontend.tf.graph import TFGraph, TFTensor
from hobbit.frontend.tf.graphdef import read_graphdef
from hobbit.frontend.tf.keras import read_keras
from hobbit.frontend.tf.savedmodel import read_saved_model
from hobbit.frontend.tflite.reader import read_tflite
from hobbit.graph.ir import Graph
from hobbit.frontend.common.export_folder import export_given_as_model

ModelInput = str | os.PathLike | bytes | onnx.ModelProto

TF_FORMATS = ("graphdef", "savedmodel", "keras", "tflite")
_TFLITE_IDENTIFIER = b"TFL3"  # bytes 4..8 of every TFLite flatbuffer


def detect_format(model: ModelInput) -> str:
    """"onnx", "graphdef", "savedmodel", "keras" or "tflite" (see the module docstring)."""
    if isinstance(model, onnx.ModelProto):
        return "onnx"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "tflite" if bytes(model[4:8]) == _TFLITE_IDENTIFIER else "onnx"
    if not isinstance(model, (str, os.PathLike)):
        raise ConfigError(f"the model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__} "
                          f"({model!r:.60})")
    path = Path(os.fspath(model))
    if path.is_dir():
        if (path / "saved_model.pb").is_file():
            return "savedmodel"
        raise CorruptModelError(export_given_as_model(path)
                                or f"'{path}' is a directory but not a SavedModel: it has no saved_model.pb")
    if path.name == "saved_model.pb":
        return "savedmodel"
    suffix = path.suffix.lower()
    if suffix in (".keras", ".h5"):
        return "keras"
    if suffix == ".tflite" or _starts_like_tflite(path):
        return "tflite"
    if suffix == ".pb":
        return "graphdef"
    return "onnx"


def _starts_like_tflite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(8)[4:8] == _TFLITE_IDENTIFIER
    except OSError:
        return False  # the ONNX reader reports the missing or unreadable file


class Source:
    """One model file (or ONNX bytes/proto) and what the compiler asks of it."""

    format: str
    model: ModelInput

    def declared_inputs(self, input_shapes: dict[str, tuple[int, ...]] | None = None) -> list[DeclaredInput]:
        raise NotImplementedError

    def declared_outputs(self) -> list[tuple[str, tuple[int | None, ...], np.dtype | None]]:
        raise NotImplementedError

    def shapeless_inputs(self) -> list[str]:
        """Inputs that declare no shape at all (not even a rank): the CLI needs a size for each."""
        raise NotImplementedError

    def import_graph(self, input_shapes: dict[str, tuple[int, ...]] | None = None,
                     input_values: dict[str, np.ndarray] | None = None) -> Graph:
        raise NotImplementedError


@dataclass
class OnnxSource(Source):
    """An ONNX model. `external_data_dir`: the folder of the external-data files of a model
    given as bytes or a ModelProto (hobbit.frontend.onnx.external_data)."""

    model: ModelInput
    format: str = "onnx"
    external_data_dir: str | os.PathLike | None = None
    _proto: onnx.ModelProto | None = field(default=None, repr=False)

    def proto(self) -> onnx.ModelProto:
        if self._proto is None:
            self._proto = load_model(self.model, self.external_data_dir)
        return self._proto

    def declared_inputs(self, input_shapes: dict[str, tuple[int, ...]] | None = None) -> list[DeclaredInput]:
        return declared_inputs(self.proto(), input_shapes)

    def declared_outputs(self) -> list[tuple[str, tuple[int | None, ...], np.dtype | None]]:
        return declared_output_types(self.proto())

    def shapeless_inputs(self) -> list[str]:
        graph = self.proto().graph
        weights = {t.name for t in graph.initializer}
        return [vi.name for vi in graph.input if vi.name not in weights
                and vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")]

    def import_graph(self, input_shapes: dict[str, tuple[int, ...]] | None = None,
                     input_values: dict[str, np.ndarray] | None = None) -> Graph:
        return import_onnx(self.model, input_shapes, input_values, self.external_data_dir)


@dataclass
class TFSource(Source):
    """A TensorFlow model: frozen GraphDef, SavedModel (`signature` picks the signature,
    default serving_default), Keras file (exported to a SavedModel through Keras) or TFLite."""

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
        signature = self.signature or "serving_default"
        if self.format == "graphdef":
            return read_graphdef(self.model)
        if self.format == "tflite":
            return read_tflite(self.model)
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


def open_source(model: ModelInput | Source, signature: str | None = None,
                external_data_dir: str | os.PathLike | None = None) -> Source:
    """The model as a Source (a Source is returned as it is). `external_data_dir` is only for
    ONNX bytes and ModelProtos (load_model refuses it with a model file, which reads its
    external data from its own folder)."""
    if isinstance(model, Source):
        return model
    fmt = detect_format(model)
    if fmt == "onnx":
        if signature is not None:
            raise InputError(f"signature={signature!r} was given, but an ONNX model has no signatures "
                             "(only SavedModels and Keras files do)")
        return OnnxSource(model, external_data_dir=external_data_dir)
    if external_data_dir is not None:
        raise ConfigError(f"external_data_dir= is for ONNX models given as bytes or an onnx.ModelProto, not for a "
                          f"{fmt} model")
    return TFSource(model, fmt, signature)
