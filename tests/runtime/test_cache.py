"""The compile cache: hits give the same machine code and answers as a fresh compile,
every input to the compile changes the key, damaged or tampered entries are recompiled,
a cache another user could write is never loaded, and writes are atomic and private.
Each test gets its own cache folder."""

from __future__ import annotations

import gc
import json
import os
import re
import stat
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.target import host_target
from hobbit.compiler import CompileReport
from hobbit.frontend.formats import open_source
from hobbit.runtime import cache
from hobbit.runtime.cache import CachedReport
from tests.helpers import make_model, rand, run_ort
from tests.runtime.test_trust import NOBODY, give_away


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(folder))
    monkeypatch.setattr(cache, "_WARNED", set())  # each test sees its own first warning
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
    return cache.compile_key(open_source(model), host_target(), {**base, **options})


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


def test_hit_report_has_the_documented_fields(cache_dir: Path) -> None:
    """report.threads, .weights and .target are documented for every compiled model, and a
    compile from the second on is a cache hit by default: the hit must carry them too."""
    first = hobbit.compile(_model(), threads=3, cache=True)
    hit = hobbit.compile(_model(), threads=3, cache=True)
    assert isinstance(hit.report, CachedReport)
    assert hit.report.threads == first.report.threads == 3
    assert hit.report.target == first.report.target == host_target()
    assert np.array_equal(hit.report.weights, first.report.weights) and hit.report.weights.nbytes > 0
    assert hit.report.llvm_ir is None and first.report.llvm_ir is None


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
    monkeypatch.setattr(cache, "source_hash", lambda: "an edited compiler")
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
    gc.collect()  # the first compile's weights go, so the blob is read from its file
    with pytest.warns(UserWarning, match="is damaged .*deleted, compiling again"):
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
    assert err.endswith("\n") and "\r" not in err  # captured, not a terminal: plain lines


def _conv(shape: tuple) -> onnx.ModelProto:
    """The Conv of _model() with a symbolic batch and height: one variant per signature."""
    model = _model()
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_param, dims[2].dim_param = shape
    return model


def test_variants_share_one_weights_file_and_one_array(cache_dir: Path) -> None:
    """The Conv compiled for three heights stores three entries but one weights blob; loaded
    back in a new process's way (a fresh compile), the variants hold one array. (Its height
    could be a run-time dim of one module: dynamic_shapes=False asks for a variant per shape.)"""
    model = _conv(("N", "H"))
    compiled = hobbit.compile(model, cache=True, threads=1, dynamic_shapes=False)
    for h in (8, 10, 12):
        x = rand(1, 4, h, 12, seed=h)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert len(_entries(cache_dir)) == 3
    assert len(_weights_files(cache_dir)) == 1
    again = hobbit.compile(model, cache=True, threads=1, dynamic_shapes=False)
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


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_cache_is_created_private_whatever_the_umask(cache_dir: Path) -> None:
    """A umask of 0002 would make files group-writable, and the next load refuse them."""
    old = os.umask(0o002)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            hobbit.compile(_model(), cache=True)
            assert isinstance(hobbit.compile(_model(), cache=True).report, CachedReport)
    finally:
        os.umask(old)
    (entry,) = _entries(cache_dir)
    assert _mode(cache_dir) == _mode(entry) == _mode(cache_dir / cache.WEIGHTS_DIR) == 0o700
    files = [entry / cache.CODE_FILE, entry / cache.MANIFEST_FILE] + _weights_files(cache_dir)
    assert [_mode(f) for f in files] == [0o600] * 3


def _check_skipped(model: onnx.ModelProto, match: str | None) -> hobbit.CompiledModel:
    """A compile that does not load the entry, gives onnxruntime's answer, and warns once
    with a second compile (`match`), or not at all when this process warned before (None).
    Returns the second compile: the caller says whether it may be a hit."""
    x = rand(1, 4, 12, 12, seed=5)
    gc.collect()  # the entry's first compile goes, so its weights are read from the file
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = hobbit.compile(model, cache=True)
        again = hobbit.compile(model, cache=True)
    messages = [str(w.message) for w in caught]
    if match is None:
        assert messages == []
    else:
        assert len(messages) == 1 and re.search(match, messages[0]), messages
        assert messages[0].startswith("hobbit: not using the compile cache: ")
    assert isinstance(compiled.report, CompileReport)
    for m in (compiled, again):
        np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    return again


@pytest.mark.parametrize("mode", [0o770, 0o777])
def test_a_cache_folder_others_can_write_is_skipped(cache_dir: Path, mode: int) -> None:
    hobbit.compile(_model(), cache=True)
    os.chmod(cache_dir, mode)
    again = _check_skipped(_model(), rf"compile cache folder {cache_dir} is writable by group or others "
                                     rf"\(mode 0{mode:o}\).*chmod 700 {cache_dir}")
    assert isinstance(again.report, CompileReport)
    again = _check_skipped(_model(scale=2.0), None)  # a new model: not stored either, no second warning
    assert isinstance(again.report, CompileReport)
    assert len(_entries(cache_dir)) == 1


def test_a_cache_folder_owned_by_another_user_is_skipped(cache_dir: Path) -> None:
    hobbit.compile(_model(), cache=True)
    give_away(cache_dir)
    again = _check_skipped(_model(), rf"compile cache folder {cache_dir} is owned by uid {NOBODY}.*chown")
    assert isinstance(again.report, CompileReport)


@pytest.mark.parametrize("what", ["entry", "code", "manifest", "weights folder", "weights"])
def test_an_entry_or_file_others_can_write_is_skipped_and_left_alone(cache_dir: Path, what: str) -> None:
    """The entry stays for the user to inspect, so every compile of it compiles again; the
    second compile may hit when the bad path is the weights: then the blob comes from memory
    (hashed when compiled), or the store replaced the bad file with a private one."""
    hobbit.compile(_model(), cache=True)
    (entry,) = _entries(cache_dir)
    path = {"entry": entry, "code": entry / cache.CODE_FILE, "manifest": entry / cache.MANIFEST_FILE,
            "weights folder": cache_dir / cache.WEIGHTS_DIR, "weights": _weights_files(cache_dir)[0]}[what]
    os.chmod(path, _mode(path) | stat.S_IWOTH)
    again = _check_skipped(_model(), rf"{path} is writable by group or others")
    assert path.exists()
    assert isinstance(again.report, CompileReport) or what.startswith("weights")


def test_an_entry_owned_by_another_user_is_skipped(cache_dir: Path) -> None:
    hobbit.compile(_model(), cache=True)
    (entry,) = _entries(cache_dir)
    give_away(entry / cache.CODE_FILE)
    again = _check_skipped(_model(), rf"{entry / cache.CODE_FILE} is owned by uid {NOBODY}")
    assert isinstance(again.report, CompileReport)


@pytest.mark.parametrize("name", ["code", "weights"])
def test_a_file_not_matching_its_manifest_sha256_is_never_loaded(cache_dir: Path, name: str) -> None:
    """Tampering, not damage: the manifest is self-consistent (its own hash redone), the file
    is intact, but the sha256 recorded for the code, or naming the weights, is another's."""
    model, x = _model(), rand(1, 4, 12, 12, seed=9)
    expected = hobbit.compile(model, cache=True).run({"x": x})[0]
    (entry,) = _entries(cache_dir)
    doc = json.loads((entry / cache.MANIFEST_FILE).read_text())
    body = doc["body"]
    if name == "code":
        body["files"][cache.CODE_FILE]["sha256"] = "0" * 64
    else:
        (blob,) = _weights_files(cache_dir)
        forged = "f" * 64
        blob.rename(blob.with_name(f"{forged}.bin"))
        body["weights"] = forged
    doc["sha256"] = cache._sha256(cache._canonical(body))
    (entry / cache.MANIFEST_FILE).write_text(json.dumps(doc))
    gc.collect()
    with pytest.warns(UserWarning, match="does not match"):
        again = hobbit.compile(model, cache=True)
    assert isinstance(again.report, CompileReport)
    assert np.array_equal(again.run({"x": x})[0], expected)
    assert isinstance(hobbit.compile(model, cache=True).report, CachedReport)
