"""The compile cache: hits give the same machine code and answers as a fresh compile,
every input to the compile changes the key, damaged entries are recompiled, and
writes are atomic. Each test gets its own cache folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.target import host_target
from hobbit.compiler import CompileReport
from hobbit.runtime import cache
from hobbit.runtime.cache import CachedReport
from tests.helpers import make_model, rand, run_ort


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(folder))
    return folder


def _model(scale: float = 1.0) -> onnx.ModelProto:
    x = rand(1, 4, 12, 12)
    inits = {"w": rand(8, 4, 3, 3, seed=1) * scale, "b": rand(8, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits)


def _entries(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != cache.WEIGHTS_DIR)


def _weights_files(folder: Path) -> list[Path]:
    return sorted((folder / cache.WEIGHTS_DIR).iterdir()) if (folder / cache.WEIGHTS_DIR).exists() else []


def _key(model, **options) -> str:
    base = {"threads": 1, "opt_level": 3, "passes": None, "input_shapes": {}}
    return cache.compile_key(model, host_target(), {**base, **options})


def test_hit_is_bit_identical_to_a_fresh_compile(cache_dir: Path) -> None:
    model, x = _model(), rand(1, 4, 12, 12, seed=7)
    first = hobbit.compile(model, cache=True)
    assert isinstance(first.report, CompileReport)
    assert len(_entries(cache_dir)) == 1
    hit = hobbit.compile(model, cache=True)
    assert isinstance(hit.report, CachedReport)
    fresh = hobbit.compile(model, cache=False).run({"x": x})[0]
    got = hit.run({"x": x})[0]
    assert np.array_equal(got, fresh)
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert [s.name for s in hit.inputs] == ["x"] and hit.outputs == first.outputs
    with pytest.raises(AttributeError, match="cache=False"):
        _ = hit.report.graph


def test_hit_weights_are_aligned_and_read_only(cache_dir: Path) -> None:
    """Loaded weights are shared with every variant holding the same bytes, so nothing may
    write them; once the last holder goes, the next hit maps the file afresh."""
    hobbit.compile(_model(), cache=True)
    hit = hobbit.compile(_model(), cache=True)
    weights = hit._weights
    assert weights.ctypes.data % 64 == 0
    before = hit.run({"x": rand(1, 4, 12, 12)})[0]
    with pytest.raises(ValueError, match="read-only"):
        weights[:] = 0
    assert hobbit.compile(_model(), cache=True)._weights is weights
    del hit, weights
    assert np.array_equal(hobbit.compile(_model(), cache=True).run({"x": rand(1, 4, 12, 12)})[0], before)


def test_every_compile_input_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    base = _key(model)
    assert _key(_model()) == base  # same content, new object
    others = [_key(model, threads=2), _key(model, opt_level=2), _key(model, passes=["dce"]),
              _key(model, input_shapes={"x": [1, 4, 12, 12]}), _key(_model(scale=2.0)),
              _key(model.SerializeToString())]
    renamed = _model()
    renamed.graph.node[1].op_type = "Sigmoid"
    others.append(_key(renamed))
    monkeypatch.setattr(cache, "_source_hash", lambda: "an edited compiler")
    others.append(_key(model))
    assert len(set(others + [base])) == len(others) + 1


def test_bytes_and_path_sources_hit(cache_dir: Path, tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for source in (model.SerializeToString(), str(path), path):
        hobbit.compile(source, cache=True)
        assert isinstance(hobbit.compile(source, cache=True).report, CachedReport)


def test_external_data_files_are_part_of_the_key(tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    before = _key(path)
    data = tmp_path / "m.data"
    raw = bytearray(data.read_bytes())
    raw[0] ^= 1
    data.write_bytes(bytes(raw))
    assert _key(path) != before
    assert _key(tmp_path / "missing.onnx") is None


@pytest.mark.parametrize("damage", ["flip weights", "flip code", "truncate code", "garbage manifest",
                                    "delete weights", "empty manifest"])
def test_damaged_entries_are_recompiled(cache_dir: Path, damage: str) -> None:
    model, x = _model(), rand(1, 4, 12, 12, seed=3)
    expected = hobbit.compile(model, cache=True).run({"x": x})[0]
    (entry,) = _entries(cache_dir)
    kind, name = damage.split()
    if name == "weights":
        (target,) = _weights_files(cache_dir)
    else:
        target = entry / {"code": cache.CODE_FILE, "manifest": cache.MANIFEST_FILE}[name]
    if kind == "flip":
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0x40
        target.write_bytes(bytes(raw))
    elif kind == "truncate":
        target.write_bytes(target.read_bytes()[:100])
    elif kind == "garbage":
        target.write_bytes(b"\xff{not json")
    elif kind == "empty":
        target.write_bytes(b"")
    else:
        target.unlink()
    again = hobbit.compile(model, cache=True)
    assert isinstance(again.report, CompileReport)
    assert np.array_equal(again.run({"x": x})[0], expected)
    third = hobbit.compile(model, cache=True)
    assert isinstance(third.report, CachedReport)
    assert np.array_equal(third.run({"x": x})[0], expected)


def test_cache_off_writes_nothing(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hobbit.compile(_model(), cache=False)
    monkeypatch.setenv("HOBBIT_CACHE", "0")
    hobbit.compile(_model())
    assert not cache_dir.exists()
    monkeypatch.setenv("HOBBIT_CACHE", "1")
    hobbit.compile(_model())
    assert len(_entries(cache_dir)) == 1


def test_profiled_builds_bypass_the_cache(cache_dir: Path) -> None:
    hobbit.compile(_model(), cache=True, profile=True)
    assert not _entries(cache_dir)


def test_writes_leave_no_temporary_folders(cache_dir: Path) -> None:
    hobbit.compile(_model(), cache=True)
    hobbit.compile(_model(scale=3.0), cache=True)
    assert [p.name for p in cache_dir.iterdir() if p.name.startswith(".")] == []
    assert len(_entries(cache_dir)) == 2


def test_an_unwritable_cache_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(blocker))
    x = rand(1, 4, 12, 12)
    with pytest.warns(UserWarning, match="cannot write the compile cache"):
        compiled = hobbit.compile(_model(), cache=True)
    np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(_model(), {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_least_recently_used_entries_are_evicted(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOBBIT_CACHE_MAX_BYTES", "1")
    hobbit.compile(_model(), cache=True)
    hobbit.compile(_model(scale=2.0), cache=True)
    assert len(_entries(cache_dir)) == 1
    assert isinstance(hobbit.compile(_model(scale=2.0), cache=True).report, CachedReport)


def test_progress_shows_stages_only_when_asked(capsys: pytest.CaptureFixture) -> None:
    hobbit.compile(_model(), cache=False)
    assert capsys.readouterr().err == ""
    hobbit.compile(_model(), cache=False, progress=True)
    err = capsys.readouterr().err
    for stage in ("import", "passes", "codegen 1/1 kernels", "LLVM optimise", "JIT", "compiled in"):
        assert stage in err, err
    assert err.endswith("\n") and "\r" in err


def _conv(shape: tuple) -> onnx.ModelProto:
    """The Conv of _model() with a symbolic batch and height: one variant per signature."""
    model = _model()
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_param, dims[2].dim_param = shape
    return model


def test_variants_share_one_weights_file_and_one_array(cache_dir: Path) -> None:
    """The Conv compiled for three heights stores three entries but one weights blob; loaded
    back in a new process's way (a fresh compile), the variants hold one array."""
    model = _conv(("N", "H"))
    compiled = hobbit.compile(model, cache=True, threads=1)
    for h in (8, 10, 12):
        x = rand(1, 4, h, 12, seed=h)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert len(_entries(cache_dir)) == 3
    assert len(_weights_files(cache_dir)) == 1
    again = hobbit.compile(model, cache=True, threads=1)
    variants = [again.variant({"x": rand(1, 4, h, 12)}) for h in (8, 10, 12)]
    assert all(isinstance(v.report, CachedReport) for v in variants)
    assert len({id(v._weights) for v in variants + [compiled.variant({"x": rand(1, 4, 8, 12)})]}) == 1


def test_evicting_the_last_entry_of_a_weights_file_deletes_it(cache_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hobbit.compile(_model(), cache=True)
    monkeypatch.setenv("HOBBIT_CACHE_MAX_BYTES", "1")
    hobbit.compile(_model(scale=2.0), cache=True)
    (entry,) = _entries(cache_dir)
    (blob,) = _weights_files(cache_dir)
    assert blob.stem == json.loads((entry / cache.MANIFEST_FILE).read_text())["body"]["weights"]
