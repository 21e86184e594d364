"""Exception classes. Every error hobbit raises derives from HobbitError so a
caller can catch the whole family, and each names what went wrong and where."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


class HobbitError(Exception):
    """Base class of every error hobbit raises on purpose."""


class ConfigError(HobbitError):
    """A setting hobbit cannot use: an argument such as compile(threads=...) or an
    environment variable such as HOBBIT_NUM_THREADS; the message names it and its value."""


class OutputPathError(ConfigError):
    """A file or folder the `hobbit` command was asked to write cannot be written there: its
    folder is missing, it is a folder where a file goes (or the reverse), or the system
    refused the write; the message names the flag, the path and the reason."""


class TargetError(ConfigError):
    """A target hobbit cannot use: an unknown CPU, architecture or feature, or code built for
    a CPU this host is not, asked to run in-process (export it and run it there)."""


class ModelFormatError(HobbitError):
    """The model file is not a valid model: bad bytes, broken graph, dangling names."""


class CorruptModelError(ModelFormatError):
    """A model file cannot be read as the format its path says: truncated or foreign bytes,
    or a part of it missing (a SavedModel without its variables); the message names the
    file and the format expected."""


class GraphStructureError(ModelFormatError):
    """The model's graph is not a graph hobbit can order: a cycle, or an input that names a
    node or output that does not exist; the message names the node."""


class InvalidAttributeError(ModelFormatError):
    """A node's attribute (or the constant input that carries it in newer opsets) breaks its
    operator's spec: a stride of 0, an axis outside the input's rank, an axis named twice;
    the message names the node, its operator, the attribute and the values allowed."""


class MissingDependencyError(HobbitError):
    """A feature needs an optional package that is not installed; the message says which extra
    to install (e.g. reading .keras files needs TensorFlow: pip install 'hobbit[tf]')."""


def import_optional(module: str, missing: Callable[[ImportError], HobbitError]) -> Any:
    """The optional dependency `module`, imported; where it cannot be, the error missing(exc)
    (saying what to install and what works without it) is raised from the ImportError."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(exc) from exc


class SignatureError(HobbitError):
    """The SavedModel has no signature of the requested name; the message lists those it has."""


@dataclass(frozen=True)
class UnsupportedItem:
    op_type: str
    domain: str
    opset: int
    node: str
    reason: str

    def __str__(self) -> str:
        domain = self.domain or "ai.onnx"
        opset = f", opset {self.opset}" if self.opset else ""  # 0: a graph op, past the frontend
        return f"{self.op_type} (domain {domain}{opset}) at node '{self.node}': {self.reason}"


class UnsupportedModelError(HobbitError):
    """One or more constructs of the model are not supported; all are listed at once."""

    def __init__(self, items: list[UnsupportedItem]):
        self.items = list(items)
        lines = "\n  ".join(str(i) for i in self.items)
        super().__init__(f"{len(self.items)} unsupported construct(s) in the model:\n  {lines}")


class InputValuesNeeded(UnsupportedModelError):
    """The model can only be compiled once the values of some (small) graph inputs are known."""

    def __init__(self, items: list[UnsupportedItem], inputs: list[str]):
        super().__init__(items)
        self.inputs = list(inputs)


class SymbolicInputShape(HobbitError):
    """An input has a symbolic dim and no size for it was given (compile() then specialises per call)."""


class Unsupported(Exception):
    """Raised by a converter for an attribute value or input form it does not handle. Never
    reaches a caller: the importer collects each one into an UnsupportedModelError (or an
    InputValuesNeeded) naming the node."""


class NeedsInputValues(Unsupported):
    """A value that must be known at compile time is computed from graph inputs."""

    def __init__(self, message: str, inputs: set[str]):
        super().__init__(message)
        self.inputs = set(inputs)


class ShapeError(HobbitError):
    """Shapes or types of a node's inputs do not fit the op."""


class InputError(HobbitError):
    """Inputs given to CompiledModel.run do not match the model's declared inputs."""


class CodegenError(HobbitError):
    """A kernel could not be generated for a node (a bug or an unsupported variant)."""


class RaceError(CodegenError):
    """The GPU grid emulation found a data race in a kernel: two threads of a block touched one
    shared-memory element, at least one writing, with no barrier between them (hobbit.backend.gpu.
    racecheck); the message names the kernel, the phase, the array, the element and the threads."""


class RunError(HobbitError):
    """An inference found invalid data at run time, e.g. an index outside its axis; the message
    names the node, its op and the offending value. The outputs of that run are not returned."""


class ArtifactError(HobbitError):
    """An exported library (hobbit.load) cannot be used here: a file is missing, damaged or from
    another export, the folder is not private to this user, or it was built for a CPU this
    host is not; the message names the file or the missing CPU features."""


class CalibrationError(InputError):
    """hobbit.quantize's calibration data cannot be used: no batches, a batch whose input names,
    dtypes or shapes do not match the model's, or NaN/Inf in it; the message names the batch
    and the input."""


class QuantizeError(HobbitError):
    """hobbit.quantize cannot quantize this model: nothing in it is quantizable, or its opset is
    too old for per-axis (De)QuantizeLinear; the message names the model and what to do."""


class DeviceError(HobbitError):
    """A GPU model cannot run here: no GPU, no driver, no cuda-python, or the device refused
    a call; the message says which, and what still works without it (export, emulate)."""
