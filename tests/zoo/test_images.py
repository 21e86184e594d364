"""hobbit.zoo.images: the smooth random images of the quantization bench have a 1/f^alpha
spectrum (unlike N(0, 1) noise), ImageNet-normalised statistics and correlated channels, and the
calibration and evaluation sets are fixed and disjoint."""

from __future__ import annotations

import numpy as np
import pytest

from hobbit.zoo.images import calibration_images, evaluation_images, smooth_images

SHAPE = (3, 128, 128)


def spectrum_slope(image: np.ndarray) -> float:
    """Slope of log power against log frequency, the power averaged in log-spaced rings from
    two cycles per image to the Nyquist frequency."""
    h, w = image.shape
    power = np.abs(np.fft.fft2(image - image.mean())) ** 2
    f = np.hypot(np.fft.fftfreq(h)[:, None], np.fft.fftfreq(w)[None, :]).ravel()
    edges = np.geomspace(2 / h, 0.5, 16)
    ring = np.digitize(f, edges)
    centres, means = [], []
    for k in range(1, len(edges)):
        inside = ring == k
        centres.append(f[inside].mean())
        means.append(power.ravel()[inside].mean())
    return float(np.polyfit(np.log(centres), np.log(means), 1)[0])


@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0])
def test_power_spectrum_falls_as_one_over_f_to_two_alpha(alpha):
    # Amplitude 1/f^alpha is power 1/f^(2 alpha). Clipping to [0, 1] adds a little high-frequency
    # power (measured: slopes within 0.1 of -2 alpha at 224x224), hence the tolerance of 0.3.
    images = smooth_images(3, seed=7, shape=SHAPE, alpha=(alpha, alpha))
    slopes = [spectrum_slope(image[c]) for image in images for c in range(3)]
    assert np.mean(slopes) == pytest.approx(-2 * alpha, abs=0.3)


def test_white_noise_fails_the_spectrum_check():
    # The measure itself must tell white noise (slope 0) apart from the images.
    noise = np.random.default_rng(0).standard_normal(SHAPE[1:])
    assert abs(spectrum_slope(noise)) < 0.3


def test_statistics_are_imagenet_normalised_and_channels_correlated():
    images = smooth_images(8, seed=3, shape=SHAPE)
    assert images.dtype == np.float32 and images.shape == (8, *SHAPE)
    per_channel = images.astype(np.float64).transpose(1, 0, 2, 3).reshape(3, -1)
    # Normalised pixels: (pixel - mean) / std of fields scaled to ImageNet's mean and std, then
    # clipped to [0, 1] (about 3% of pixels), so mean near 0 and std a little under 1.
    np.testing.assert_allclose(per_channel.mean(axis=1), 0.0, atol=0.15)
    np.testing.assert_allclose(per_channel.std(axis=1), 0.95, atol=0.1)
    correlation = np.corrcoef(per_channel)
    assert correlation[np.triu_indices(3, 1)].min() > 0.7
    # Pixels were clipped to [0, 1] before normalising.
    assert per_channel.min() >= -0.485 / 0.229 - 1e-6 and per_channel.max() <= (1 - 0.406) / 0.225 + 1e-6


def test_calibration_and_evaluation_sets_are_fixed_and_disjoint():
    calibration, evaluation = calibration_images(4, SHAPE), evaluation_images(6, SHAPE)
    assert calibration.shape == (4, *SHAPE) and evaluation.shape == (6, *SHAPE)
    assert calibration.dtype == np.float32 and evaluation.dtype == np.float32
    np.testing.assert_array_equal(calibration, calibration_images(4, SHAPE))
    pairwise = np.abs(calibration[:, None] - evaluation[None]).reshape(4, 6, -1).max(axis=-1)
    assert pairwise.min() > 0.5
