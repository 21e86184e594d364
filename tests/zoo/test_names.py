"""Zoo models by name from Python, as on the command line: `hobbit.zoo` after `import hobbit`,
and hobbit.compile("NAME") compiling the zoo model unless a file of that name exists."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit import zoo
from tests.helpers import make_model, rand, run_ort


def _scaled(factor: float) -> onnx.ModelProto:
    return make_model([helper.make_node("Mul", ["x", "k"], ["y"])], {"x": rand(2, 3)}, ["y"],
                      {"k": np.full((2, 3), factor, np.float32)})


@pytest.fixture
def tiny_zoo(monkeypatch) -> str:
    """A zoo entry that compiles in a moment (the real ones are whole CNNs)."""
    monkeypatch.setitem(zoo.MODELS, "tiny_scale", lambda: _scaled(3.0))
    return "tiny_scale"


def test_zoo_is_an_attribute_after_import_hobbit() -> None:
    done = subprocess.run([sys.executable, "-c", "import hobbit; print(sorted(hobbit.zoo.MODELS)[0], "
                                                 "'zoo' in dir(hobbit))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [sorted(zoo.MODELS)[0], "True"]


def test_compile_takes_a_zoo_name(tiny_zoo) -> None:
    x = rand(2, 3, seed=4)
    got = hobbit.compile(tiny_zoo, cache=False).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(_scaled(3.0), {"x": x})[0], rtol=1e-6, atol=0)


def test_an_existing_path_wins_over_a_zoo_name(tiny_zoo, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(_scaled(5.0), tiny_zoo)  # a file named like the zoo model, in the current folder
    x = rand(2, 3, seed=4)
    got = hobbit.compile(tiny_zoo, cache=False).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(_scaled(5.0), {"x": x})[0], rtol=1e-6, atol=0)
