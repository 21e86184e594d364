"""Streaming calibration statistics against numpy on known distributions."""

from __future__ import annotations

import numpy as np
import pytest

from hobbit.quantize.statistics import Histogram, TensorStatistics, entropy_threshold, percentile_threshold


def _batches(draw, count: int = 8, size: int = 50_000, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [draw(rng, size).astype(np.float32) for _ in range(count)]


def test_minmax_is_numpys_over_all_batches():
    batches = _batches(lambda rng, n: rng.standard_normal(n) * rng.uniform(0.5, 3))
    stats = TensorStatistics(histogram=False)
    for batch in batches:
        stats.add(batch.reshape(10, -1))
    everything = np.concatenate(batches)
    assert stats.range("minmax") == (float(everything.min()), float(everything.max()))


def test_histogram_keeps_every_count_when_a_later_batch_widens_it():
    """Batches of growing magnitude force the range to double several times."""
    histogram = Histogram()
    values = [np.full(1000, 0.5, np.float32), np.full(1000, 3.0, np.float32), np.full(10, 40.0, np.float32)]
    for v in values:
        histogram.add(v)
    assert histogram.counts.sum() == 2010
    assert 40.0 <= histogram.edge < 80.0
    centers = (np.arange(len(histogram.counts)) + 0.5) * histogram.width
    for value, count in ((0.5, 1000), (3.0, 1000), (40.0, 10)):
        near = np.abs(centers - value) <= histogram.width
        assert histogram.counts[near].sum() == count


@pytest.mark.parametrize("percentile", [99.0, 99.9, 99.99])
def test_percentile_matches_numpy_within_one_bin(percentile: float):
    batches = _batches(lambda rng, n: rng.laplace(size=n))
    stats = TensorStatistics(histogram=True)
    for batch in batches:
        stats.add(batch)
    expected = np.percentile(np.abs(np.concatenate(batches)), percentile)
    assert abs(percentile_threshold(stats.histogram, percentile) - expected) <= stats.histogram.width
    lo, hi = stats.range("percentile", percentile)
    assert lo == pytest.approx(-hi) and hi == pytest.approx(expected, abs=stats.histogram.width)


def test_entropy_clips_the_long_tail_of_a_relu_gaussian():
    """ReLU(N(0,1)) over 400k samples reaches ~4.7 sigma; the last few bins hold a handful of
    values, so the KL threshold cuts them (measured 4.17, 0.88 of the max) but keeps the body:
    above 3 sigma, where 99.87% of the mass lies."""
    stats = TensorStatistics(histogram=True)
    for batch in _batches(lambda rng, n: np.maximum(rng.standard_normal(n), 0)):
        stats.add(batch)
    lo, hi = stats.range("entropy")
    assert lo == 0.0
    assert 3.0 < hi < 0.95 * stats.max


def test_entropy_keeps_the_range_of_a_uniform_distribution():
    """No tail to cut: clipping only adds error, so the threshold stays within 3% of the max."""
    stats = TensorStatistics(histogram=True)
    for batch in _batches(lambda rng, n: rng.uniform(-2, 2, n)):
        stats.add(batch)
    lo, hi = stats.range("entropy")
    assert hi >= 0.97 * stats.max and lo <= 0.97 * stats.min


def test_entropy_of_a_tensor_of_zeros_is_zero():
    histogram = Histogram()
    histogram.add(np.zeros(100, np.float32))
    assert entropy_threshold(histogram, levels=128) == 0.0
