"""The compile cache for GPU targets (hobbit.runtime.gpu_cache): a second compile of the same
model with the same options is loaded from the cache as the GpuModel the first compile made
(emulate, run through the fake CUDA driver, export and pickling all work on it); every
option that decides the code is part of the key; damaged entries are recompiled, untrusted
ones skipped, and a disabled cache is never written. Each test gets its own cache folder."""

from __future__ import annotations

import os
import pickle
import stat
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit.backend.gpu import backend as gpu_backend
from hobbit.compiler import CompileReport
from hobbit.errors import CodegenError, MissingDependencyError
from hobbit.runtime import cache, gpu_cache
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.loaded_report import CachedReport
from hobbit.target import GPUS
from tests.helpers import make_model, rand, run_ort
from tests.runtime import fake_cuda

X = (1, 4, 10, 10)
# A hit of this model took 0.02 s here (the miss 0.3 s with ptxas); 1 s leaves room for a
# loaded machine while still failing if the hit compiled anything.
HIT_SECONDS = 1.0


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(folder))
    monkeypatch.setattr(cache, "_WARNED", set())  # each test sees its own first warning
    return folder


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    """A convolution (tensor cores under tf32) and element-wise ops after it."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Exp", ["x"], ["e"])]
    return make_model(nodes, {"x": rand(*X)}, ["r", "e"], {"w": rand(8, 4, 3, 3, seed=1), "b": rand(8, seed=2)})


def _entries(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != cache.WEIGHTS_DIR)


def _no_ptxas(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> str:
        raise MissingDependencyError("ptxas not found (test)")
    monkeypatch.setattr(gpu_backend, "ptxas_path", missing)
    monkeypatch.setattr(gpu_cache, "ptxas_path", missing)


def test_second_compile_is_a_hit_with_the_same_model(model, cache_dir: Path, capsys) -> None:
    first = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(first.report, CompileReport) and first.cubin is not None
    assert len(_entries(cache_dir)) == 1
    capsys.readouterr()
    t0 = time.perf_counter()
    hit = hobbit.compile(model, target="cuda:sm_90", cache=True, progress=True)
    seconds = time.perf_counter() - t0
    assert "loaded from the compile cache" in capsys.readouterr().err
    assert isinstance(hit, GpuModel) and isinstance(hit.report, CachedReport)
    assert seconds < HIT_SECONDS
    assert hit.target == first.target and hit.inputs == first.inputs and hit.outputs == first.outputs
    assert hit.device_code == first.device_code and hit.cubin == first.cubin
    assert hit.launches == first.launches and hit.arena_bytes == first.arena_bytes
    assert hit.resources == first.resources and hit.resources  # ptxas's report, which the export lacks
    np.testing.assert_array_equal(hit.weights, first.weights)
    assert hit.report.threads == 1 and hit.report.target == first.target
    assert hit.recipe is not None and len(_entries(cache_dir)) == 1
    feeds = {"x": rand(*X, seed=5)}
    got, want = hit.emulate(feeds), first.emulate(feeds)  # the hit rebuilds its host kernels
    for g, w, e in zip(got, want, run_ort(model, feeds)):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_a_hit_runs_exports_and_pickles(model, cache_dir: Path, tmp_path: Path, monkeypatch) -> None:
    hobbit.compile(model, target="cuda:sm_90", cache=True)
    hit = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(hit.report, CachedReport)
    # The fake driver runs the launches with the hit's own host build (rebuilt on demand);
    # the loaded and unpickled models have none, and load the same images.
    for name in ("HOBBIT_CUDA_DEVICE", "HOBBIT_CUDA_GRAPH", "HOBBIT_CUDA_SYNC"):
        monkeypatch.delenv(name, raising=False)
    fake_cuda.install(monkeypatch)
    feeds = {"x": rand(*X, seed=6)}
    expected = run_ort(model, feeds)
    for g, e in zip(hit.run(feeds), expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    hit.export(tmp_path / "out")
    loaded = hobbit.load(tmp_path / "out")
    assert loaded.device_code == hit.device_code and loaded.cubin == hit.cubin
    for g, e in zip(loaded.run(feeds), expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    again = pickle.loads(pickle.dumps(hit))
    assert isinstance(again, GpuModel) and again.device_code == hit.device_code and again.launches == hit.launches
    for g, e in zip(again.run(feeds), expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change", [{"precision": "tf32"}, {"target": "cuda:sm_80"}, {"opt_level": 2},
                                    {"input_shapes": {"x": (2, 4, 10, 10)}}])
def test_each_option_is_in_the_key(model, cache_dir: Path, change: dict) -> None:
    base = {"target": "cuda:sm_90", "precision": "fp32"}
    hobbit.compile(model, **base, cache=True)
    other = hobbit.compile(model, **{**base, **change}, cache=True)
    assert isinstance(other.report, CompileReport)
    assert len(_entries(cache_dir)) == 2
    assert isinstance(hobbit.compile(model, **{**base, **change}, cache=True).report, CachedReport)


def test_with_and_without_ptxas_are_separate_entries(model, cache_dir: Path, monkeypatch) -> None:
    """Without ptxas the model has PTX and no cubin: its entry must not serve a compile where
    ptxas is installed, nor the other way round."""
    with_cubin = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert with_cubin.cubin is not None
    _no_ptxas(monkeypatch)
    miss = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(miss.report, CompileReport) and miss.cubin is None
    hit = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(hit.report, CachedReport) and hit.cubin is None and hit.device_code == miss.device_code
    assert len(_entries(cache_dir)) == 2


def test_rocm_entries_hold_the_code_object(model, cache_dir: Path) -> None:
    first = hobbit.compile(model, target="rocm:gfx942", cache=True)
    hit = hobbit.compile(model, target="rocm:gfx942", cache=True)
    assert isinstance(hit.report, CachedReport) and hit.device_code == first.device_code
    assert sorted(p.name for p in _entries(cache_dir)[0].iterdir()) == [
        "manifest.json", "model.hsaco", "model.json", "model.weights"]
    feeds = {"x": rand(*X, seed=7)}
    for g, w in zip(hit.emulate(feeds), first.emulate(feeds)):
        np.testing.assert_array_equal(g, w)


def test_entries_are_private_whatever_the_umask(model, cache_dir: Path) -> None:
    old = os.umask(0o002)
    try:
        hobbit.compile(model, target="cuda:sm_90", cache=True)
    finally:
        os.umask(old)
    entry, = _entries(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in entry.iterdir()} == {0o600}
    assert isinstance(hobbit.compile(model, target="cuda:sm_90", cache=True).report, CachedReport)


@pytest.mark.parametrize("name", ["model.ptx", "model.cubin", "model.weights", "model.json", "manifest.json"])
def test_a_damaged_entry_is_deleted_and_compiled_again(model, cache_dir: Path, name: str) -> None:
    first = hobbit.compile(model, target="cuda:sm_90", cache=True)
    entry, = _entries(cache_dir)
    path = entry / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="is damaged.*deleted, compiling again"):
        again = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(again.report, CompileReport) and again.device_code == first.device_code
    assert isinstance(hobbit.compile(model, target="cuda:sm_90", cache=True).report, CachedReport)  # stored anew


def test_an_untrusted_entry_is_skipped_and_left_alone(model, cache_dir: Path) -> None:
    hobbit.compile(model, target="cuda:sm_90", cache=True)
    entry, = _entries(cache_dir)
    code = entry / "model.ptx"
    code.chmod(0o620)  # group-writable: another user could change the code
    with pytest.warns(UserWarning, match="not using the compile cache.*writable by group"):
        again = hobbit.compile(model, target="cuda:sm_90", cache=True)
    assert isinstance(again.report, CompileReport)
    assert code.exists() and stat.S_IMODE(code.stat().st_mode) == 0o620  # the user inspects and fixes it


def test_a_disabled_cache_writes_nothing(model, cache_dir: Path, monkeypatch) -> None:
    hobbit.compile(model, target="cuda:sm_90", cache=False)
    assert _entries(cache_dir) == []
    monkeypatch.setenv("HOBBIT_CACHE", "0")
    hobbit.compile(model, target="cuda:sm_90")
    assert _entries(cache_dir) == []
    monkeypatch.setenv("HOBBIT_CACHE", "1")
    hobbit.compile(model, target="cuda:sm_90")
    assert len(_entries(cache_dir)) == 1
    assert isinstance(hobbit.compile(model, target="cuda:sm_90", cache=False).report, CompileReport)


def test_a_host_rebuild_with_other_kernels_is_refused(model) -> None:
    """emulate() calls each launch's kernel by name in the host build: a rebuild that does
    not make the cached kernels is an error, not a call through a null address."""
    compiled = hobbit.compile(model, target="cuda:sm_90", cache=False)
    rebuild = gpu_cache.host_rebuild(lambda: (compiled.report.graph, compiled.report.plan), GPUS["sm_90"],
                                     ["not_a_kernel"])
    with pytest.raises(CodegenError, match="cache=False"):
        rebuild()


def test_emulating_a_hit_whose_model_file_changed_is_refused(model, cache_dir: Path, tmp_path: Path) -> None:
    """A hit's host kernels are rebuilt from the model when emulate() first asks: a file
    edited since the compile would give other kernels than the cached ones."""
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    hobbit.compile(str(path), target="cuda:sm_90", cache=True)
    hit = hobbit.compile(str(path), target="cuda:sm_90", cache=True)
    assert isinstance(hit.report, CachedReport)
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    edited.graph.initializer[-1].CopyFrom(numpy_helper.from_array(rand(8, seed=9), "b"))  # same shapes
    onnx.save(edited, path)
    with pytest.raises(CodegenError, match="has changed since compile"):
        hit.emulate({"x": rand(*X)})
