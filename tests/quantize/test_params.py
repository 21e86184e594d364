"""Scales and zero points against their definitions, computed in numpy float64."""

from __future__ import annotations

import numpy as np
import pytest

from hobbit.quantize.params import activation_parameters, bias_parameters, weight_parameters


@pytest.mark.parametrize("lo, hi", [(-1.5, 3.0), (0.0, 6.0), (0.5, 2.0), (-4.0, -1.0)])
def test_activation_range_contains_zero_exactly_and_covers_the_range(lo: float, hi: float):
    scale, zero = activation_parameters(lo, hi)
    assert zero.dtype == np.uint8
    assert scale == pytest.approx((max(hi, 0) - min(lo, 0)) / 255, rel=1e-6)
    represented = (np.arange(256) - int(zero)) * np.float64(scale)
    assert 0.0 in represented
    assert represented[0] <= min(lo, 0) + scale / 2 and represented[-1] >= max(hi, 0) - scale / 2


def test_a_constant_zero_tensor_gets_scale_one():
    assert activation_parameters(0.0, 0.0) == (1.0, 0)


def test_per_channel_weights_reconstruct_within_half_a_step():
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((6, 4, 3, 3)) * rng.uniform(0.01, 2, (6, 1, 1, 1))).astype(np.float32)
    weight[2] = 0.0
    quantized, scale = weight_parameters(weight, axis=0)
    assert quantized.dtype == np.int8 and scale.shape == (6,) and scale[2] == 1.0
    np.testing.assert_allclose(scale[[0, 1, 3, 4, 5]], np.abs(weight).max(axis=(1, 2, 3))[[0, 1, 3, 4, 5]] / 127,
                               rtol=1e-6)
    error = np.abs(quantized * scale[:, None, None, None] - weight)
    assert np.all(error <= scale[:, None, None, None] / 2 * 1.0001)


def test_bias_scale_is_input_scale_times_weight_scale():
    bias = np.array([0.5, -1.25, 3.0], np.float32)
    quantized, scale = bias_parameters(bias, np.float32(0.02), np.array([0.01, 0.002, 0.1], np.float32))
    np.testing.assert_allclose(scale, [0.0002, 0.00004, 0.002], rtol=1e-6)
    np.testing.assert_array_equal(quantized, np.round(bias / scale.astype(np.float64)).astype(np.int32))
