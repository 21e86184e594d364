"""Pickling a compiled model: what hobbit.compile needs to build the same model again.

Native code lives in this process's JIT and cannot travel, so a pickled model (for
`copy.deepcopy`, or a multiprocessing worker started with spawn) carries the model and
compile()'s arguments instead, and unpickling compiles it again; the compile cache on disk
makes that a load when it holds the entry. The model travels in the form whose cache key is
the one the first compile used, as its Source's format says (Source.portable_model): for
ONNX, bytes and ModelProtos as they are, a file as its bytes (read when pickled); for
TensorFlow, its path. A SpecializingModel travels the same way and compiles its variants
again on first use."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import onnx

from hobbit.frontend.common.source import ModelInput


@dataclass(frozen=True)
class Recipe:
    """`build(source, **options)` makes the model again. `build` is hobbit.compile, handed
    in by compile() itself so this layer does not import the one above it; `portable` is the
    portable_model of the model's Source (hobbit.frontend.common.source), which gives the
    form of the model that travels."""

    build: Callable[..., Any]
    source: str | os.PathLike | bytes | onnx.ModelProto
    portable: Callable[[ModelInput], ModelInput]
    options: dict[str, Any]

    def reduce(self) -> tuple[Callable[..., Any], tuple]:
        """What a model's `__reduce__` returns: rebuild from the model itself in place of a
        path, for another process."""
        return rebuild, (self.build, self.portable(self.source), self.options)


def rebuild(build: Callable[..., Any], source: ModelInput, options: dict[str, Any]) -> Any:
    """Unpickling: compile the model again (a cache hit when the entry is on disk)."""
    return build(source, **options)
