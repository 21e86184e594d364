"""An ONNX model (a path, bytes or a ModelProto) as a Source (hobbit.frontend.common.source)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from hobbit.errors import ModelFormatError
from hobbit.frontend.common.source import DeclaredInput, Described, ModelInput, Source
from hobbit.frontend.onnx.declared import declared_args, declared_inputs, declared_output_types
from hobbit.frontend.onnx.fingerprint import feed_model, has_external_data
from hobbit.frontend.onnx.importer import import_onnx, load_model
from hobbit.graph.ir import Graph


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

    def described(self, input_shapes: dict[str, tuple[int, ...]] | None = None
                  ) -> tuple[list[Described], list[Described]]:
        return declared_args(self.proto(), input_shapes)

    def fingerprint(self) -> str | None:
        h = hashlib.sha256()
        try:
            feed_model(h, self.model, self.external_data_dir)
        except (OSError, ValueError, TypeError, DecodeError):
            return None
        return h.hexdigest()

    @staticmethod
    def portable_model(model: ModelInput) -> ModelInput:
        """ONNX travels as bytes: bytes and ModelProtos as they are, a file as its bytes (read
        now), or, when it names external-data files, as one message with its weights inside."""
        if isinstance(model, (bytes, onnx.ModelProto)):
            return model
        if isinstance(model, bytearray):
            return bytes(model)
        path = Path(os.fspath(model))
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelFormatError(f"cannot pickle the model: its file '{path}' cannot be read ({exc})") from exc
        if not has_external_data(data):
            return data
        try:
            return load_model(path).SerializeToString()
        except ValueError as exc:  # protobuf refuses messages over 2 GiB
            raise ModelFormatError(f"cannot pickle the model from '{path}': its weights with their external "
                                   f"data do not fit in one protobuf message ({exc})") from exc
