"""The reader-neutral form of a TensorFlow model: what every reader produces and the
converters consume.

Readers decode everything format-specific: protobuf or flatbuffer bytes, function
calls (inlined), variables (replaced by Const nodes carrying the checkpoint's value),
TFLite builtins (translated into TensorFlow ops). The converters then see one
vocabulary: TensorFlow op names, data inputs as TensorRefs (control inputs dropped),
attributes as plain Python values:

- int, float, bool, str (bytes that are not UTF-8 stay bytes);
- a dtype as a numpy dtype; a dtype hobbit has no numpy type for as TFDType;
- a shape as a tuple of ints with None for unknown dims, or None for unknown rank;
- a tensor as a numpy array;
- a list attribute as a list of the above;
- a function reference as its name (str)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorRef:
    """Output `index` of node `node` (TensorFlow's "node:index"; "node" is index 0)."""

    node: str
    index: int = 0

    def __str__(self) -> str:
        return f"{self.node}:{self.index}"


@dataclass(frozen=True)
class TFDType:
    """A TensorFlow DataType enum value hobbit has no numpy dtype for (string, resource,
    complex, quantized ...); converters that meet one report it as unsupported."""

    enum: int
    name: str


@dataclass
class TFNode:
    name: str
    op: str
    inputs: list[TensorRef]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TFTensor:
    """A model input or output: its public name (the signature's key for a SavedModel,
    the Placeholder's or output node's name for a GraphDef, the tensor's name for
    TFLite), the tensor it is, and what the model declares about it (None: not declared;
    None inside `shape`: an unknown dim)."""

    name: str
    ref: TensorRef
    dtype: np.dtype | TFDType | None = None
    shape: tuple[int | None, ...] | None = None


@dataclass
class TFGraph:
    """A whole model. `nodes` maps node names to nodes in any order (the converter sorts
    them); `format` is "graphdef", "savedmodel", "keras" or "tflite"; `source` names the
    file it came from, for error messages."""

    nodes: dict[str, TFNode]
    inputs: list[TFTensor]
    outputs: list[TFTensor]
    format: str
    source: str
