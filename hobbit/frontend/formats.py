"""Which frontend reads a model: the format of a path, bytes or ModelProto, and the Source
(hobbit.frontend.common.source) of that format.

The format is decided once, from the path: a directory with saved_model.pb is a SavedModel,
`.keras` (and Keras 2's `.h5`) a Keras file, `.tflite` a TFLite flatbuffer (also recognised
by its file identifier, whatever the name), `.pb` a frozen GraphDef, anything else ONNX.
Bytes and ModelProtos are ONNX (TFLite bytes are recognised by their identifier). This is
the one module that knows every format's package; the compiler and the CLI open models
here, and everything after that goes through the Source."""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from hobbit.errors import ConfigError, CorruptModelError, InputError
from hobbit.frontend.common.export_folder import export_given_as_model
from hobbit.frontend.common.source import ModelInput, Source
from hobbit.frontend.onnx.source import OnnxSource
from hobbit.frontend.tf.source import TFSource
from hobbit.frontend.tflite.source import TFLiteSource

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
    if fmt == "tflite":
        return TFLiteSource(model, fmt, signature)
    return TFSource(model, fmt, signature)
