"""Compiled models pickled as their machine code (hobbit.runtime.shipped): another process runs
them with no compile, and a pickle from another hobbit, for another CPU, or damaged on its way
is refused with a hobbit error before any of its code is mapped."""

from __future__ import annotations

import copy
import dataclasses
import gc
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import hobbit
from hobbit.errors import ArtifactError, ConfigError, TargetError
from hobbit.runtime import cpus, shipped
from hobbit.runtime.shipped import ShippedCode, restore_compiled
from tests.helpers import rand, run_ort
from tests.runtime.test_api import _symbolic, _two_outputs
from tests.runtime.test_batching import _cnn
from tests.runtime.test_dynamic import _bias_relu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run in a fresh interpreter with compiling made impossible: whatever runs there ran from the pickle.
_NO_COMPILE = r"""
import pickle, sys
import numpy as np
import hobbit.compiler

def refuse(*args, **kwargs):
    raise AssertionError("the worker compiled")

hobbit.compiler._lower = refuse
model = pickle.load(sys.stdin.buffer)
feeds = pickle.loads(bytes.fromhex(sys.argv[1]))
out = [model.run(f)[0] for f in feeds]
sys.stdout.buffer.write(pickle.dumps((type(model).__name__, model.report.origin if hasattr(model.report, "origin")
                                      else None, out)))
"""


def _in_fresh_process(model: object, feeds: list[dict]) -> tuple[str, str | None, list[np.ndarray]]:
    done = subprocess.run([sys.executable, "-c", _NO_COMPILE, pickle.dumps(feeds).hex()], input=pickle.dumps(model),
                          capture_output=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "HOBBIT_CACHE": "0"})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return pickle.loads(done.stdout)


def test_a_compiled_model_runs_in_a_fresh_process_without_compiling() -> None:
    model = _two_outputs()
    m = hobbit.compile(model, threads=2, cache=False)
    feeds = [{"x": rand(2, 3, seed=s)} for s in range(3)]
    kind, origin, out = _in_fresh_process(m, feeds)
    assert kind == "CompiledModel" and origin == "a pickle of its machine code"
    for f, got in zip(feeds, out):
        np.testing.assert_array_equal(got, run_ort(model, f)[0])


def test_a_dynamic_model_runs_its_shipped_module_and_compiles_past_its_bound_from_the_recipe() -> None:
    m = hobbit.compile(_bias_relu(), cache=False)
    sizes = (1, 9, m.bounds["seq"])
    feeds = [{"x": rand(1, n, 16, seed=n)} for n in sizes]
    kind, _, out = _in_fresh_process(m, feeds)
    assert kind == "DynamicModel"
    for f, got in zip(feeds, out):
        np.testing.assert_array_equal(got, m.run(f)[0])
    again = pickle.loads(pickle.dumps(m))
    longer = {"x": rand(1, m.bounds["seq"] + 5, 16)}
    np.testing.assert_array_equal(again.run(longer)[0], m.run(longer)[0])
    assert again.bounds["seq"] > m.bounds["seq"] or again.bounds == m.bounds


def test_a_batch_model_ships_its_chunked_variant() -> None:
    """A model whose only symbolic dim is the batch runs every batch size on one variant; after
    one run that variant travels, and the worker runs any batch size with no compile."""
    model = _cnn()
    m = hobbit.compile(model, cache=False)
    m.run({"x": rand(3, 3, 6, 6)})
    feeds = [{"x": rand(n, 3, 6, 6, seed=n)} for n in (1, 5, 17)]
    kind, _, out = _in_fresh_process(m, feeds)
    assert kind == "SpecializingModel"
    for f, got in zip(feeds, out):
        np.testing.assert_allclose(got, run_ort(model, f)[0], rtol=1e-4, atol=1e-5)


def test_a_specializing_model_compiles_a_new_signature_from_its_recipe() -> None:
    m = hobbit.compile(_symbolic(), dynamic_shapes=False, cache=False)
    feeds = {"x": rand(3, 2, 3), "b": np.array([False, True])}
    again = pickle.loads(pickle.dumps(m))
    for got, want in zip(again.run(feeds), m.run(feeds)):
        np.testing.assert_array_equal(got, want)


def test_deepcopy_shares_the_weights_of_the_original() -> None:
    m = hobbit.compile(_two_outputs(), cache=False)
    other = copy.deepcopy(m)
    assert other._weights is m._weights and other is not m


def test_the_recipe_pickle_compiles_again() -> None:
    m = hobbit.compile(_two_outputs(), threads=1, cache=False)
    recipe = pickle.loads(pickle.dumps(m.recipe))
    other = recipe.compile()
    assert other.report.graph is not None  # a fresh compile's report
    np.testing.assert_array_equal(other.run({"x": rand(2, 3)})[1], -rand(2, 3))


# -- refused before anything is mapped ----------------------------------------------------
def _shipped(m: hobbit.CompiledModel) -> ShippedCode:
    restore, (cls, state) = m.__reduce__()
    assert restore is restore_compiled and cls is hobbit.CompiledModel
    return state


def test_damaged_code_is_an_artifact_error() -> None:
    state = _shipped(hobbit.compile(_two_outputs(), cache=False))
    code = bytearray(state.native.code)
    code[len(code) // 2] ^= 0xFF
    broken = dataclasses.replace(state, native=dataclasses.replace(state.native, code=bytes(code)))
    with pytest.raises(ArtifactError, match="machine code .* does not match its sha256"):
        restore_compiled(hobbit.CompiledModel, broken)


def test_damaged_weights_are_an_artifact_error() -> None:
    """(In a process that still holds the blob its digest names, that blob is used: it has the
    right bytes; so the model is dropped first.)"""
    m = hobbit.compile(_cnn(), input_shapes={"x": (1, 3, 6, 6)}, cache=False)
    state = _shipped(m)
    weights = state.native.weights.copy()
    weights[0] ^= 0xFF
    broken = dataclasses.replace(state, native=dataclasses.replace(state.native, weights=weights))
    del m, state
    gc.collect()
    with pytest.raises(ArtifactError, match="weights .* do not match their sha256"):
        restore_compiled(hobbit.CompiledModel, broken)


def test_code_from_another_hobbit_build_is_refused() -> None:
    state = dataclasses.replace(_shipped(hobbit.compile(_two_outputs(), cache=False)),
                                made_by="hobbit 0.0.1, sources 0123456789abcdef, pickle format 1")
    with pytest.raises(ArtifactError, match="made by hobbit 0.0.1.*Pickle model.recipe"):
        pickle.loads(pickle.dumps(_Wrapped(state)))


class _Wrapped:
    """Pickles as the restore of a given state, as a model would."""

    def __init__(self, state: ShippedCode):
        self.state = state

    def __reduce__(self) -> tuple:
        return restore_compiled, (hobbit.CompiledModel, self.state)


def test_code_for_cpu_features_this_host_lacks_is_a_target_error() -> None:
    state = _shipped(hobbit.compile(_two_outputs(), cache=False))
    target = state.native.target
    missing = "amx-tile" if "amx-tile" not in hobbit.target.host_target().enabled else "sme"
    elsewhere = dataclasses.replace(target, features=f"{target.features},+{missing}")
    moved = dataclasses.replace(state, native=dataclasses.replace(state.native, target=elsewhere))
    with pytest.raises(TargetError, match=f"lacks: {missing}.*model.recipe"):
        pickle.loads(pickle.dumps(_Wrapped(moved)))


def test_unaligned_weights_are_copied_to_an_aligned_blob() -> None:
    raw = np.zeros(4096 + 3, np.uint8)
    raw[3:] = np.arange(4096) % 251
    unaligned = raw[3:] if raw[3:].ctypes.data % 64 else raw[:4096]
    placed = shipped._placed(unaligned, hobbit.runtime.weights.digest(unaligned))
    assert placed.ctypes.data % 64 == 0
    np.testing.assert_array_equal(placed, unaligned)


# -- the process-wide thread cap -------------------------------------------------------------
def test_the_thread_cap_lowers_the_threads_only(monkeypatch) -> None:
    monkeypatch.setattr(cpus, "_CAP", None)
    assert cpus.capped_threads(4) == 0
    cpus.cap_threads(2)
    assert (cpus.capped_threads(4), cpus.capped_threads(2), cpus.capped_threads(1)) == (2, 0, 0)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="positive integer"):
            cpus.cap_threads(bad)


def test_a_capped_model_gives_the_same_answers(monkeypatch) -> None:
    m = hobbit.compile(_cnn(), threads=2, input_shapes={"x": (8, 3, 6, 6)}, cache=False)
    feeds = {"x": rand(8, 3, 6, 6)}
    want = m.run(feeds)[0]
    monkeypatch.setattr(cpus, "_CAP", 1)
    np.testing.assert_array_equal(m.run(feeds)[0], want)
