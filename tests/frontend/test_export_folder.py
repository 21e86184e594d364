"""The wrong kind of path, named as such: a model file or an empty folder given to hobbit.load
points at hobbit.compile, and an export folder given as a model points at hobbit.load."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.cli.main import main
from hobbit.errors import ArtifactError, CorruptModelError
from hobbit.frontend.export_folder import exported_names
from tests.helpers import make_model, rand


@pytest.fixture
def export_folder(tmp_path: Path) -> Path:
    """What an export leaves for exported_names to find (the files' contents are not read)."""
    folder = tmp_path / "build"
    folder.mkdir()
    for name in ("squeezenet.json", "libsqueezenet.so", "libsqueezenet.a", "squeezenet.h", "notes.json"):
        (folder / name).write_bytes(b"")
    return folder


def test_exported_names(export_folder: Path, tmp_path: Path) -> None:
    assert exported_names(export_folder) == ["squeezenet"]
    assert exported_names(tmp_path / "missing") == [] and exported_names(export_folder / "squeezenet.h") == []


def test_load_of_a_model_file_points_at_compile(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(1, 2)}, ["y"]), path)
    with pytest.raises(ArtifactError, match=r"model.onnx is a file, not an export folder: .*hobbit.compile\("):
        hobbit.load(path)


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp, "holds no exported library"),
    (lambda tmp: tmp / "missing", "does not exist"),
])
def test_load_of_a_folder_without_an_export_points_at_compile(make, message, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match=f"{message}.*m.export\\(folder\\).*hobbit.compile\\("):
        hobbit.load(make(tmp_path))


def test_an_export_given_as_a_model_points_at_load(export_folder: Path, capsys) -> None:
    hint = f"is a library hobbit exported (libsqueezenet.so), not a model: run it in Python with " \
           f"hobbit.load('{export_folder}')"
    with pytest.raises(CorruptModelError) as info:
        hobbit.compile(str(export_folder))
    assert hint in str(info.value)
    assert main(["run", str(export_folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error:") and hint in err and "Traceback" not in err
