"""Output paths of the `hobbit` command: refused before any work with one line and exit 2,
and a write the system refuses later is an error naming the path, not a traceback."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit import conformance
from hobbit.bench import report, suite
from hobbit.cli import output as cli_output
from hobbit.cli.main import main
from hobbit.errors import OutputPathError
from tests.helpers import make_model, rand


@pytest.fixture(scope="module")
def relu(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli-output") / "relu.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(1, 4)}, ["y"]), path)
    return str(path)


@pytest.fixture
def no_work(monkeypatch):
    """Every expensive step fails the test if reached: the path must be refused first."""
    def refuse(*args, **kwargs):
        raise AssertionError("worked before checking the output path")
    monkeypatch.setattr(hobbit, "compile", refuse)
    monkeypatch.setattr(hobbit, "quantize", refuse)
    monkeypatch.setattr(suite, "run_suite", refuse)
    monkeypatch.setattr(report, "machine_info", refuse)
    monkeypatch.setattr(hobbit.zoo, "build", refuse)
    monkeypatch.setattr(conformance, "node_tests", refuse)


def _one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("argv, words", [
    (["compile", "{model}", "-o", "{tmp}/missing/x.ll"], ["-o {tmp}/missing/x.ll", "does not exist"]),
    (["compile", "{model}", "--emit", "asm", "-o", "{tmp}"], ["is a folder"]),
    (["compile", "{model}", "--emit", "lib", "-o", "{file}"], ["is a file", "writes a folder"]),
    (["compile", "{model}", "--emit", "lib", "-o", "{file}/sub"], ["is a file, not a folder"]),
    (["zoo", "squeezenet1_1", "-o", "{tmp}/missing/x.onnx"], ["does not exist"]),
    (["bench", "--model", "{model}", "--markdown", "{tmp}/missing/x.md"], ["--markdown", "does not exist"]),
    (["bench", "--model", "{model}", "--json", "{tmp}"], ["--json", "is a folder"]),
    (["quantize", "{model}", "--calibration", "{tmp}/c.npy", "-o", "{tmp}/missing/q.onnx"], ["does not exist"]),
    (["conformance", "--markdown", "{tmp}/missing/c.md"], ["--markdown", "does not exist"]),
])
def test_unwritable_output_is_refused_before_the_work(argv, words, relu, tmp_path, capsys, no_work):
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me")
    np.save(tmp_path / "c.npy", rand(2, 1, 4))
    values = {"model": relu, "tmp": str(tmp_path), "file": str(existing)}
    assert main([a.format(**values) for a in argv]) == 2
    _one_line_error(capsys, *(w.format(**values) for w in words))
    assert existing.read_text() == "keep me"


def test_zoo_default_name_needs_a_writable_working_folder(tmp_path, monkeypatch, capsys, no_work):
    (tmp_path / "squeezenet1_1.onnx").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["zoo", "squeezenet1_1"]) == 2
    _one_line_error(capsys, "squeezenet1_1.onnx: is a folder")


def test_writable_outputs_pass_the_check(tmp_path) -> None:
    cli_output.check_file(str(tmp_path / "new.ll"), "-o")
    (tmp_path / "old.ll").write_text("")
    cli_output.check_file(str(tmp_path / "old.ll"), "-o")
    cli_output.check_folder(str(tmp_path / "a" / "b"), "-o")  # made with its parents by the export
    cli_output.check_folder(str(tmp_path), "-o")


def test_a_write_refused_later_names_the_path(tmp_path) -> None:
    with pytest.raises(OutputPathError, match="cannot write .*x.md: No such file or directory"):
        with cli_output.writing(tmp_path / "x.md"):
            open(tmp_path / "gone" / "x.md", "w")
