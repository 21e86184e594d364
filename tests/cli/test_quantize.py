"""`hobbit quantize`: calibration from a stacked .npy, a folder of .npy and a stacked .npz, the
written model against onnxruntime on the float model, progress on stderr, and bad input."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from hobbit.cli.main import main
from hobbit.zoo.images import smooth_images
from tests.quantize.test_quantize import SHAPE, small_cnn


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("quantize") / "cnn.onnx"
    onnx.save(small_cnn(), path)
    return str(path)


def _error(quantized: str, model_path: str) -> float:
    x = smooth_images(4, 2, SHAPE)
    q = ort.InferenceSession(quantized, providers=["CPUExecutionProvider"])
    f = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    errors = []
    for i in range(len(x)):
        y = f.run(None, {"x": x[i:i + 1]})[0]
        errors.append(np.linalg.norm(q.run(None, {"x": x[i:i + 1]})[0] - y) / np.linalg.norm(y))
    return float(np.mean(errors))


def _calibration(kind: str, folder) -> str:
    images = smooth_images(8, 1, SHAPE)
    if kind == "npy":
        np.save(folder / "calib.npy", images)
        return str(folder / "calib.npy")
    if kind == "npz":
        np.savez(folder / "calib.npz", x=images)
        return str(folder / "calib.npz")
    (folder / "calib").mkdir()
    for i, image in enumerate(images):
        np.save(folder / "calib" / f"{i:03d}.npy", image)  # one rank short: a batch axis is added
    return str(folder / "calib")


@pytest.mark.parametrize("kind", ["npy", "dir", "npz"])
def test_quantize_writes_a_model_onnxruntime_runs_accurately(model_path: str, kind: str, tmp_path, capsys):
    out = tmp_path / "int8.onnx"
    assert main(["quantize", model_path, "--calibration", _calibration(kind, tmp_path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "calibrating: 8/8 batches" in err and f"wrote {out} (8 calibration batches" in err
    # stderr is not a terminal here (a log): plain lines, the calibration's first and last count
    assert "\r" not in err and "calibrating: 0/8 batches" in err and "calibrating: 4/8" not in err
    assert _error(str(out), model_path) < 0.03  # as tests/quantize/test_quantize.py's bound on this model


def test_method_and_per_tensor_flags(model_path: str, tmp_path, capsys):
    out = tmp_path / "int8.onnx"
    assert main(["quantize", model_path, "--calibration", _calibration("npy", tmp_path), "-o", str(out),
                 "--method", "percentile", "--percentile", "99.9", "--per-tensor"]) == 0
    assert "percentile, per-tensor weights" in capsys.readouterr().err
    scales = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
    assert scales["w1_bn_folded_scale"].shape == ()


def test_help_explains_the_calibration_layout(capsys):
    assert main(["quantize", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--calibration" in out and "stacked on axis 0" in out and ".npz" in out


@pytest.mark.parametrize("setup, message", [
    (lambda d: str(d / "missing.npy"), "does not exist"),
    (lambda d: (d / "empty").mkdir() or str(d / "empty"), "holds no .npy or .npz files"),
    (lambda d: np.save(d / "bad.npy", np.zeros((3, 3), np.float32)) or str(d / "bad.npy"),
     "must stack samples on axis 0"),
    (lambda d: np.savez(d / "bad.npz", image=np.zeros((2, *SHAPE), np.float32)) or str(d / "bad.npz"),
     "not the model's input(s) ['x']"),
    (lambda d: np.save(d / "wide.npy", np.zeros((2, 3, 8, 8), np.float32)) or str(d / "wide.npy"),
     "shape 1x3x8x8, but the model declares 1x3x16x16"),
])
def test_bad_calibration_data_is_one_error_line(model_path: str, setup, message: str, tmp_path, capsys):
    assert main(["quantize", model_path, "--calibration", setup(tmp_path), "-o", str(tmp_path / "o.onnx")]) == 2
    err = capsys.readouterr().err
    assert "hobbit: error:" in err and message in err
    assert not (tmp_path / "o.onnx").exists()


def test_an_unknown_model_is_refused(tmp_path, capsys):
    assert main(["quantize", "nosuchmodel", "--calibration", "x.npy", "-o", str(tmp_path / "o.onnx")]) == 2
    assert "neither an existing file nor a zoo model" in capsys.readouterr().err
