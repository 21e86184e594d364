"""The exported library as an engine of `hobbit bench --aot`: export, load, check, and the cost of a call.

Issue 13 asks that the exported library be as fast as the JIT, shown by the benchmark
command. For each model and thread count the JIT-compiled model is exported
(CompiledModel.export) into a private temporary folder, loaded back with hobbit.load, and
its outputs checked against the JIT's before it is timed beside the JIT and onnxruntime.

The library runs the very object code MCJIT made for the JIT (hobbit.runtime.export), so
its outputs must be the JIT's: PARITY_ATOL only absorbs nothing-but-rounding, and a
library that misses it is broken, not a slower engine, so the benchmark stops with an
ArtifactError instead of timing it.

Both hobbit engines are called through the same Python CompiledModel.run (a LoadedModel is
one: input checks, output allocation, pointer tables), then one ctypes call, the JIT's to
its entry point, the library's to <name>_run. A Python user of hobbit.load pays that per
call; C code calling the library pays only the native call. `ctypes_call_us` measures the
ctypes part on its own: a call into the library that does no work."""

from __future__ import annotations

import ctypes
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import hobbit
from hobbit.errors import ArtifactError
from hobbit.runtime.export import artifact_files
from hobbit.runtime.jit import CompiledModel
from hobbit.runtime.load import LoadedModel, bind_api

# The library and the JIT run identical instructions on identical inputs: their outputs
# were bit-identical on every zoo model (max abs diff 0.0); 1e-5 is the bound the C
# example's test holds the library to as well.
PARITY_ATOL = 1e-5
LIBRARY_NAME = "model"  # the C prefix: any model name or path, whatever its characters, exports as model_*
# A no-op ctypes call takes 0.2-0.5 µs here: 20 batches of 200 are about 2 ms of timing.
NOOP_BATCHES = 20
NOOP_CALLS = 200


@dataclass
class ExportedModel:
    """A compiled model exported into a temporary folder and loaded from it; close() removes the folder."""

    loaded: LoadedModel
    folder: tempfile.TemporaryDirectory
    export_seconds: float  # export (LLVM for the thread runtime, cc, checksums) plus hobbit.load
    name: str = LIBRARY_NAME

    def close(self) -> None:
        self.folder.cleanup()


def export_and_load(compiled: CompiledModel) -> ExportedModel:
    """Export `compiled` into a fresh private folder (0700, as tempfile makes it: hobbit.load refuses
    a folder others can write) and load it back."""
    folder = tempfile.TemporaryDirectory(prefix="hobbit-bench-aot-")
    try:
        t0 = time.perf_counter()
        compiled.export(folder.name, LIBRARY_NAME)
        loaded = hobbit.load(folder.name, LIBRARY_NAME)
        return ExportedModel(loaded, folder, time.perf_counter() - t0)
    except BaseException:
        folder.cleanup()
        raise


def check_parity(got: list[np.ndarray], jit: list[np.ndarray], names: list[str],
                 atol: float = PARITY_ATOL) -> float:
    """The largest absolute difference between the library's outputs and the JIT's; an
    ArtifactError when a shape or dtype differs, a NaN is in one but not the other, or any
    element differs by more than `atol` (equal infinities are equal)."""
    if len(got) != len(jit):
        raise ArtifactError(f"the exported library returned {len(got)} outputs, the JIT {len(jit)}")
    worst = 0.0
    for name, g, e in zip(names, got, jit):
        if g.shape != e.shape or g.dtype != e.dtype:
            raise ArtifactError(f"the exported library's output '{name}' is {g.dtype}{list(g.shape)}, "
                                f"the JIT's {e.dtype}{list(e.shape)}")
        a, b = g.astype(np.float64), e.astype(np.float64)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if (nan_a != nan_b).any():
            raise ArtifactError(f"the exported library's output '{name}' has NaN at {int((nan_a != nan_b).sum())} "
                                f"elements where the JIT's does not (or the reverse)")
        same = (a == b) | nan_a  # equal infinities too, which a - b would make NaN
        diff = np.abs(np.where(same, 0.0, a) - np.where(same, 0.0, b))
        worst = max(worst, float(diff.max(initial=0.0)))
        if worst > atol:
            raise ArtifactError(f"the exported library's output '{name}' differs from the JIT's: "
                                f"{int((diff > atol).sum())} of {diff.size} elements by more than {atol:g}, "
                                f"max abs diff {worst:.3g}; the library runs the JIT's own code, so it is broken")
    return worst


def ctypes_call_us(exported: ExportedModel, batches: int = NOOP_BATCHES, calls: int = NOOP_CALLS) -> float:
    """Median microseconds of one call into the library through ctypes that does no work
    (<name>_input_bytes(0): one converted argument, one integer back), the floor under
    every call a Python user of hobbit.load makes. Timed over batches of `calls` calls, so
    the clock's own cost is not counted."""
    library = artifact_files(Path(exported.folder.name), exported.name).library
    api = bind_api(ctypes.CDLL(os.fspath(library), mode=os.RTLD_NOW | os.RTLD_LOCAL), exported.name)
    noop = api["input_bytes"]
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            noop(0)
        per_call.append((time.perf_counter() - t0) / calls)
    return float(np.median(per_call)) * 1e6
