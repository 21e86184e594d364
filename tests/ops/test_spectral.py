"""DFT, STFT and MelWeightMatrix against numpy's FFT, onnxruntime and the ONNX reference,
with runtime signals: forward/inverse, one-sided, padding/truncation by dft_length, axes."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import hobbit
from tests.helpers import assert_matches_ort, make_model, rand


def _complex(x: np.ndarray) -> np.ndarray:
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


def _dft(x, opset=20, length=None, axis=1, **attrs):
    feeds = {"x": x}
    inits = {"axis": np.array(axis, np.int64)} if opset >= 20 else {}
    inputs = ["x", "n" if length is not None else ""] + (["axis"] if opset >= 20 else [])
    if length is not None:
        inits["n"] = np.array(length, np.int64)
    if opset < 20:
        attrs["axis"] = axis
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return hobbit.compile(make_model([node], feeds, ["y"], inits, opset=opset)).run(feeds)[0]


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("length", [None, 6, 13])
@pytest.mark.parametrize("axis", [1, 2, -2])
def test_forward_dft_with_padding_and_truncation(channels, length, axis):
    x = rand(2, 9, 7, channels)
    got = _dft(x, length=length, axis=axis)
    expected = _pairs(np.fft.fft(_complex(x.astype(np.float64)), n=length, axis=axis % 4))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [None, 7])
def test_inverse_and_one_sided_transforms(length):
    x = rand(3, 8, 2)
    got = _dft(x, opset=17, length=length, inverse=1)
    np.testing.assert_allclose(got, _pairs(np.fft.ifft(_complex(x.astype(np.float64)), n=length, axis=1)),
                               rtol=1e-5, atol=1e-6)
    real = rand(3, 8, 1)
    got = _dft(real, opset=17, length=length, onesided=1)
    np.testing.assert_allclose(got, _pairs(np.fft.rfft(real[..., 0].astype(np.float64), n=length, axis=1)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [None, 9, 10])
def test_inverse_of_one_sided_spectrum_is_real(length):
    spectrum = rand(2, 6, 2)
    got = _dft(spectrum, opset=20, length=length, inverse=1, onesided=1)
    expected = np.fft.irfft(_complex(spectrum.astype(np.float64)), n=length, axis=1)[..., None]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("onesided", [0, 1])
def test_stft_matches_onnxruntime(window, onesided):
    feeds = {"signal": rand(2, 64, 1)}
    inits = {"step": np.array(6, np.int64), "length": np.array(16, np.int64)}
    inputs = ["signal", "step", "", "length"]
    if window:
        feeds["window"] = np.hanning(16).astype(np.float32)
        inputs = ["signal", "step", "window"]
        del inits["length"]
    node = helper.make_node("STFT", inputs, ["y"], onesided=onesided)
    assert_matches_ort(make_model([node], feeds, ["y"], inits, opset=17), feeds, rtol=1e-4, atol=1e-4)


def test_mel_weight_matrix_matches_the_reference():
    names = ["bins", "n", "rate", "low", "high"]
    values = [np.array(10, np.int32), np.array(64, np.int32), np.array(16000, np.int32),
              np.array(20.0, np.float32), np.array(7000.0, np.float32)]
    node = helper.make_node("MelWeightMatrix", names, ["y"])
    model = make_model([node], {}, ["y"], dict(zip(names, values)), opset=17)
    expected = ReferenceEvaluator(model).run(None, {})[0]
    got = hobbit.compile(model).run({})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_huge_dft_is_unsupported_rather_than_a_huge_matrix():
    x = np.zeros((1, 5000, 1), np.float32)
    node = helper.make_node("DFT", ["x"], ["y"], axis=1)
    with pytest.raises(hobbit.errors.UnsupportedModelError, match="FFT"):
        hobbit.compile(make_model([node], {"x": x}, ["y"], opset=17))
