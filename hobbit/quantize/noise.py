"""Smooth random images for calibration and accuracy checks: 1/f ("pink") noise, whose power
spectrum falls off like natural images' do. N(0, 1) pixels are a poor stand-in: independent
pixels make every activation near-Gaussian, while real images have large smooth regions and
edges, and quantization error depends on that shape of the activation distributions."""

from __future__ import annotations

import numpy as np


def smooth_images(count: int, shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    """`count` images of `shape` (channels, height, width) as float32 [count, C, H, W]: white
    noise filtered by 1/f in the 2-D frequency domain, each channel normalised to mean 0 and
    standard deviation 1 (the range of a normalised photo)."""
    channels, height, width = shape
    rng = np.random.default_rng(seed)
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    frequency = np.sqrt(fx * fx + fy * fy)
    frequency[0, 0] = 1.0  # the mean is set by the normalisation below
    white = rng.standard_normal((count, channels, height, width))
    images = np.fft.irfft2(np.fft.rfft2(white) / frequency, s=(height, width))
    mean = images.mean(axis=(2, 3), keepdims=True)
    std = images.std(axis=(2, 3), keepdims=True)
    return ((images - mean) / std).astype(np.float32)
