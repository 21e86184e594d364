"""Pickling a compiled model: what hobbit.compile needs to build the same model again.

Native code lives in this process's JIT and cannot travel, so a pickled model (for
`copy.deepcopy`, or a multiprocessing worker started with spawn) carries the model and
compile()'s arguments instead, and unpickling compiles it again; the compile cache on disk
makes that a load when it holds the entry. The model travels in the form whose cache key is
the one the first compile used: bytes and ModelProtos as they are, a file as its bytes
(read when pickled). A SpecializingModel travels the same way and compiles its variants
again on first use."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from hobbit.errors import ModelFormatError
from hobbit.frontend.onnx.importer import load_model
from hobbit.frontend.source import detect_format
from hobbit.runtime import cache as compile_cache


@dataclass(frozen=True)
class Recipe:
    """`build(source, **options)` makes the model again. `build` is hobbit.compile, handed
    in by compile() itself so this layer does not import the one above it."""

    build: Callable[..., Any]
    source: str | os.PathLike | bytes | onnx.ModelProto
    options: dict[str, Any]

    def reduce(self) -> tuple[Callable[[Recipe], Any], tuple[Recipe]]:
        """What a model's `__reduce__` returns: rebuild from a copy that holds the model itself
        in place of a path, for another process."""
        return rebuild, (Recipe(self.build, _portable_source(self.source), self.options),)


def rebuild(recipe: Recipe) -> Any:
    """Unpickling: compile the model again (a cache hit when the entry is on disk)."""
    return recipe.build(recipe.source, **recipe.options)


def _portable_source(source: object) -> str | bytes | onnx.ModelProto:
    """ONNX travels as bytes. A TensorFlow model travels as its path: a SavedModel is a folder,
    and the bytes of a frozen GraphDef would read as ONNX; a worker on this machine reads the
    same files (and a changed file is a new cache key, so it cannot load stale code)."""
    if isinstance(source, (bytes, onnx.ModelProto)):
        return source
    if isinstance(source, bytearray):
        return bytes(source)
    if detect_format(source) != "onnx":
        return os.fspath(source)
    path = Path(os.fspath(source))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"cannot pickle the model: its file '{path}' cannot be read ({exc})") from exc
    if not compile_cache.has_external_data(data):
        return data
    try:
        return load_model(path).SerializeToString()
    except ValueError as exc:  # protobuf refuses messages over 2 GiB
        raise ModelFormatError(f"cannot pickle the model from '{path}': its weights with their external "
                               f"data do not fit in one protobuf message ({exc})") from exc
