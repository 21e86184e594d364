"""A decoding model's key/value cache, kept in one buffer per tensor from step to step.

A decoding step takes its cache as inputs (the pasts, [.., past, ..]) and gives it back one
position longer (the presents, present = Concat(past, new)). Fed back through run(), every
token pays for the whole cache three times: the runtime copies each past into the module's
bound-shaped layout, the Concat copies it into the present, and the present is copied out to
an array of its own. The new rows are all that changed.

The compiler lays such a past out as its present (hobbit.dynamic_compile.keep_caches_in_place:
the past's storage is the present's bound), so one buffer can be both. A KVCache holds that
buffer for each pair, and DynamicModel.run(feeds, cache=) passes it as the past and as the
present: the Concat sees its first part already in place and writes only the new rows, and
nothing is copied in or out. What a step returns for a present is a read-only view of the
cache at that step's length; later steps only write past it, so a view keeps its values.

A cache belongs to one model and holds one sequence: use one per sequence (model.cache again
for another, e.g. from cache[name] to branch), and one step at a time (a lock makes steps on
one cache from several threads take turns). An exported library keeps the pairs in its
manifest: hobbit.load of it has cache() too, and its header tells a C caller that a present
may be its past's buffer (a buffer of each, as a plain run() has, works as well)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from hobbit.errors import ConfigError, InputError


class KVCache:
    """The pasts of a decoding model, in place (see the module docstring). Made by
    DynamicModel.cache(pasts); `cache[name]` is a past's contents now, a read-only view."""

    def __init__(self, owner: object, names: list[str], pasts: dict[str, np.ndarray]):
        self._owner = owner
        self._names = list(names)
        self._views = {name: np.array(pasts[name]) for name in names}  # the contents now (shape: this length)
        self._buffers: dict[str, np.ndarray] = {}  # name -> the buffer, laid out for `_build`
        self._build: object = None
        self.lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        """The past inputs the cache holds (the model's inputs that it feeds)."""
        return list(self._names)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._views[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"KVCache({', '.join(f'{n}: {list(self._views[n].shape)}' for n in self._names)})"

    def belongs_to(self, owner: object) -> None:
        if owner is not self._owner:
            raise InputError("this cache was made by another model's cache(); each model runs its own")

    def feeds(self, feeds: dict) -> dict:
        """The step's feeds with the cache's pasts added (checked as any input is)."""
        given = [name for name in self._names if name in feeds]
        if given:
            raise InputError(f"feeds give {given}, which the cache holds: with cache=, feed the other inputs only")
        return {**feeds, **self._views}

    def buffers(self, build: object, specs: list, pairs: tuple[tuple[int, int], ...],
                names: list[str]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Each past's buffer by input position and by its present's output position, laid out
        for `build` (specs: its inputs' TensorSpecs; `pairs`: its (input, output) positions of
        caches kept in place; `names`: its inputs' names): made, or moved there once where the
        module is another (a bound grown), from the contents now."""
        by_name = {names[i]: (i, o) for i, o in pairs}
        missing = [name for name in self._names if name not in by_name]
        if missing:
            raise ConfigError(f"the model's module keeps no cache in place for {missing}")
        if self._build is not build:
            for name in self._names:
                spec = specs[by_name[name][0]]
                buffer = np.zeros(spec.shape, spec.dtype)  # every page written once now
                buffer[tuple(slice(0, n) for n in self._views[name].shape)] = self._views[name]
                self._buffers[name] = buffer
            self._build = build
        inputs = {by_name[name][0]: self._buffers[name] for name in self._names}
        outputs = {by_name[name][1]: self._buffers[name] for name in self._names}
        return inputs, outputs

    def grown(self, outputs: dict[int, tuple[int, ...]], pairs: tuple[tuple[int, int], ...],
              names: list[str]) -> dict[int, np.ndarray]:
        """After a step: each present (by output position, its shape in this step) as the cache's
        contents now, a read-only view of its buffer, returned as that output."""
        by_output = {o: names[i] for i, o in pairs}
        views = {}
        for position, shape in outputs.items():
            name = by_output[position]
            view = self._buffers[name][tuple(slice(0, n) for n in shape)]
            view.flags.writeable = False
            self._views[name] = views[position] = view
        return views


def cache_names(names: list[str], pairs: tuple[tuple[int, int], ...], pasts: dict) -> list[str]:
    """The past inputs a cache is made from, checked: `pasts` gives exactly the inputs the
    module keeps in place (`names`: its inputs' names), as numpy arrays."""
    kept = [names[i] for i, _ in pairs]
    if not kept:
        raise ConfigError("this model keeps no cache in place: no input is read only by a Concat along its "
                          "run-time dim, as its first part, into a model output (a decoder's past -> present)")
    if not isinstance(pasts, dict) or set(pasts) != set(kept):
        given = sorted(pasts) if isinstance(pasts, dict) else type(pasts).__name__
        raise InputError(f"cache() takes the starting contents of every cache input, {kept}; got {given}")
    for name in kept:
        if not isinstance(pasts[name], np.ndarray):
            raise InputError(f"cache input '{name}' must be a numpy array, got {type(pasts[name]).__name__}")
    return kept
