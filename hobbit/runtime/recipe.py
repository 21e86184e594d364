"""What hobbit.compile needs to build the same model again: a model's `recipe`.

A compiled model pickles as its machine code (hobbit.runtime.shipped), which runs only with
the hobbit build and on the CPUs it was made for. Its recipe is the pickle that outlives
both: the model and compile()'s arguments, compiled again by `recipe.compile()` after
`pickle.loads(pickle.dumps(model.recipe))` (the compile cache on disk makes that a load when
it holds the entry). Models whose code cannot travel (one compiled for another CPU) pickle
as their recipe, and unpickling compiles them again.

The model travels in the form whose cache key is the one the first compile used, as its
Source's format says (Source.portable_model): for ONNX, bytes and ModelProtos as they are, a
file as its bytes (read when pickled); for TensorFlow, its path."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hobbit.errors import HobbitError

if TYPE_CHECKING:
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

    def compile(self) -> Any:
        """The model built again: hobbit.compile of the source with the same options."""
        return self.build(self.source, **self.options)

    def __reduce__(self) -> tuple:
        """A recipe travels with its model in portable form (a file as its bytes), and its two
        functions by name: a worker that unpickles a model with a recipe (a DynamicModel, a
        SpecializingModel) imports the compiler only if it compiles."""
        return Recipe, (by_name(self.build), self.portable(self.source), by_name(self.portable), self.options)

    def reduce(self) -> tuple[Callable[..., Any], tuple]:
        """What a model's `__reduce__` returns: rebuild from the model itself in place of a
        path, for another process."""
        return rebuild, (self.build, self.portable(self.source), self.options)


@dataclass(frozen=True)
class ByName:
    """A module-level function (or a class's static one) named by its module and qualified
    name, imported on the first call."""

    module: str
    qualname: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            function = getattr(function, part)
        return function(*args, **kwargs)


def by_name(function: Callable[..., Any]) -> ByName:
    return function if isinstance(function, ByName) else ByName(function.__module__, function.__qualname__)


def rebuild(build: Callable[..., Any], source: ModelInput, options: dict[str, Any]) -> Any:
    """Unpickling: compile the model again (a cache hit when the entry is on disk)."""
    return build(source, **options)


def reduce_with_recipe(model: object) -> tuple:
    """`__reduce__` of a model whose native code does not travel (code for another CPU, a model
    that kept no machine code) or that is a library's folder (hobbit.load's Reload): built
    again from the recipe it carries."""
    recipe = getattr(model, "recipe", None)
    if recipe is None:
        raise HobbitError(f"this {type(model).__name__} was not made by hobbit.compile, so it does not know "
                          f"how to build itself again and cannot be pickled or copied")
    return recipe.reduce()
