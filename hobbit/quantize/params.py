"""Scales and zero points: uint8 asymmetric activations, int8 symmetric weights, int32 biases,
computed as onnxruntime's quantizer does so both tools' models agree on the same ranges."""

from __future__ import annotations

import numpy as np

UINT8_STEPS = 255
INT8_LIMIT = 127  # symmetric: [-127, 127], so -w quantizes to -q and zero point 0 is exact


def activation_parameters(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """(scale, zero point) mapping [lo, hi], widened to contain 0 so that 0 (padding, ReLU's
    floor) is exact, onto 0..255. A tensor that was always 0 gets scale 1."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / UINT8_STEPS)
    if not np.isfinite(scale) or scale <= 0:
        return np.float32(1.0), np.uint8(0)
    zero = np.clip(np.round(-lo / np.float64(scale)), 0, UINT8_STEPS)
    return scale, np.uint8(zero)


def weight_parameters(weight: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale) with scale = max|w| / 127 over the whole tensor (axis None)
    or per index of `axis`; a channel of zeros gets scale 1."""
    w = weight.astype(np.float64)
    if axis is None:
        largest = np.array(np.abs(w).max())
        per_element = largest
    else:
        others = tuple(i for i in range(w.ndim) if i != axis)
        largest = np.abs(w).max(axis=others)
        per_element = np.expand_dims(largest, others)
    scale = np.where(largest > 0, largest / INT8_LIMIT, 1.0).astype(np.float32)
    element_scale = np.where(per_element > 0, per_element / INT8_LIMIT, 1.0).astype(np.float32)
    quantized = np.clip(np.round(w / element_scale.astype(np.float64)), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)
    return quantized, scale


def bias_parameters(bias: np.ndarray, input_scale: np.float32, weight_scale: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(int32 bias, float32 scale) at scale input_scale * weight_scale (in float32, the product
    an int8 kernel's accumulator carries), so the bias adds straight into the accumulator."""
    scale = (np.float32(input_scale) * weight_scale.astype(np.float32)).astype(np.float32)
    scale = np.broadcast_to(scale, bias.shape).copy() if scale.ndim else scale
    limit = np.iinfo(np.int32)
    quantized = np.clip(np.round(bias.astype(np.float64) / scale.astype(np.float64)), limit.min, limit.max)
    return quantized.astype(np.int32), scale
