"""hobbit: a deep-learning model compiler (ONNX -> optimised graph -> LLVM -> native code)."""

from hobbit.compiler import compile
from hobbit.errors import (ArtifactError, CodegenError, ConfigError, HobbitError, InputError, ModelFormatError,
                           RunError, ShapeError, UnsupportedModelError)
from hobbit.runtime.jit import CompiledModel, TensorSpec
from hobbit.runtime.load import LoadedModel, load
from hobbit.runtime.nodearg import NodeArg
from hobbit.runtime.specialize import SpecializingModel

__version__ = "0.1.0"

__all__ = ["compile", "load", "CompiledModel", "LoadedModel", "SpecializingModel", "TensorSpec", "NodeArg", "HobbitError",
           "UnsupportedModelError", "ModelFormatError", "InputError", "RunError", "ShapeError", "CodegenError",
           "ConfigError", "ArtifactError", "__version__"]
