"""Cold compile: what the first hobbit.compile of a model costs a new user, and where it goes.

A compile in the benchmark's own process is warm in ways a user's first one is not: hobbit
and llvmlite are imported, LLVM is initialised, Python's caches hold the compiler's code. So
the model is compiled in a fresh Python process with the compile cache off (cache=False) and
HOBBIT_CACHE_DIR pointed at an empty folder, so that no cache of any level can answer. The
child reports the seconds `import hobbit` and `from hobbit import compile` took, the wall
seconds of the compile call, and the compile report's phases (CompileReport.seconds: model
import, passes with planning and weight packing, codegen of the LLVM IR, LLVM's optimisation,
and the JIT's machine code); what the phases leave of the wall time is the rest (reading the
file, hashing, marshalling)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from hobbit.bench.load import BuildOptions
from hobbit.bench.memory import model_file, run_child

# The compile report's phases, in the order they run (hobbit.compiler._lower, hobbit.runtime.finish).
PHASES = ("import", "passes", "codegen", "llvm", "jit")

_CHILD = r"""
import json, sys, time
model, threads, build = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
t0 = time.perf_counter()
import hobbit
from hobbit import compile
imported = time.perf_counter() - t0
t0 = time.perf_counter()
compiled = compile(model, threads=threads, cache=False, **build)
seconds = time.perf_counter() - t0
import numpy as np
feeds = {s.name: np.zeros(tuple(1 if d is None else d for d in s.shape), s.dtype) for s in compiled.inputs}
t0 = time.perf_counter()
compiled.run(feeds)
first_run = time.perf_counter() - t0
report = getattr(compiled, "report", None)
print(json.dumps({"seconds": seconds, "hobbit_import": imported, "first_run": first_run,
                  "phases": dict(getattr(report, "seconds", None) or {})}))
"""


@dataclass(frozen=True)
class ColdCompile:
    """One model's first compile in a fresh process: wall seconds of the compile call, of
    importing hobbit's compiler before it, the compile report's phases, and the first run (where
    a model with a symbolic batch dim, a Keras file's, is compiled)."""

    model: str
    threads: int
    seconds: float
    hobbit_import: float
    phases: dict[str, float] = field(default_factory=dict)
    first_run: float = 0.0

    @property
    def rest(self) -> float:
        """The compile's wall seconds that no phase counts."""
        return max(0.0, self.seconds - sum(self.phases.get(phase, 0.0) for phase in PHASES))


def measure(model: onnx.ModelProto | str | os.PathLike, name: str, threads: int,
            build: BuildOptions = BuildOptions()) -> ColdCompile:
    """Compile `model` once in a fresh process with every cache empty (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="hobbit-cold-") as tmp:
        path = model_file(model, Path(tmp))
        cache = Path(tmp) / "cache"
        cache.mkdir()
        env = {**os.environ, "HOBBIT_CACHE_DIR": str(cache)}
        found = run_child(_CHILD, [path, str(threads), json.dumps(build.kwargs())],
                          f"the cold compile of {name}", env=env)
    return ColdCompile(name, threads, found["seconds"], found["hobbit_import"], found["phases"], found["first_run"])
