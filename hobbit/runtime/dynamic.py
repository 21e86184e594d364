"""Models whose symbolic dims are run-time values of one compiled module.

hobbit.compile finds, for a model with symbolic input dims, the run-time extent of every
dim that follows them (hobbit.graph.extents) and compiles the model once at each
symbol's *bound*: every tensor lives in its bound shape and the kernels compute inside
the extents, which they read from the entry point's last input, the symbols' values of
this inference (hobbit.graph.extents.DIMS_INPUT). A DynamicModel checks each call
against the declarations and the bounds, hands over inputs and outputs whose data is
a prefix of their bound layout as they are (a sequence dim after a batch of 1: the usual
case) and copies the others into and out of bound-shaped buffers. A decoder's key/value
cache can instead stay in one buffer from step to step (`cache`, `run(cache=)`:
hobbit.runtime.kvcache), which the module lays out for it.

Bounds come from `dynamic_shapes={symbol: (low, high)}`; a value outside them is an
InputError naming the input and dim. A symbol given no bound starts at
DEFAULT_BOUND and grows: a call
past it compiles the module again at twice the size that call needs, so a service
that sees every length up to n compiles about log2(n / DEFAULT_BOUND) times, and
keeps one module.

`export` writes the module of the current bound as a library (hobbit.runtime.export) whose
manifest and header describe the run-time dims (hobbit.runtime.export_c.RunTimeDims); a
symbol with no declared bound runs up to the bound it has then. hobbit.load of that
library is a DynamicModel again (`loaded`), over the library in place of the JIT'd module:
the same checks, placement and results, but a load cannot compile, so its bounds are fixed
and a value past them is an InputError."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from hobbit.errors import ConfigError, InputError
from hobbit.frontend.common.dtypes import tensor_type
from hobbit.frontend.common.source import DeclaredInput
from hobbit.graph.extents import Extent
from hobbit.runtime.export import ArtifactFiles, export_library
from hobbit.runtime.export_c import RunTimeDims
from hobbit.runtime.kvcache import KVCache, cache_names
from hobbit.runtime.jit import CompiledModel, DeclaredModel, TensorSpec, check_feed_names
from hobbit.runtime.nodearg import NodeArg
from hobbit.runtime.runargs import check_bounds, check_out, pick_outputs, split_run_args
from hobbit.runtime.shipped import LaterCompiles, reduce_stateful

# A symbol with no bound is first compiled for this size. The bound sizes the arena and costs
# short inputs little time, as kernels compute only inside the extents (BERT-base at 16 tokens
# on a 512 bound: 1.01x a static compile at 1 thread; the attention products 1.13x on a 512
# bound, 1.10x on a 32 one); 64 keeps a small model's arena small and grows in a few steps.
DEFAULT_BOUND = 64


@dataclass(frozen=True)
class Build:
    """One module compiled at `bound` (the symbols' values it is sized for), the run-time
    extents of its inputs' and outputs' dims (None for a static dim), and each symbol's
    smallest size at which every run-time dim of the module is at least 1 (a strided window
    can shrink a small image to nothing: hobbit.dynamic_compile.smallest_sizes)."""

    model: CompiledModel
    bound: tuple[int, ...]
    inputs: list[tuple[Extent | None, ...]]
    outputs: list[tuple[Extent | None, ...]]
    smallest: tuple[int, ...]
    # (input, output) positions of each cache the module can keep in place: the input is laid
    # out as the output, and may be the output's buffer (hobbit.dynamic_compile.keep_caches_in_place).
    pairs: tuple[tuple[int, int], ...] = ()


Builder = Callable[[tuple[int, ...]], Build]


class DynamicModel(DeclaredModel):
    """Same interface as CompiledModel; one module for every shape inside the bounds."""

    recipe = None
    # What an InputError says the bounds are (a loaded library's cannot grow: see `loaded`).
    _bounds_are = "the bounds it was compiled for"

    def __init__(self, declared: list[DeclaredInput], symbols: list[str], ranges: list[tuple[int, int | None]],
                 build: Builder, first: Build, node_args: tuple[list[NodeArg], list[NodeArg]],
                 batch: tuple[str, tuple[int, int | None], list[DeclaredInput]] | None = None):
        """`batch`: (symbol, its range, the declarations with it) for a model that runs each
        sample on a module compiled for one (hobbit.dynamic_compile.per_sample); `declared`
        then has that dim fixed at 1."""
        self._declared = declared
        self._batch = batch
        self.symbols = symbols
        self._ranges = ranges
        self._build = build
        self._current = first
        self._lock = threading.Lock()
        self._staging = threading.local()
        self._staged(first)  # this thread's arena, ready before the first run
        self._node_args = node_args
        self.compiles = 1

    def __reduce__(self) -> tuple:
        """Pickled as its module's machine code and its recipe (hobbit.runtime.shipped)."""
        return reduce_stateful(self, ("_build", "_lock", "_staging"))

    def restored(self, later: LaterCompiles) -> None:
        """After unpickling: the parts that do not travel; a bound past the shipped one compiles
        from the recipe."""
        self._build = later.build
        self._lock = threading.Lock()
        self._staging = threading.local()
        self._staged(self._current)

    @property
    def inputs(self) -> list:
        """Each input at the bound (a cache kept in place is stored with room for its new rows:
        its shape here is still its own at the bound)."""
        build = self._current
        return [TensorSpec(spec.name, tuple(n if e is None else e.value(build.bound) for n, e in zip(spec.shape, ex)),
                           spec.dtype) for spec, ex in zip(build.model.inputs[:-1], build.inputs)]

    @property
    def outputs(self) -> list:
        return self._current.model.outputs

    @property
    def output_names(self) -> list[str]:
        return [spec.name for spec in self.outputs]

    @property
    def report(self) -> object:
        return self._current.model.report

    @property
    def bounds(self) -> dict[str, int]:
        """The size each symbol's module is compiled for now."""
        return dict(zip(self.symbols, self._current.bound))

    def export(self, directory: str | os.PathLike, name: str | None = None, weights: str = "auto") -> ArtifactFiles:
        """The module of the current bound as a library (CompiledModel.export), its last input the
        symbols' values: the manifest and the header give each symbol's bounds (the declared ones,
        else 1 to the bound compiled now) and each tensor's shape in the symbols; the library
        refuses a value outside them, and hobbit.load runs it as this model runs."""
        with self._lock:
            build = self._current
        ranges = tuple((low, bound if high is None else high) for (low, high), bound in zip(self._ranges, build.bound))
        dims = RunTimeDims(tuple(self.symbols), ranges, build.bound, tuple(build.inputs), tuple(build.outputs),
                           build.pairs)
        return export_library(replace(build.model.native_model(), dynamic=dims), directory, name, weights)

    def run(self, output_names: dict | list[str] | None = None, feeds: dict | None = None, *,
            out: list[np.ndarray] | None = None, cache: KVCache | None = None) -> list:
        """`run(feeds)` or onnxruntime's `run(output_names, feeds)`; `out=` takes one array per
        returned output, of this call's output shape, and the results are written into it.
        `cache=` (a decoding step, see `cache`): the cache gives its past inputs and takes the
        presents in place; `feeds` has the other inputs, and each present returned is a
        read-only view of the cache."""
        names, feeds = split_run_args(output_names, feeds)
        picked = None if names is None else pick_outputs(names, self.output_names)
        if cache is not None:
            if self._batch is not None:
                raise ConfigError("cache= runs a model compiled as one module; this one runs each sample of its "
                                  "batch on its own")
            if out is not None:
                raise InputError("out= and cache= do not go together: the presents are written into the cache")
            cache.belongs_to(self)
            with cache.lock:
                return self._run(picked, feeds, None, cache)
        if self._batch is not None:
            return self._per_sample(picked, feeds, out)
        return self._run(picked, feeds, out)

    @property
    def cache_inputs(self) -> list[str]:
        """The inputs a `cache` holds: those the module keeps in place (none for a model that
        runs each sample on its own)."""
        build = self._current
        return [] if self._batch is not None else [build.model.inputs[i].name for i, _ in build.pairs]

    def cache(self, pasts: dict[str, np.ndarray]) -> KVCache:
        """A key/value cache kept in place between decoding steps (hobbit.runtime.kvcache), its
        contents to start with `pasts` (copied): every input the module keeps in place, by name.
        Each `run(feeds, cache=it)` then feeds those inputs from it and grows it by the step's
        new rows, writing only those. ConfigError for a model with no such input (one read only
        by a Concat along its run-time dim into a model output: a decoder's past -> present)."""
        if self._batch is not None:
            raise ConfigError("cache() needs a model compiled as one module; this one runs each sample of its "
                              "batch on its own")
        build = self._current
        names = [spec.name for spec in build.model.inputs]
        return KVCache(self, cache_names(names, build.pairs, pasts), pasts)

    def _per_sample(self, picked: list[int] | None, feeds: dict, out: list[np.ndarray] | None) -> list:
        """Each sample through the one-sample module, the results joined along the batch dim."""
        symbol, (low, high), declared = self._batch
        check_feed_names(feeds, [d.name for d in declared])
        sizes = {d.name: feeds[d.name].shape[0] for d in declared
                 if isinstance(feeds[d.name], np.ndarray) and feeds[d.name].ndim}
        count = next(iter(sizes.values()), 1)
        for name, size in sizes.items():
            if size != count or size < low or (high is not None and size > high):
                raise InputError(f"input '{name}' has {size} in dim 0 ('{symbol}'); every input must have one "
                                 f"size there, in [{low}, {high}]")
        samples = [self._run(None, {k: v[i:i + 1] for k, v in feeds.items()}, None) for i in range(count)]
        results = [np.concatenate(parts) for parts in zip(*samples)]
        chosen = results if picked is None else [results[i] for i in picked]
        if out is None:
            return chosen
        if len(out) != len(chosen) or any(not isinstance(o, np.ndarray) or o.shape != r.shape or o.dtype != r.dtype
                                          for o, r in zip(out, chosen)):
            raise InputError(f"out= takes one array per returned output, of shapes {[r.shape for r in chosen]} "
                             f"and dtypes {[r.dtype.name for r in chosen]}")
        for o, r in zip(out, chosen):
            o[...] = r
        return list(out)

    def _run(self, picked: list[int] | None, feeds: dict, out: list[np.ndarray] | None,
             cache: KVCache | None = None) -> list:
        """One inference on the module: checks, placing, the native call, the results. A cache
        kept in place is passed as its past input and its present output at once: from `cache`,
        or, in a plain run, this thread's staging buffer of the present, the past copied there
        (where both would be staged anyway), so that the Concat does not copy the past again."""
        if cache is not None:
            feeds = cache.feeds(feeds)
        dims = self._check(feeds)
        build = self._module_for(dims)
        staging = self._staged(build)
        specs = [TensorSpec(spec.name, tuple(n if e is None else e.value(dims) for n, e in zip(spec.shape, extents)),
                            spec.dtype) for spec, extents in zip(build.model.outputs, build.outputs)]
        names = [spec.name for spec in build.model.inputs]
        kept_in, kept_out = cache.buffers(build, build.model.inputs, build.pairs, names) if cache else ({}, {})
        staged = [not _is_prefix(spec.shape, bound.shape) for spec, bound in zip(specs, build.model.outputs)]
        # A plain run's staging buffer for each past: its present's, where that one is staged too.
        keys = {} if cache else {i: ("output", o) for i, o in build.pairs if staged[o]}
        arrays = [kept_in[i] if i in kept_in else _placed(feeds[d.name], spec, staging, keys.get(i))
                  for i, (d, spec) in enumerate(zip(self._declared, build.model.inputs))]
        arrays.append(np.array(dims, dtype=np.int64))
        given: dict[int, np.ndarray] = {}
        if out is not None:
            chosen = list(range(len(specs))) if picked is None else picked
            given = dict(zip(chosen, check_out(out, [specs[i] for i in chosen], [specs[i].name for i in chosen],
                                               arrays)))
        buffers = []
        for i, (spec, bound) in enumerate(zip(specs, build.model.outputs)):
            if i in kept_out:
                buffers.append(kept_out[i])
            elif staged[i]:
                buffers.append(_staging_buffer(staging, ("output", i), bound))
            else:
                buffers.append(given[i] if i in given else np.empty(spec.shape, spec.dtype))
        build.model._call_native(arrays, buffers)
        views = cache.grown({o: specs[o].shape for o in kept_out}, build.pairs, names) if cache else {}
        results = []
        for i, (buffer, spec) in enumerate(zip(buffers, specs)):
            if i in views:
                results.append(views[i])
                continue
            if buffer.shape == spec.shape:
                results.append(buffer)
                continue
            corner = buffer[tuple(slice(0, n) for n in spec.shape)]  # a staging buffer: always copied out
            if i in given:
                given[i][...] = corner
                results.append(given[i])
            else:
                results.append(np.array(corner, order="C"))
        return results if picked is None else [results[i] for i in picked]

    def _staged(self, build: Build) -> dict:
        """This thread's bound-shaped buffers for `build`'s inputs and outputs whose data is not
        where the bound layout has it (hobbit.runtime.dynamic._placed): kept from call to call,
        since a fresh one each call costs its page faults (a 6.5 MB plane: 5 ms a call, where
        the kernel took 0.1 ms), and per thread, since calls on other threads run at once. The
        thread's arena is made here too, every page touched (CompiledModel._working_memory)."""
        local = self._staging
        if getattr(local, "build", None) is not build:
            local.build, local.buffers = build, {}
            build.model._working_memory(touched=True)
        return local.buffers

    def _module_for(self, dims: tuple[int, ...]) -> Build:
        """The current module, or one compiled again at twice what this call needs where it
        is past the bound of a symbol that has none declared."""
        with self._lock:
            current = self._current
            if all(d <= b for d, b in zip(dims, current.bound)):
                return current
            bound = tuple(b if d <= b else _power_of_two(2 * d) for d, b in zip(dims, current.bound))
            self._current = None  # the old module goes before the new one is built: one in memory
            self._current = self._build(bound)
            self.compiles += 1
            return self._current

    def _check(self, feeds: dict[str, np.ndarray]) -> tuple[int, ...]:
        """Names, dtypes, ranks, static dims and bounds as declared; one value per symbol."""
        check_feed_names(feeds, [d.name for d in self._declared])
        values: dict[str, tuple[int, str, int]] = {}
        for d in self._declared:
            value = feeds[d.name]
            if not isinstance(value, np.ndarray):
                raise InputError(f"input '{d.name}' must be a numpy array, got {type(value).__name__}")
            if value.dtype != d.dtype:
                raise InputError(f"input '{d.name}' has dtype {value.dtype}, the model expects {d.dtype.name}")
            if value.ndim != len(d.shape):
                raise InputError(f"input '{d.name}' has shape {value.shape}, the model expects rank {len(d.shape)}")
            for axis, (size, want, symbol) in enumerate(zip(value.shape, d.shape, d.symbols)):
                if want is not None:
                    if size != want:
                        raise InputError(f"input '{d.name}' has shape {value.shape}; dim {axis} is static and "
                                         f"must be {want}")
                    continue
                first = values.setdefault(symbol, (size, d.name, axis))
                if first[0] != size:
                    raise InputError(f"dim '{symbol}' is {first[0]} in input '{first[1]}' (dim {first[2]}) but "
                                     f"{size} in input '{d.name}' (dim {axis})")
                check_bounds(d.name, value.shape, axis, symbol, self._ranges[self.symbols.index(symbol)],
                             self._bounds_are)
        return tuple(values[s][0] for s in self.symbols)


def loaded(model: CompiledModel, dims: RunTimeDims) -> DynamicModel:
    """An exported library with run-time dims (hobbit.load of DynamicModel.export), `model` the
    library as a CompiledModel whose last input is the dims vector: a DynamicModel over it,
    whose bounds are the library's. Each input's run-time dim is one symbol (the manifest's
    checker makes sure), so the inputs are declared as the compiled model declared them."""
    declared, inputs = [], []
    for spec, extents in zip(model.inputs, dims.inputs):
        symbols = tuple(None if e is None else dims.symbols[e.terms[0][0]] for e in extents)
        declared.append(DeclaredInput(spec.name, tuple(n if e is None else None for n, e in zip(spec.shape, extents)),
                                      symbols, spec.dtype))
        inputs.append(NodeArg(spec.name, [n if s is None else s for n, s in zip(spec.shape, symbols)],
                              tensor_type(spec.dtype)))
    outputs = [NodeArg(spec.name, [n if e is None else e.describe(list(dims.symbols)) for n, e in
                                   zip(spec.shape, extents)], tensor_type(spec.dtype))
               for spec, extents in zip(model.outputs, dims.outputs)]

    def no_compiles(bound: tuple[int, ...]) -> Build:
        raise InputError(f"a loaded library runs the sizes it was exported for "
                         f"({', '.join(f'{s} {lo} to {hi}' for s, (lo, hi) in zip(dims.symbols, dims.ranges))}) "
                         f"and cannot compile for others: export it again from a model compiled with "
                         f"dynamic_shapes= that cover them")

    first = Build(model, dims.bound, list(dims.inputs), list(dims.outputs), tuple(lo for lo, _ in dims.ranges),
                  dims.in_place)
    dynamic = DynamicModel(declared, list(dims.symbols), list(dims.ranges), no_compiles, first, (inputs, outputs))
    dynamic._bounds_are = "the bounds of the exported library, which cannot grow: export it again for more"
    dynamic.compiles = 0
    return dynamic


def _placed(value: np.ndarray, spec: TensorSpec, staging: dict, key: tuple | None = None) -> np.ndarray:
    """An input as the module reads it: as it is where its data is a prefix of its bound layout,
    else copied into the corner of this thread's bound-shaped buffer for it (or the one `key`
    names: a present's, of the same layout)."""
    value = np.require(value, requirements=["C_CONTIGUOUS", "ALIGNED"])
    if _is_prefix(value.shape, spec.shape):
        return value
    placed = _staging_buffer(staging, key or ("input", spec.name), spec)  # past the extents is never read
    placed[tuple(slice(0, n) for n in value.shape)] = value
    return placed


def _staging_buffer(staging: dict, key: tuple, spec: TensorSpec) -> np.ndarray:
    buffer = staging.get(key)
    if buffer is None:
        buffer = staging[key] = np.empty(spec.shape, spec.dtype)
        buffer.fill(0)  # every page written once now: a first run at a larger size faults none
    return buffer


def _is_prefix(shape: tuple[int, ...], bound: tuple[int, ...]) -> bool:
    """Whether a C-contiguous array of `shape` holds its elements where an array of `bound`
    does (the generated code's strides): every dim it walks has the stride it has in `bound`."""
    return all(math.prod(shape[k + 1:]) == math.prod(bound[k + 1:])  # ints: np.prod costs 15 us a call
               for k in range(len(shape)) if shape[k] > 1)


def _power_of_two(n: int) -> int:
    return 1 << max(n - 1, 1).bit_length()

