"""hobbit: a deep-learning model compiler (ONNX -> optimised graph -> LLVM -> native code).

The compiler and runtime names load their modules on first use (PEP 562 module
__getattr__): every `import hobbit.<layer>` runs this file first, and importing
them here would make importing the graph layer import the compiler and LLVM
(tests/graph/test_no_llvm.py)."""

from importlib import import_module

from hobbit.errors import (ArtifactError, CodegenError, ConfigError, HobbitError, InputError, ModelFormatError,
                           RunError, ShapeError, TargetError, UnsupportedModelError)

from hobbit.version import __version__

_LOADED_ON_USE = {"compile": "hobbit.compiler", "load": "hobbit.runtime.load", "LoadedModel": "hobbit.runtime.load",
                  "CompiledModel": "hobbit.runtime.jit", "TensorSpec": "hobbit.runtime.jit",
                  "NodeArg": "hobbit.runtime.nodearg", "SpecializingModel": "hobbit.runtime.specialize",
                  "DynamicModel": "hobbit.runtime.dynamic",
                  "ExportOnlyModel": "hobbit.runtime.export_only", "Target": "hobbit.target",
                  "parse_target": "hobbit.target", "quantize": "hobbit.quantize"}
# Subpackages reachable as attributes after `import hobbit` (hobbit.zoo.build("resnet18"));
# hobbit.ray and hobbit.dask import their engines only then.
_SUBPACKAGES_ON_USE = ("zoo", "ray", "dask")

__all__ = ["compile", "load", "quantize", "zoo", "CompiledModel", "LoadedModel", "SpecializingModel", "DynamicModel",
           "ExportOnlyModel",
           "TensorSpec", "NodeArg", "Target", "parse_target", "HobbitError", "UnsupportedModelError", "ModelFormatError",
           "InputError", "RunError", "ShapeError", "CodegenError", "ConfigError", "TargetError", "ArtifactError",
           "__version__"]


def __getattr__(name: str) -> object:
    if name in _SUBPACKAGES_ON_USE:
        return import_module(f"hobbit.{name}")  # importing it sets the attribute
    if name not in _LOADED_ON_USE:
        raise AttributeError(f"module 'hobbit' has no attribute {name!r}")
    value = getattr(import_module(_LOADED_ON_USE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LOADED_ON_USE) | set(_SUBPACKAGES_ON_USE))
