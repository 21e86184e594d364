"""What a worker imports to run a model it did not compile: an unpickled model, or an exported
library loaded with hobbit.load, needs hobbit's runtime and LLVM's JIT, not the compiler.

Each worker of a Ray or Dask job pays its imports before its first row, and the compiler's
were most of that: `onnx` and `ml_dtypes` (imported by the frontends, the IR builder and
the passes) took 0.9-1.1 s of a fresh worker's start on the Zen 3 VM of BENCHMARKS.md's
issue-30 section, the unpickling itself 0.3 s."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import hobbit
from tests.helpers import rand
from tests.runtime.test_api import _two_outputs
from tests.runtime.test_batching import _cnn
from tests.runtime.test_dynamic import _bias_relu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Packages and hobbit layers that only compiling needs.
COMPILE_ONLY = ("onnx", "ml_dtypes", "google.protobuf", "hobbit.compiler", "hobbit.frontend.onnx",
                "hobbit.frontend.tf", "hobbit.passes", "hobbit.ops", "hobbit.plan.gemm", "hobbit.emit.naming")

_CHILD = r"""
import pickle, sys
import numpy as np
model = pickle.load(sys.stdin.buffer)
feeds = pickle.loads(bytes.fromhex(sys.argv[1]))
out = model.run(feeds)[0]
sys.stdout.buffer.write(pickle.dumps((out, sorted(sys.modules))))
"""


def _imported_by_a_worker(payload: object, feeds: dict) -> tuple[np.ndarray, list[str]]:
    done = subprocess.run([sys.executable, "-c", _CHILD, pickle.dumps(feeds).hex()], input=pickle.dumps(payload),
                          capture_output=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "HOBBIT_CACHE": "0"})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return pickle.loads(done.stdout)


def _compile_only(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in COMPILE_ONLY)]


@pytest.mark.parametrize("kind", ["compiled", "dynamic", "batch"])
def test_an_unpickled_model_imports_nothing_only_compiling_needs(kind: str) -> None:
    """The model given as bytes (as a file travels): a DynamicModel's or SpecializingModel's
    pickle holds its model for later compiles, and a ModelProto would unpickle as one."""
    if kind == "compiled":
        m = hobbit.compile(_two_outputs().SerializeToString(), cache=False)
        feeds = {"x": rand(2, 3)}
    elif kind == "dynamic":
        m = hobbit.compile(_bias_relu().SerializeToString(), cache=False)
        feeds = {"x": rand(1, 9, 16)}
    else:
        m = hobbit.compile(_cnn().SerializeToString(), cache=False)
        m.run({"x": rand(3, 3, 6, 6)})
        feeds = {"x": rand(5, 3, 6, 6)}
    out, modules = _imported_by_a_worker(m, feeds)
    np.testing.assert_array_equal(out, m.run(feeds)[0])
    assert _compile_only(modules) == []


def test_a_loaded_library_imports_nothing_only_compiling_needs(tmp_path) -> None:
    m = hobbit.compile(_two_outputs(), cache=False)
    m.export(tmp_path / "lib")
    feeds = {"x": rand(2, 3)}
    out, modules = _imported_by_a_worker(hobbit.load(tmp_path / "lib"), feeds)
    np.testing.assert_array_equal(out, m.run(feeds)[0])
    assert _compile_only(modules) == []
