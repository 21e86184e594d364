"""A model as the compiler sees it, whatever its format: the one interface through which the
compiler, the CLI, the compile cache, pickling and per-shape specialisation reach a frontend.

A Source says what the model declares about its inputs and outputs (for the CLI and for
per-shape specialisation, before any import), imports it into hobbit's graph, describes its
inputs and outputs as onnxruntime would (for get_inputs() of a model compiled per input
signature), fingerprints its content (the compile cache's key) and gives the form of the
model a pickle carries. Each format's package implements it (hobbit.frontend.onnx.source,
hobbit.frontend.tf.source, hobbit.frontend.tflite.source); hobbit.frontend.formats picks the
format of a path. A source reads its file at most once: a SpecializingModel imports the
model once per input signature, and a Keras file costs a TensorFlow export each time it is
read."""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np

from hobbit.errors import ConfigError
from hobbit.frontend.common.dtypes import tensor_type
from hobbit.graph.ir import Graph

if TYPE_CHECKING:  # a worker that runs a model it did not compile reads DeclaredInput, never onnx
    import onnx

ModelInput = Union[str, os.PathLike, bytes, "onnx.ModelProto"]

# How onnxruntime describes an input or output: name, shape (an int, a dim's name, or None
# for each dim; [] where unknown) and type string ('tensor(float)', 'seq(tensor(float))').
Described = tuple[str, list[int | str | None], str]


@dataclass(frozen=True)
class DeclaredInput:
    """A graph input as the model declares it: None for a symbolic dim, its name in `symbols`."""

    name: str
    shape: tuple[int | None, ...]
    symbols: tuple[str | None, ...]
    dtype: np.dtype
    sequence: bool = False  # a sequence of tensors of `dtype`; `shape` is then ()


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

    def described(self, input_shapes: dict[str, tuple[int, ...]] | None = None
                  ) -> tuple[list[Described], list[Described]]:
        """The inputs and outputs as onnxruntime describes them, from the declarations: a
        symbolic dim is None, as onnxruntime shows an unnamed one (a format that names its
        dims, or has richer types, says more)."""
        inputs = [(d.name, list(d.shape), tensor_type(d.dtype)) for d in self.declared_inputs(input_shapes)]
        outputs = [(name, list(dims), tensor_type(dtype) if dtype is not None else "tensor(undefined)")
                   for name, dims, dtype in self.declared_outputs()]
        return inputs, outputs

    def fingerprint(self) -> str | None:
        """A sha256 (hex) of everything the model consists of, for the compile cache's key;
        None when the model cannot be read (its import then reports why), or for a source
        that cannot say what it consists of (it is then compiled, never cached)."""
        return None

    @staticmethod
    def portable_model(model: ModelInput) -> ModelInput:
        """`model` (as given to hobbit.compile, of this source's format) in the form a pickle of
        the compiled model carries (hobbit.runtime.recipe): one whose cache key is the one the
        first compile used, readable in another process."""
        raise ConfigError(f"the model must be a path, bytes or an onnx.ModelProto to be pickled, not "
                          f"{type(model).__name__} ({model!r:.60})")


def feed(h, tag: str, data: bytes) -> None:
    """Add a field to the hash `h`, length-prefixed, so adjacent fields cannot run into each other."""
    h.update(f"{tag}:{len(data)}:".encode())
    h.update(data)


def feed_file(h, path: Path) -> None:
    """Add a file's bytes to the hash `h` where they lie (mapped, not read into memory)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            h.update(data)

