"""In-process execution: JIT the optimised module and call its entry point.

`CompiledModel.run` validates inputs against the model's declared names, dtypes
and shapes, then makes exactly one native call per inference (ctypes releases
the GIL). Weights are placed once at compile time; each thread has its own
arena, so concurrent runs on one model are safe."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
import numpy as np

from hobbit.backend.cpu.symbols import ENTRY, PROFILE_GLOBAL, STATUS_TABLE
from hobbit.target import Target
from hobbit.backend.machine import new_target_machine
from hobbit.errors import HobbitError, InputError
from hobbit.runtime.allocation import aligned_empty, allocating, check_run_bytes, copy_bytes
from hobbit.runtime.cpus import capped_threads
from hobbit.runtime.export import ArtifactFiles, NativeModel, export_library
from hobbit.runtime.layout import Layout, group, grouped_layout, per_output
from hobbit.runtime.nodearg import NodeArg, compiled_args
from hobbit.runtime.pool import load_runtime, wait_until_idle
from hobbit.runtime.recipe import reduce_with_recipe
from hobbit.runtime.runargs import check_out, pick_outputs, split_run_args
from hobbit.runtime.shipped import reduce_compiled
from hobbit.runtime.status import read_status_table, status_error

if TYPE_CHECKING:
    from hobbit.runtime.profile import KernelTime

_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_int64)
def load_runtime_libraries(target: Target) -> None:
    """Make the symbols generated code calls visible to the JIT: hobbit's thread runtime
    (hobbit.runtime.pool) and libgcc's helpers that LLVM calls for conversions the CPU has
    no instruction for (__truncdfhf2: double -> half). An unresolved one would be a jump to 0."""
    global _RUNTIME_LOADED
    load_runtime(target)
    if _RUNTIME_LOADED:
        return
    path = ctypes.util.find_library("gcc_s")
    if path is None:
        raise HobbitError("the runtime library libgcc_s was not found; install it (e.g. the libgcc-s1 package)")
    llvm.load_library_permanently(path)
    _RUNTIME_LOADED = True


_RUNTIME_LOADED = False


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    def __repr__(self) -> str:
        return f"TensorSpec({self.name!r}, shape={self.shape}, dtype={np.dtype(self.dtype).name})"

    def to_json(self) -> list:
        """As an export's manifest writes it: [name, shape, numpy type string]."""
        return [self.name, list(self.shape), np.dtype(self.dtype).str]

    @staticmethod
    def from_json(item: list) -> TensorSpec:
        """A manifest's [name, shape, dtype] (checked by hobbit.runtime.manifest) as a TensorSpec."""
        name, shape, dtype = item
        return TensorSpec(str(name), tuple(int(d) for d in shape), np.dtype(dtype))


def jit_engine(code: llvm.ModuleRef | bytes, target: Target,
               on_object: Callable[[bytes], None] | None = None) -> llvm.ExecutionEngine:
    """An MCJIT engine for an optimised module, or for object code (made on the compile's
    threads: hobbit.backend.llvm.Optimized, or from the compile cache). `on_object` receives
    the machine code the engine runs, for the cache to keep."""
    load_runtime_libraries(target)
    if isinstance(code, bytes):
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine(target, jit=True))
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        if on_object is not None:
            on_object(code)
    else:
        engine = llvm.create_mcjit_compiler(code, new_target_machine(target, jit=True))
        if on_object is not None:
            engine.set_object_cache(lambda _module, data: on_object(data))
    engine.finalize_object()
    return engine


def _retire(engine: llvm.ExecutionEngine) -> None:
    """Unmap a dropped model's machine code once no pool worker can still be running it
    (hobbit.runtime.pool: a worker leaves a model's team function after its last reference)."""
    wait_until_idle()
    engine.close()


def call_positionally(model, arrays: tuple) -> np.ndarray | list:
    """model(x, ...): inputs in declaration order; one output comes back bare."""
    if len(arrays) != len(model.inputs):
        raise InputError(f"model takes {len(model.inputs)} input(s) "
                         f"({', '.join(s.name for s in model.inputs)}), got {len(arrays)} positional")
    outs = model.run({spec.name: a for spec, a in zip(model.inputs, arrays)})
    return outs[0] if len(outs) == 1 else outs


def validate_feeds(feeds: dict[str, np.ndarray], specs: list[TensorSpec], run_bytes: int = 0) -> list[np.ndarray]:
    """run()'s feeds -> one contiguous, aligned array per declared input, in declaration order;
    a wrong name, type, dtype or shape is an InputError naming the input. `run_bytes`: what
    the run allocates besides (outputs, arena); with the inputs' copies it must fit in memory
    (hobbit.runtime.allocation), checked before anything is copied."""
    check_feed_names(feeds, [s.name for s in specs])
    for spec in specs:
        value = feeds[spec.name]
        if not isinstance(value, np.ndarray):
            raise InputError(f"input '{spec.name}' must be a numpy array, got {type(value).__name__}")
        if value.dtype != spec.dtype:
            raise InputError(f"input '{spec.name}' has dtype {value.dtype}, "
                             f"the model expects {np.dtype(spec.dtype).name}")
        if tuple(value.shape) != tuple(spec.shape):
            raise InputError(f"input '{spec.name}' has shape {tuple(value.shape)}, "
                             f"the model expects {tuple(spec.shape)}")
    values = [feeds[spec.name] for spec in specs]
    check_run_bytes(run_bytes + copy_bytes(values), ((spec.name, spec.shape) for spec in specs))
    with allocating("contiguous copies of its inputs"):
        # Generated code indexes elements from a naturally aligned base pointer.
        return [np.require(value, requirements=["C_CONTIGUOUS", "ALIGNED"]) for value in values]


def check_feed_names(feeds: object, names: list[str]) -> None:
    """run() takes a dict whose keys are exactly the model's input names."""
    if not isinstance(feeds, dict):
        raise InputError(f"run() takes a dict of input name -> numpy array, got {type(feeds).__name__}")
    unknown = [k for k in feeds if k not in names]
    missing = [n for n in names if n not in feeds]
    wrong = []
    if unknown:
        wrong.append(f"the model has no input{'s' if len(unknown) > 1 else ''} named "
                     f"{', '.join(map(repr, unknown))}")
    if missing:
        wrong.append(f"no value for input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    if wrong:
        raise InputError(f"run(): {' and '.join(wrong)}; the model's inputs are {names}")


class ModelTensors:
    """What every compiled model says about its tensors, from `inputs`, `outputs` and `layout`."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    layout: Layout | None

    @property
    def output_names(self) -> list[str]:
        """The model's output names, in the order run() returns them (a sequence is one)."""
        return [name for name, _ in self.layout] if self.layout else [s.name for s in self.outputs]

    def get_inputs(self) -> list[NodeArg]:
        """The inputs as onnxruntime's InferenceSession.get_inputs() describes them."""
        return compiled_args(self.inputs, None)

    def get_outputs(self) -> list[NodeArg]:
        """The outputs as onnxruntime's InferenceSession.get_outputs() describes them."""
        return compiled_args(self.outputs, self.layout)


class DeclaredModel:
    """A model with symbolic dims, described as the model declares its inputs and outputs
    (`_node_args`: symbolic dims named, as onnxruntime shows them), called positionally, and
    pickled as the recipe that builds it again."""

    _node_args: tuple[list[NodeArg], list[NodeArg]]

    def get_inputs(self) -> list[NodeArg]:
        """The inputs as declared, as onnxruntime's InferenceSession.get_inputs() describes them."""
        return list(self._node_args[0])

    def get_outputs(self) -> list[NodeArg]:
        """The outputs as declared (or inferred), as onnxruntime's get_outputs() describes them."""
        return list(self._node_args[1])

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        return call_positionally(self, arrays)

    def __reduce__(self) -> tuple:
        return reduce_with_recipe(self)


class CompiledModel(ModelTensors):
    # Set by hobbit.compile: how to build this model again, which is what a pickle carries.
    recipe = None

    def __init__(self, code: llvm.ModuleRef | bytes, target: Target, weights: np.ndarray, arena_bytes: int,
                 inputs: list[TensorSpec], outputs: list[TensorSpec], report: object = None,
                 on_object: Callable[[bytes], None] | None = None,
                 layout: Layout | None = None):
        self.inputs = inputs
        self.outputs = outputs
        # Model outputs that are sequences come back as lists of the next n flat outputs.
        self.layout = grouped_layout(layout)
        self._per_output = per_output(outputs, self.layout)
        self.report = report
        self._weights = weights
        self._arena_bytes = arena_bytes
        self._target = target
        made: list[bytes] = []

        def keep(data: bytes) -> None:
            made.append(data)
            if on_object is not None:
                on_object(data)
        # `keep` fills a list rather than setting an attribute of the model: the engine holds
        # it, so a `keep` that referred to the model made a cycle, and a dropped model's engine
        # and native code waited for the cyclic collector instead of going with the model.
        self._engine = jit_engine(code, target, keep)
        weakref.finalize(self, _retire, self._engine)
        # The machine code the engine runs, kept for export(): the library runs the same instructions.
        self._code: bytes | None = code if isinstance(code, bytes) else (made[-1] if made else None)
        self._entry = _ENTRY_TYPE(self._engine.get_function_address(ENTRY))
        self._status_table = read_status_table(self._engine.get_global_value_address(STATUS_TABLE))
        self._local = threading.local()

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        return call_positionally(self, arrays)

    def __reduce__(self) -> tuple:
        """Pickled as its machine code and weights (hobbit.runtime.shipped): another process
        runs it without compiling. `pickle.dumps(model.recipe)` pickles what builds it again."""
        return reduce_compiled(self)

    @property
    def threads(self) -> int:
        """The thread count the code was built for (each inference uses them all, unless this
        process caps them: hobbit.runtime.cpus.cap_threads)."""
        return getattr(self.report, "threads", None) or (self.recipe.options["threads"] if self.recipe else 1)

    def run(self, output_names: dict[str, np.ndarray] | list[str] | None = None,
            feeds: dict[str, np.ndarray] | None = None, *, out: list[np.ndarray] | None = None) -> list:
        """One inference: `run(feeds)`, or onnxruntime's `run(output_names, feeds)` where the
        names (None or [] for all) select and order the outputs. `out=` takes one array per
        returned output; the native code writes into them and they come back as the results."""
        names, feeds = split_run_args(output_names, feeds)
        arrays = validate_feeds(feeds, self.inputs, self._run_bytes())
        picked = None if names is None else pick_outputs(names, self.output_names)
        with allocating("its outputs and working memory"):
            if out is None:
                results = [np.empty(spec.shape, spec.dtype) for spec in self.outputs]
            else:
                results = self._results_into(out, picked, arrays)
            self._working_memory()
        self._call_native(arrays, results)
        grouped = results if self.layout is None else group(results, self.layout)
        return grouped if picked is None else [grouped[i] for i in picked]

    def _results_into(self, out: object, picked: list[int] | None, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The flat result buffers with the caller's arrays in place of the outputs they are for."""
        chosen = list(range(len(self._per_output))) if picked is None else picked
        names = self.output_names
        given = check_out(out, [self._per_output[i][1] for i in chosen], [names[i] for i in chosen], arrays)
        results: list[np.ndarray | None] = [None] * len(self.outputs)
        for i, array in zip(chosen, given):
            results[self._per_output[i][0]] = array
        return [np.empty(spec.shape, spec.dtype) if r is None else r for r, spec in zip(results, self.outputs)]

    def _call_native(self, arrays: list[np.ndarray], results: list[np.ndarray]) -> None:
        """One inference: the entry point over these input and output buffers; invalid data
        found by the generated code (an index out of range) raises a RunError."""
        in_table = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        out_table = (ctypes.c_void_p * max(1, len(results)))(*[r.ctypes.data for r in results])
        arena = self._working_memory()
        status = self._entry(ctypes.addressof(in_table), ctypes.addressof(out_table),
                             self._weights.ctypes.data, arena.ctypes.data, capped_threads(self.threads))
        if status:
            raise status_error(status, self._status_table, arena)

    def export(self, directory: str | os.PathLike, name: str | None = None, weights: str = "auto") -> ArtifactFiles:
        """Write lib<name>.so, lib<name>.a, <name>.h and <name>.json (and <name>.weights) into
        `directory`: this model as a library with a C API that runs without Python
        (hobbit.runtime.export), and that hobbit.load(directory) runs again in Python. `name`
        (a C identifier) prefixes the API's functions; by default it is the folder's name.
        `weights`: "auto" (inside the library up to 16 MiB, else in <name>.weights), "embed"
        or "file"."""
        return export_library(self.native_model(), directory, name, weights)

    def native_model(self) -> NativeModel:
        """What export() writes: this model's machine code, weights, sizes and check records."""
        return NativeModel(self._code, self._target, self._weights, self._arena_bytes, self.inputs,
                           self.outputs, self.layout, self._status_table, self.threads)

    def profile(self, feeds: dict[str, np.ndarray], runs: int = 20) -> list[KernelTime]:
        """Mean time per kernel over `runs` inferences (needs compile(..., profile=True))."""
        address = self._engine.get_global_value_address(PROFILE_GLOBAL) if self.report is not None else 0
        if not address:
            raise HobbitError("this model was compiled without profile=True")
        from hobbit.runtime.profile import kernel_times  # the graph's vocabulary: only profiling needs it
        self.run(feeds)
        return kernel_times(self.report.graph, address, lambda: self.run(feeds), runs)

    def _working_memory(self, touched: bool = False) -> np.ndarray:
        """This thread's arena, made on its first run (run() makes it under `allocating`);
        `touched`: with every page written once when it is made (a module with run-time dims
        reaches more of its arena at each larger size, and a first run at a new size would
        otherwise pay those page faults: 10-50 ms on Whisper-tiny's encoder)."""
        arena = getattr(self._local, "arena", None)
        if arena is None:
            arena = aligned_empty(self._arena_bytes)
            if touched:
                arena.fill(0)
            self._local.arena = arena
        return arena

    def _run_bytes(self) -> int:
        """What a run allocates besides its inputs' copies: the outputs (at most: out= may give
        some), and this thread's arena unless it has one already."""
        return self._output_bytes + (0 if self._has_working_memory() else self._arena_bytes)

    @cached_property
    def _output_bytes(self) -> int:
        """The outputs' bytes, summed once: their shapes are fixed, and run() reads this each time."""
        return sum(int(np.prod(spec.shape, dtype=object)) * np.dtype(spec.dtype).itemsize for spec in self.outputs)

    def _has_working_memory(self) -> bool:
        return getattr(self._local, "arena", None) is not None
