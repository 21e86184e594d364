"""The model source (hobbit.frontend.common.source, .formats): which format a path is, what a
TensorFlow model declares, and the compile cache key of a model made of several files.
Reading and converting each format is tested in tests/frontend/onnx/, tf/ and tflite/."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from hobbit.errors import CorruptModelError, InputError, MissingDependencyError, UnsupportedModelError
from hobbit.frontend.formats import detect_format, open_source
from hobbit.frontend.onnx.source import OnnxSource
from hobbit.frontend.tf.graph import TensorRef, TFDType, TFGraph, TFTensor
from hobbit.frontend.tf.keras import read_keras
from hobbit.frontend.tf.source import TFSource
from hobbit.runtime.cache import compile_key
from hobbit.target import host_target

TFLITE_HEAD = b"\x1c\x00\x00\x00TFL3"


def _saved_model_dir(root: Path) -> Path:
    folder = root / "model"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    (folder / "variables" / "variables.index").write_bytes(b"index")
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(b"data")
    return folder


def test_the_format_is_read_from_the_path(tmp_path: Path) -> None:
    folder = _saved_model_dir(tmp_path)
    assert detect_format(folder) == "savedmodel"
    assert detect_format(folder / "saved_model.pb") == "savedmodel"
    for name, fmt in [("m.keras", "keras"), ("m.h5", "keras"), ("m.tflite", "tflite"), ("m.pb", "graphdef"),
                      ("m.onnx", "onnx")]:
        (tmp_path / name).write_bytes(b"\x00" * 16)
        assert detect_format(tmp_path / name) == fmt, name
    (tmp_path / "flatbuffer.bin").write_bytes(TFLITE_HEAD + b"\x00" * 8)
    assert detect_format(tmp_path / "flatbuffer.bin") == "tflite"
    assert detect_format(TFLITE_HEAD) == "tflite"
    assert detect_format(b"\x08\x07") == "onnx"
    assert detect_format(helper.make_model(helper.make_graph([], "g", [], []))) == "onnx"


def test_a_folder_that_is_not_a_saved_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(CorruptModelError, match=r"is a directory but not a SavedModel: it has no saved_model.pb"):
        detect_format(tmp_path)


def test_a_signature_for_a_model_without_signatures_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="an ONNX model has no signatures"):
        open_source(b"\x08\x07", signature="serving_default")
    (tmp_path / "m.pb").write_bytes(b"")
    source = open_source(tmp_path / "m.pb", signature="serving_default")
    with pytest.raises(InputError, match="a graphdef model has no signatures"):
        source.tf_graph()


def test_keras_files_without_tensorflow_say_what_to_install(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "m.keras"
    path.write_bytes(b"PK")
    monkeypatch.setitem(sys.modules, "keras", None)  # what `import keras` sees when it is not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'hobbit\[tf\]'"):
        read_keras(path)
    with pytest.raises(CorruptModelError, match="does not exist"):
        read_keras(tmp_path / "missing.keras")


def _tf_source(inputs: list[TFTensor]) -> TFSource:
    source = TFSource("unused.pb", "graphdef")
    output = TFTensor("y", TensorRef("y"), np.dtype(np.float32), (None, 10))
    source._graph = TFGraph({}, inputs, [output], "graphdef", "unused.pb")
    return source


def test_what_a_tensorflow_model_declares() -> None:
    source = _tf_source([TFTensor("image", TensorRef("image"), np.dtype(np.float32), (None, 8, 8, 3))])
    (spec,) = source.declared_inputs()
    assert (spec.name, spec.shape, spec.symbols, spec.dtype) == ("image", (None, 8, 8, 3),
                                                                 ("image:0", None, None, None), np.float32)
    (fixed,) = source.declared_inputs({"image": (2, 8, 8, 3)})
    assert fixed.shape == (2, 8, 8, 3)
    assert source.declared_outputs() == [("y", (None, 10), np.float32)]
    with pytest.raises(InputError, match=r"input_shapes names \['x'\], which are not model inputs"):
        source.declared_inputs({"x": (1,)})
    with pytest.raises(InputError, match="the model declares rank 4"):
        source.declared_inputs({"image": (8, 8, 3)})


def test_an_input_of_an_unsupported_type_is_named() -> None:
    source = _tf_source([TFTensor("text", TensorRef("text"), TFDType(7, "DT_STRING"), (None,))])
    with pytest.raises(UnsupportedModelError, match="text.*DT_STRING is not supported"):
        source.declared_inputs()
    shapeless = _tf_source([TFTensor("x", TensorRef("x"), np.dtype(np.float32), None)])
    assert shapeless.shapeless_inputs() == ["x"]


def test_the_cache_key_covers_every_file_of_a_saved_model(tmp_path: Path) -> None:
    folder = _saved_model_dir(tmp_path)
    target = host_target()

    def key(signature: str | None = None) -> str:
        return compile_key(open_source(folder, signature), target, {})

    first = key()
    assert key() == first
    assert key("other") != first
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(b"changed")
    assert key() != first
    onnx_bytes = helper.make_model(helper.make_graph([], "g", [], [])).SerializeToString()
    (tmp_path / "m.onnx").write_bytes(onnx_bytes)  # a file keys as its bytes: a pickle carries them
    assert compile_key(OnnxSource(onnx_bytes), target, {}) == compile_key(OnnxSource(tmp_path / "m.onnx"), target, {})
