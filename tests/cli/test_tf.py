"""The `hobbit` command on TensorFlow models: every format by path, --signature, and the
benchmark beside TensorFlow. The readers and converters are tested in tests/frontend/tf/."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from hobbit.cli.main import main  # noqa: E402

IMAGE = (1, 8, 8, 3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, keras.Model]:
    """One small Keras model (Conv -> BatchNorm -> ReLU -> pooling -> Dense) in all four formats."""
    keras.utils.set_random_seed(0)
    image = keras.Input(IMAGE[1:], name="image")
    x = keras.layers.Conv2D(4, 3, padding="same")(image)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(image, keras.layers.Dense(3, name="logits")(x))
    root = tmp_path_factory.mktemp("cli-tf")
    model.export(root / "saved", verbose=False)
    model.save(root / "model.keras")
    (root / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    function = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec(IMAGE, tf.float32, name="image"))
    frozen = convert_variables_to_constants_v2(function).graph.as_graph_def()
    (root / "frozen.pb").write_bytes(frozen.SerializeToString())
    return root, model


@pytest.mark.parametrize("name", ["saved", "model.keras", "model.tflite", "frozen.pb"])
def test_run_takes_every_format(name, saved, tmp_path, capsys) -> None:
    root, model = saved
    x = np.random.default_rng(1).random(IMAGE, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    input_name = "image"
    argv = ["run", str(root / name), "--input", f"{input_name}={tmp_path / 'x.npy'}", "--runs", "1"]
    if name in ("saved", "model.keras", "model.tflite"):
        argv += ["--input-shape", f"{input_name}={'x'.join(map(str, IMAGE))}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    expected = model(x).numpy().reshape(-1)
    assert f"{expected[0]:.6g}"[:5] in out, out  # the printed summary starts with TensorFlow's first logit


def test_inspect_and_emit_graph_of_a_saved_model(saved, capsys) -> None:
    root, _ = saved
    assert main(["inspect", str(root / "saved"), "--input-shape", "image=1x8x8x3"]) == 0
    assert "Conv" in capsys.readouterr().out
    assert main(["compile", str(root / "frozen.pb"), "--emit", "graph"]) == 0
    graph = capsys.readouterr().out
    assert "Conv[" in graph and graph.count("= Transpose[") == 1  # the one at the input; pooling leaves NC


def test_a_missing_signature_is_named_with_those_that_exist(saved, capsys) -> None:
    root, _ = saved
    assert main(["inspect", str(root / "saved"), "--signature", "nope", "--input-shape", "image=1x8x8x3"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "serving_default" in err


def test_bench_times_a_tf_model_beside_tensorflow(saved, capsys) -> None:
    root, _ = saved
    assert main(["bench", "--model", str(root / "frozen.pb"), "--runs", "3", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "| hobbit / TensorFlow |" in out and "graphdef" in out
    assert main(["bench", "--model", str(root / "frozen.pb"), "--threads", "1,2"]) == 2
    assert "one thread count per run" in capsys.readouterr().err
