"""External-data weights of ONNX models given as bytes or a ModelProto (hobbit.frontend.onnx.external_data):
never read from the current directory; read from external_data_dir when the caller names it, under
onnx's rule that the files stay inside that folder. References: onnxruntime on the model saved
beside its data, and numpy."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit.errors import ConfigError, ModelFormatError
from tests.helpers import make_model, rand, run_ort

X = rand(2, 4)
W = rand(4, 3, seed=1)


def _external(array: np.ndarray, name: str, location: str) -> onnx.TensorProto:
    """A tensor that names `location` for its data instead of holding it."""
    tensor = numpy_helper.from_array(array, name)
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return tensor


def _model(location: str) -> onnx.ModelProto:
    """y = x @ W, W in the external file `location`."""
    model = make_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], {"x": X}, ["y"])
    model.graph.initializer.append(_external(W, "W", location))
    return model


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A model folder holding W's bytes as w.bin; the current directory is elsewhere and
    holds a 'secret.bin' of the size W needs."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "w.bin").write_bytes(W.tobytes())
    return models


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "secret.bin").write_bytes(np.full(W.shape, 7, np.float32).tobytes())
    monkeypatch.chdir(cwd)
    return cwd


@pytest.mark.parametrize("form", ["bytes", "proto"])
def test_external_data_is_never_read_from_the_current_directory(elsewhere, form):
    """The leak: location='secret.bin' made the weights that file's bytes."""
    model = _model("secret.bin")
    given = model.SerializeToString() if form == "bytes" else model
    with pytest.raises(ModelFormatError, match=r"initializer 'W' keeps its data in the external file 'secret\.bin'"
                                               r".*no folder to read it from: pass external_data_dir="):
        hobbit.compile(given, cache=False)


def test_a_tensor_attribute_with_external_data_is_refused_too(elsewhere):
    model = make_model([helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(W, "c")),
                        helper.make_node("MatMul", ["x", "c"], ["y"], name="mm")], {"x": X}, ["y"])
    model.graph.node[0].attribute[0].t.CopyFrom(_external(W, "c", "secret.bin"))
    with pytest.raises(ModelFormatError, match=r"tensor attribute 'value' of node 'const' keeps its data in the "
                                               r"external file 'secret\.bin'"):
        hobbit.compile(model.SerializeToString(), cache=False)


@pytest.mark.parametrize("form", ["bytes", "proto"])
def test_a_named_folder_is_read_and_matches_onnxruntime(folder, elsewhere, form):
    model = _model("w.bin")
    path = folder / "model.onnx"
    onnx.save(model, str(path))  # onnxruntime reads w.bin beside it
    given = model.SerializeToString() if form == "bytes" else model
    compiled = hobbit.compile(given, external_data_dir=folder, cache=False)
    want = run_ort(onnx.load(str(path)), {"x": X})[0]
    np.testing.assert_allclose(compiled.run({"x": X})[0], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(want, X @ W, rtol=1e-6, atol=1e-6)
    assert model.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL  # the caller's proto untouched


@pytest.mark.parametrize("location, problem", [
    ("../cwd/secret.bin", "points outside the directory"),
    ("{cwd}/secret.bin", "should be a relative path"),
    ("link.bin", "symbolic link"),
    ("absent.bin", "not regular file"),
])
def test_the_named_folder_keeps_external_data_inside_it(folder, elsewhere, location, problem):
    (folder / "link.bin").symlink_to(elsewhere / "secret.bin")
    model = _model(location.format(cwd=elsewhere))
    with pytest.raises(ModelFormatError, match=rf"initializer 'W': its external data .* cannot be read from "
                                               rf"external_data_dir .*{problem}"):
        hobbit.compile(model.SerializeToString(), external_data_dir=folder, cache=False)


def test_external_data_dir_is_only_for_bytes_and_protos(folder, tmp_path):
    path = folder / "model.onnx"
    onnx.save(_model("w.bin"), str(path))
    with pytest.raises(ConfigError, match="reads its external data from its own folder"):
        hobbit.compile(str(path), external_data_dir=folder, cache=False)
    with pytest.raises(ConfigError, match="not for a graphdef model"):
        hobbit.compile(str(tmp_path / "frozen.pb"), external_data_dir=folder, cache=False)


def test_a_pickled_model_takes_its_external_data_dir_along(folder, elsewhere):
    compiled = hobbit.compile(_model("w.bin").SerializeToString(), external_data_dir=os.path.relpath(folder),
                              cache=False)
    os.chdir(folder.parent)  # a relative folder was made absolute when compiled
    again = pickle.loads(pickle.dumps(compiled))
    np.testing.assert_allclose(again.run({"x": X})[0], X @ W, rtol=1e-6, atol=1e-6)


def test_the_cache_key_covers_the_external_files(folder, elsewhere):
    """Changed weights in the named folder must not load the code and weights cached for the old ones."""
    model = _model("w.bin").SerializeToString()
    first = hobbit.compile(model, external_data_dir=folder, cache=True)
    np.testing.assert_allclose(first.run({"x": X})[0], X @ W, rtol=1e-6, atol=1e-6)
    (folder / "w.bin").write_bytes((2 * W).tobytes())
    second = hobbit.compile(model, external_data_dir=folder, cache=True)
    np.testing.assert_allclose(second.run({"x": X})[0], X @ (2 * W), rtol=1e-6, atol=1e-6)


def test_a_tensor_left_external_is_never_read_by_the_importer(elsewhere):
    """The importer's last guard: whatever load_model did not fill in is refused, not read from
    the current directory as onnx's to_array would."""
    from hobbit.frontend.onnx.importer import _tensor_array
    with pytest.raises(ModelFormatError, match="initializer 'W' keeps its data in an external file that was not "
                                               "loaded"):
        _tensor_array(_external(W, "W", "secret.bin"))
