"""Models whose shapes are only known at run time: one native variant per signature.

hobbit emits every static dimension as a constant, which is what lets LLVM
unroll and vectorise each kernel for its exact shape. A model with a symbolic
dimension (batch, sequence) or with a small input that decides shapes (a
Reshape target, Slice starts, reduction axes fed as an input) is therefore
compiled once per distinct *signature*: the concrete input shapes plus the
values of those shape-deciding inputs. `compile()` returns a SpecializingModel
that checks each call against the model's declarations, compiles a variant the
first time a signature is seen (each variant goes through the on-disk compile
cache too) and keeps the most recent variants in memory.

A model whose only symbolic dim is one batch dim 0 shared by every input, and whose
graph keeps samples independent (hobbit/ops/separable.py), needs one variant only:
the one compiled for the first call's batch size (at most MAX_CHUNK) then serves every
batch size in chunks (hobbit/runtime/batching.py), so a new batch size compiles nothing
and memory stays flat."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hobbit.errors import HobbitError, InputError, InputValuesNeeded, ShapeError
from hobbit.frontend.common.source import DeclaredInput
from hobbit.graph.ir import Graph
from hobbit.graph.separation import Separation
from hobbit.runtime.batching import ChunkedModel
from hobbit.runtime.jit import CompiledModel, DeclaredModel, check_feed_names
from hobbit.runtime.nodearg import NodeArg
from hobbit.runtime.runargs import check_bounds, pick_outputs, split_run_args
from hobbit.runtime.shipped import LaterCompiles, reduce_stateful

# The batch a separable model's one variant is compiled for: the first call's, capped. The cap
# bounds what a small call pays for padding (at most 7 padded samples) and the activations the
# arena holds (8 samples; ResNet-18 at batch 256 would hold ~1.5 GB). Measured on ResNet-18 at
# 2 threads: 8 samples as 8 chunks of a batch-1 variant take 302 ms, as one batch-8 run 264 ms.
MAX_CHUNK = 8

# Shape-deciding inputs are small by nature (axes, shapes, scales); a large one would
# mean recompiling for every new batch of data, so it is refused instead.
MAX_VALUE_INPUT_ELEMENTS = 4096


@dataclass(frozen=True)
class SymbolicSpec:
    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype | None
    sequence: bool = False

    def __repr__(self) -> str:
        kind = "SequenceSpec" if self.sequence else "TensorSpec"
        dtype = np.dtype(self.dtype).name if self.dtype is not None else None
        return f"{kind}({self.name!r}, shape={self.shape}, dtype={dtype})"


Builder = Callable[[dict[str, tuple[int, ...]], dict[str, np.ndarray]], CompiledModel]
# The model imported (no passes, no code) with these input shapes, for the batch analysis.
Importer = Callable[[dict[str, tuple[int, ...]]], Graph]


class SpecializingModel(DeclaredModel):
    """Same interface as CompiledModel; compiles one variant per input signature."""

    # Set by hobbit.compile: how to build this model again, which is what a pickle carries.
    recipe = None

    def __init__(self, declared: list[DeclaredInput], outputs: list[SymbolicSpec], value_inputs: list[str],
                 build: Builder, max_variants: int = 8, importer: Importer | None = None, *,
                 node_args: tuple[list[NodeArg], list[NodeArg]], ranges: dict[str, tuple[int, int]] | None = None):
        """`ranges`: bounds of symbols (hobbit.compile's dynamic_shapes= or input_shapes= ranges),
        checked on each call as a DynamicModel checks them."""
        self.inputs = [SymbolicSpec(d.name, d.shape, d.dtype, d.sequence) for d in declared]
        self.outputs = outputs
        self.value_inputs = list(value_inputs)
        self._declared = declared
        self._build = build
        self._max_variants = max_variants
        self._variants: collections.OrderedDict[tuple, CompiledModel] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._importer = importer
        self._separation: Separation | None = None
        self._chunked: ChunkedModel | None = None
        self._node_args = node_args
        self._ranges = dict(ranges or {})

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.outputs]

    def __reduce__(self) -> tuple:
        """Pickled as the machine code of its variants (and chunking) and its recipe
        (hobbit.runtime.shipped)."""
        return reduce_stateful(self, ("_build", "_importer", "_lock"))

    def restored(self, later: LaterCompiles) -> None:
        """After unpickling: a new input signature compiles from the recipe."""
        self._build = later.build
        self._importer = later.import_graph
        self._lock = threading.Lock()

    @property
    def separation(self) -> Separation | None:
        """Whether one variant serves every batch size, and if not why (None until the first run,
        or when the model has other symbolic dims)."""
        return self._separation

    @property
    def report(self) -> object:
        """The report of the most recently compiled variant (None before the first run)."""
        return next(reversed(self._variants.values())).report if self._variants else None

    def export(self, directory: object, name: str | None = None, weights: str = "auto") -> None:
        """A library runs one fixed-shape build (hobbit.runtime.export), so this model cannot be
        exported until compile(..., input_shapes=...) sizes its symbolic dims."""
        symbolic = [f"{d.name}{_show(d)}" for d in self._declared if None in d.shape]
        if self.value_inputs:
            raise ShapeError(f"cannot export this model: its shapes depend on the values of input(s) "
                             f"{self.value_inputs}, and a library runs one fixed-shape build")
        example = ", ".join(f"'{d.name}': ({', '.join(str(s or 1) for s in d.shape)})"
                            for d in self._declared if None in d.shape)
        raise ShapeError(f"cannot export a model with symbolic input dims {', '.join(symbolic)}: a library runs "
                         f"one fixed shape; compile it with input_shapes={{{example}}} (your sizes) and export that")

    def run(self, output_names: dict | list[str] | None = None, feeds: dict | None = None, *,
            out: list[np.ndarray] | None = None) -> list:
        """`run(feeds)` or onnxruntime's `run(output_names, feeds)`, and `out=`, as
        CompiledModel.run; output names are checked before any variant compiles."""
        names, feeds = split_run_args(output_names, feeds)
        picked = None if names is None else pick_outputs(names, self.output_names)
        variant = self.variant(feeds)
        flat = {}
        for d in self._declared:
            if d.name in self.value_inputs:
                continue
            if d.sequence:
                flat.update({f"{d.name}[{i}]": item for i, item in enumerate(feeds[d.name])})
            else:
                flat[d.name] = feeds[d.name]
        if out is not None:
            return variant.run(names, flat, out=out)
        results = variant.run(flat)
        return results if picked is None else [results[i] for i in picked]

    def variant(self, feeds: dict[str, np.ndarray]) -> CompiledModel | ChunkedModel:
        """The compiled variant for these inputs' signature, compiled on first use; for a
        batch-separable model, the first variant in chunks, whatever the batch size.

        With concrete shapes, the import may find further inputs whose values decide
        shapes; those join the signature and the variant is built again."""
        shapes = self._check(feeds)
        with self._lock:
            if self._chunked is None and self._separation is None and self._batch_only():
                self._chunked = self._chunk(shapes)
            if self._chunked is not None:
                return self._chunked
            while True:
                values = {name: np.array(feeds[name]) for name in self.value_inputs}
                key = (tuple(sorted(shapes.items())),
                       tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(values.items())))
                model = self._variants.get(key)
                if model is not None:
                    self._variants.move_to_end(key)
                    return model
                try:
                    model = self._build({k: v for k, v in shapes.items() if k not in values}, values)
                except InputValuesNeeded as exc:
                    new = [n for n in exc.inputs if n not in self.value_inputs]
                    if not new:
                        raise
                    self.value_inputs.extend(new)
                    self._check(feeds)
                    continue
                self._variants[key] = model
                while len(self._variants) > self._max_variants:
                    self._variants.popitem(last=False)
                return model

    def _batch_only(self) -> bool:
        """One symbol, on dim 0 of every input, and no other symbolic dim or shape-deciding input."""
        if self._importer is None or self.value_inputs or not self._declared:
            return False
        if any(d.sequence or not d.symbols or d.symbols[0] is None or any(d.symbols[1:]) for d in self._declared):
            return False
        return len({d.symbols[0] for d in self._declared}) == 1

    def _chunk(self, shapes: dict[str, tuple[int, ...]]) -> ChunkedModel | None:
        """The one variant for every batch size, when hobbit/ops/separable.py finds the model
        separable at the chunk size and the next one; None (and the reason) otherwise."""
        from hobbit.ops.separable import separation  # the op registry: only a compile needs it
        batch = min(next(iter(shapes.values()))[0], MAX_CHUNK)
        if batch == 0:
            return None
        sized = {name: (batch,) + shape[1:] for name, shape in shapes.items()}
        try:
            small = self._importer(sized)
            large = self._importer({name: (batch + 1,) + shape[1:] for name, shape in shapes.items()})
        except HobbitError as exc:
            self._separation = Separation(None, f"the model does not import at batch {batch} and {batch + 1}: {exc}")
            return None
        if any(count is not None for _, count in small.output_layout):
            self._separation = Separation(None, "the model has sequence or data-dependent outputs")
            return None
        self._separation = separation(small, batch, large, batch + 1)
        if not self._separation.separable:
            return None
        model = self._build(sized, {})
        self._variants[(tuple(sorted(sized.items())), ())] = model
        return ChunkedModel(model, batch, self._separation.rows)

    def _check(self, feeds: dict[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
        """Names, dtypes, ranks and static dims as declared; one size per symbolic dim name."""
        check_feed_names(feeds, [d.name for d in self._declared])
        bound: dict[str, tuple[int, str]] = {}
        shapes = {}
        for d in self._declared:
            value = feeds[d.name]
            if d.sequence:
                shapes[d.name] = _sequence_shapes(d, value)
                continue
            if not isinstance(value, np.ndarray):
                raise InputError(f"input '{d.name}' must be a numpy array, got {type(value).__name__}")
            if value.dtype != d.dtype:
                raise InputError(f"input '{d.name}' has dtype {value.dtype}, the model expects {d.dtype.name}")
            if value.ndim != len(d.shape):
                raise InputError(f"input '{d.name}' has shape {value.shape}, the model expects rank "
                                 f"{len(d.shape)} {_show(d)}")
            for axis, (size, want, symbol) in enumerate(zip(value.shape, d.shape, d.symbols)):
                if want is not None and size != want:
                    raise InputError(f"input '{d.name}' has shape {value.shape}; dim {axis} must be {want} "
                                     f"{_show(d)}")
                if symbol is not None:
                    first = bound.setdefault(symbol, (size, d.name))
                    if first[0] != size:
                        raise InputError(f"dim '{symbol}' is {first[0]} in input '{first[1]}' but {size} "
                                         f"in input '{d.name}'")
                    if symbol in self._ranges:
                        check_bounds(d.name, value.shape, axis, symbol, self._ranges[symbol],
                                     "the bounds it was compiled for")
            if d.name in self.value_inputs and value.size > MAX_VALUE_INPUT_ELEMENTS:
                raise InputError(f"input '{d.name}' decides shapes in the model, so hobbit compiles for its "
                                 f"values; it has {value.size} elements, more than {MAX_VALUE_INPUT_ELEMENTS}")
            shapes[d.name] = tuple(int(s) for s in value.shape)
        return shapes


def _sequence_shapes(d: DeclaredInput, value: object) -> tuple[tuple[int, ...], ...]:
    """A sequence input is a list of arrays of the declared dtype; its signature is their shapes."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, np.ndarray) for v in value):
        raise InputError(f"input '{d.name}' is a sequence: pass a list of numpy arrays")
    wrong = [str(v.dtype) for v in value if v.dtype != d.dtype]
    if wrong:
        raise InputError(f"input '{d.name}' holds {wrong[0]} arrays, the model expects {d.dtype.name}")
    return tuple(tuple(int(s) for s in v.shape) for v in value)


def _show(d: DeclaredInput) -> str:
    dims = ", ".join(str(s) if s is not None else (sym or "?") for s, sym in zip(d.shape, d.symbols))
    return f"({dims})"
