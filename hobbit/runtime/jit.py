"""In-process execution: JIT the optimised module and call its entry point.

`CompiledModel.run` validates inputs against the model's declared names, dtypes
and shapes, then makes exactly one native call per inference (ctypes releases
the GIL). Weights are placed once at compile time; each thread has its own
arena, so concurrent runs on one model are safe."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np

from hobbit.codegen.module import ENTRY
from hobbit.codegen.profile import PROFILE_GLOBAL
from hobbit.codegen.target import Target, new_target_machine
from hobbit.errors import HobbitError, InputError
from hobbit.runtime.pool import load_runtime
from hobbit.runtime.profile import KernelTime, kernel_times

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


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


def jit_engine(code: llvm.ModuleRef | bytes, target: Target,
               on_object: Callable[[bytes], None] | None = None) -> llvm.ExecutionEngine:
    """An MCJIT engine for an optimised module, or for object code from the compile cache.
    `on_object` receives the machine code MCJIT generates for a module, for the cache to keep."""
    load_runtime_libraries(target)
    if isinstance(code, bytes):
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine(target))
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    else:
        engine = llvm.create_mcjit_compiler(code, new_target_machine(target))
        if on_object is not None:
            engine.set_object_cache(lambda _module, data: on_object(data))
    engine.finalize_object()
    return engine


def call_positionally(model, arrays: tuple) -> np.ndarray | list:
    """model(x, ...): inputs in declaration order; one output comes back bare."""
    if len(arrays) != len(model.inputs):
        raise InputError(f"model takes {len(model.inputs)} input(s) "
                         f"({', '.join(s.name for s in model.inputs)}), got {len(arrays)} positional")
    outs = model.run({spec.name: a for spec, a in zip(model.inputs, arrays)})
    return outs[0] if len(outs) == 1 else outs


def check_feed_names(feeds: object, names: list[str]) -> None:
    """run() takes a dict whose keys are exactly the model's input names."""
    if not isinstance(feeds, dict):
        raise InputError(f"run() takes a dict of input name -> numpy array, got {type(feeds).__name__}")
    unknown = [k for k in feeds if k not in names]
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        raise InputError(f"inputs do not match the model: unknown {unknown}, missing {missing}; "
                         f"the model takes {names}")


def _group(flat: list[np.ndarray], layout: list[tuple[str, int | None]]) -> list:
    grouped, position = [], 0
    for _, count in layout:
        if count is None:
            grouped.append(flat[position])
            position += 1
        else:
            grouped.append(flat[position:position + count])
            position += count
    return grouped


class CompiledModel:
    def __init__(self, code: llvm.ModuleRef | bytes, target: Target, weights: np.ndarray, arena_bytes: int,
                 inputs: list[TensorSpec], outputs: list[TensorSpec], report: object = None,
                 on_object: Callable[[bytes], None] | None = None,
                 layout: list[tuple[str, int | None]] | None = None):
        self.inputs = inputs
        self.outputs = outputs
        # Model outputs that are sequences come back as lists of the next n flat outputs.
        self.layout = layout if layout is not None and any(n is not None for _, n in layout) else None
        self.report = report
        self._weights = weights
        self._arena_bytes = arena_bytes
        self._engine = jit_engine(code, target, on_object)
        self._entry = _ENTRY_TYPE(self._engine.get_function_address(ENTRY))
        self._local = threading.local()

    @property
    def output_names(self) -> list[str]:
        """The model's output names, in the order run() returns them (a sequence is one)."""
        return [name for name, _ in self.layout] if self.layout else [s.name for s in self.outputs]

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        return call_positionally(self, arrays)

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        arrays = self._validate(feeds)
        results = [np.empty(spec.shape, spec.dtype) for spec in self.outputs]
        in_table = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        out_table = (ctypes.c_void_p * max(1, len(results)))(*[r.ctypes.data for r in results])
        self._entry(ctypes.addressof(in_table), ctypes.addressof(out_table),
                    self._weights.ctypes.data, self._arena().ctypes.data)
        return results if self.layout is None else _group(results, self.layout)

    def profile(self, feeds: dict[str, np.ndarray], runs: int = 20) -> list[KernelTime]:
        """Mean time per kernel over `runs` inferences (needs compile(..., profile=True))."""
        address = self._engine.get_global_value_address(PROFILE_GLOBAL) if self.report is not None else 0
        if not address:
            raise HobbitError("this model was compiled without profile=True")
        self.run(feeds)
        return kernel_times(self.report.graph, address, lambda: self.run(feeds), runs)

    def _arena(self) -> np.ndarray:
        arena = getattr(self._local, "arena", None)
        if arena is None:
            raw = np.empty(self._arena_bytes + 64, dtype=np.uint8)
            shift = (-raw.ctypes.data) % 64
            arena = raw[shift: shift + self._arena_bytes]
            self._local.arena = arena
        return arena

    def _validate(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        check_feed_names(feeds, [s.name for s in self.inputs])
        arrays = []
        for spec in self.inputs:
            value = feeds[spec.name]
            if not isinstance(value, np.ndarray):
                raise InputError(f"input '{spec.name}' must be a numpy array, got {type(value).__name__}")
            if value.dtype != spec.dtype:
                raise InputError(f"input '{spec.name}' has dtype {value.dtype}, "
                                 f"the model expects {np.dtype(spec.dtype).name}")
            if tuple(value.shape) != tuple(spec.shape):
                raise InputError(f"input '{spec.name}' has shape {tuple(value.shape)}, "
                                 f"the model expects {tuple(spec.shape)}")
            # Generated code indexes elements from a naturally aligned base pointer.
            arrays.append(np.require(value, requirements=["C_CONTIGUOUS", "ALIGNED"]))
        return arrays
