"""hobbit.load (hobbit.runtime.load, manifest, verified): every manifest field is checked before
use, and the library and weights used are the very files checked, even when the paths are
swapped between the check and the load. References: numpy for the model's answer."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ArtifactError
from tests.helpers import make_model, rand

X = rand(2, 4)


def _export(folder: Path, w: np.ndarray, weights: str):
    model = make_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], {"x": X}, ["y"], {"W": w})
    return hobbit.compile(model, threads=2, cache=False).export(folder, name="m", weights=weights)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Two exports of y = x @ W under one name and the same shapes, with different W: A with
    its weights in a file, B with them inside the library, and A again with embedded weights."""
    root = tmp_path_factory.mktemp("exports")
    w_a, w_b = rand(4, 3, seed=1), rand(4, 3, seed=2)
    return {"a": _export(root / "a", w_a, "file"), "a_embedded": _export(root / "ae", w_a, "embed"),
            "b": _export(root / "b", w_b, "embed"), "w_a": w_a, "w_b": w_b}


def _copy(files, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(files.library.parent, target)
    return target


def _edit(folder: Path, change) -> None:
    path = folder / "m.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(threads=-5), "field 'threads' is -5, not an integer >= 1"),
    (lambda m: m.update(threads="2"), "field 'threads' is '2', not an integer >= 1"),
    (lambda m: m.update(threads=True), "field 'threads' is True"),
    (lambda m: m.update(arena_bytes=-1), "field 'arena_bytes' is -1"),
    (lambda m: m.update(name="../m"), "field 'name' is '../m', not a C identifier"),
    (lambda m: m["library"].update(sha256="zz"), "field 'library.sha256' is 'zz'"),
    (lambda m: m["library"].update(file="/bin/sh"), "field 'library.file' is '/bin/sh', not 'libm.so'"),
    (lambda m: m["weights"].update(bytes=-3), "field 'weights.bytes' is -3"),
    (lambda m: m["weights"].update(crc32=2**40), "field 'weights.crc32' is 1099511627776, not an integer from 0"),
    (lambda m: m["weights"].update(file="../other.weights"), "field 'weights.file' is '../other.weights'"),
    (lambda m: m["target"].update(features=5), "field 'target.features' is 5, not a string"),
    (lambda m: m["inputs"][0][1].__setitem__(0, -2), r"field 'inputs\[0\] shape' is -2"),
    (lambda m: m["outputs"][0].__setitem__(2, "|O"), r"field 'outputs\[0\] dtype' is '\|O'"),
    (lambda m: m["outputs"].append("y"), r"field 'outputs\[1\]' is 'y', not \[name, shape, dtype\]"),
    (lambda m: m.update(layout=[["y", None], ["z", None]]), "not a layout of the manifest's 1 outputs"),
    (lambda m: m.update(inputs={}), "field 'inputs' is {}, not a list"),
    (lambda m: m.pop("weights"), "it lacks weights"),
])
def test_every_manifest_field_is_checked(exports, tmp_path, change, message):
    folder = _copy(exports["a"], tmp_path)
    _edit(folder, change)
    with pytest.raises(ArtifactError, match=message):
        hobbit.load(folder)


def test_a_manifest_that_is_not_an_object_is_refused(exports, tmp_path):
    folder = _copy(exports["a"], tmp_path)
    (folder / "m.json").write_text("[1, 2]")
    with pytest.raises(ArtifactError, match="manifest format None"):
        hobbit.load(folder)


def _swapping_dlopen(monkeypatch, replace: Path, by: Path) -> None:
    """Every dlopen first puts `by` in place of `replace`: what someone who can write the
    folder could do between hobbit.load's check of the library and its load."""
    real = ctypes.CDLL

    def swap_then_load(name, *args, **kwargs):
        if replace.exists() and by.exists():
            os.replace(by, replace)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", swap_then_load)


def test_a_library_swapped_after_its_check_is_not_the_one_loaded(exports, tmp_path, monkeypatch):
    folder = _copy(exports["a_embedded"], tmp_path)
    intruder = tmp_path / "libm_b.so"
    shutil.copy(exports["b"].library, intruder)
    _swapping_dlopen(monkeypatch, folder / "libm.so", intruder)
    loaded = hobbit.load(folder)
    assert not intruder.exists()  # the swap happened
    np.testing.assert_allclose(loaded.run({"x": X})[0], X @ exports["w_a"], rtol=1e-5, atol=1e-6)


def test_a_weights_file_swapped_after_its_check_is_not_the_one_mapped(exports, tmp_path, monkeypatch):
    """A file of the same size passes the size check; its crc32 would be the library's only
    defence, and crc32 is no defence against a chosen file."""
    folder = _copy(exports["a"], tmp_path)
    other = tmp_path / "other.weights"
    other.write_bytes(np.zeros(3 * 4, np.float32).tobytes())
    _swapping_dlopen(monkeypatch, folder / "m.weights", other)
    loaded = hobbit.load(folder)
    assert not other.exists()
    np.testing.assert_allclose(loaded.run({"x": X})[0], X @ exports["w_a"], rtol=1e-5, atol=1e-6)


def test_two_libraries_loaded_one_after_the_other_stay_apart(exports):
    """glibc answers dlopen of an already-loaded name with that library: each loaded file keeps
    its own descriptor (and name) for the life of the process."""
    first = hobbit.load(exports["a_embedded"].library.parent)
    second = hobbit.load(exports["b"].library.parent)
    again = hobbit.load(exports["a_embedded"].library.parent)
    np.testing.assert_allclose(first.run({"x": X})[0], X @ exports["w_a"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(second.run({"x": X})[0], X @ exports["w_b"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(again.run({"x": X})[0], X @ exports["w_a"], rtol=1e-5, atol=1e-6)
