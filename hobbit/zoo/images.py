"""Seeded natural-image-like inputs for the zoo models: 1/f noise, not N(0, 1).

Quantization is calibrated on, and judged by, the activations that inputs produce. N(0, 1)
pixels are white noise: every pixel independent, all energy at the highest spatial
frequencies, a histogram no camera makes. Natural images have power spectra that fall
as 1/f^2 or so (amplitude 1/f^alpha, alpha about 1 to 2), neighbouring pixels and the
three colour channels strongly correlated, and pixels clipped to the sensor's range. The
generator makes exactly that: white noise shaped by 1/f^alpha in the Fourier domain,
one luminance field shared by the channels plus a weaker field of each channel's own,
scaled to ImageNet's per-channel mean and std, clipped to [0, 1], then normalised the way
torchvision's models expect ((pixel - mean) / std).

The calibration and evaluation sets come from different seeds, so a quantized model is
never judged on the images it was calibrated on."""

from __future__ import annotations

import numpy as np

# torchvision's ImageNet normalisation (RGB, pixels in [0, 1]).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])
# Share of each channel's variance carried by the luminance field all three share: natural
# RGB channels correlate at about 0.8-0.95.
LUMINANCE_SHARE = 0.85
ALPHA_RANGE = (1.0, 2.0)
CALIBRATION_SEED = 1015
EVALUATION_SEED = 2015
SHAPE = (3, 224, 224)


def pink_field(rng: np.random.Generator, height: int, width: int, alpha: float) -> np.ndarray:
    """One real field with amplitude spectrum 1/f^alpha (power 1/f^(2 alpha)), zero mean and unit
    std: white noise filtered in the Fourier domain. The zero frequency is dropped (the mean
    is set afterwards), so the spectrum holds at every other frequency."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.hypot(fy, fx)
    f[0, 0] = np.inf
    spectrum = np.fft.rfft2(rng.standard_normal((height, width))) / f ** alpha
    field = np.fft.irfft2(spectrum, s=(height, width))
    return (field - field.mean()) / field.std()


def smooth_images(count: int, seed: int, shape: tuple[int, int, int] = SHAPE,
                  alpha: tuple[float, float] = ALPHA_RANGE) -> np.ndarray:
    """`count` normalised images, float32 (count, C, H, W), each with its own alpha drawn
    uniformly from `alpha` (pass (a, a) for one slope)."""
    channels, height, width = shape
    rng = np.random.default_rng(seed)
    mean = np.resize(IMAGENET_MEAN, channels)[:, None, None]
    std = np.resize(IMAGENET_STD, channels)[:, None, None]
    images = np.empty((count, *shape), np.float32)
    for i in range(count):
        a = rng.uniform(*alpha)
        shared = pink_field(rng, height, width, a)
        own = np.stack([pink_field(rng, height, width, a) for _ in range(channels)])
        field = np.sqrt(LUMINANCE_SHARE) * shared + np.sqrt(1.0 - LUMINANCE_SHARE) * own
        pixels = np.clip(mean + std * field, 0.0, 1.0)
        images[i] = (pixels - mean) / std
    return images


def calibration_images(count: int = 16, shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """The calibration set: what a quantizer measures activation ranges on."""
    return smooth_images(count, CALIBRATION_SEED, shape)


def evaluation_images(count: int = 32, shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """The evaluation set, from another seed than the calibration set: what accuracy is measured on."""
    return smooth_images(count, EVALUATION_SEED, shape)
