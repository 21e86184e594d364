"""Resize and Upsample against onnxruntime: every mode, coordinate rule and size form, runtime X."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import UnsupportedModelError
from tests.helpers import assert_matches_ort, make_model, rand, run_ort

COORDINATES = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


def _resize_model(x, scales=None, sizes=None, roi=None, opset=19, **attrs):
    inits = {"roi": np.asarray(roi if roi is not None else [], np.float32),
             "scales": np.asarray(scales if scales is not None else [], np.float32)}
    inputs = ["x", "roi", "scales"]
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        inputs.append("sizes")
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("coordinates", COORDINATES)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_interpolating_modes(mode, coordinates):
    """Scales with whole output lengths: onnxruntime's align_corners divides by the rounded length."""
    x = rand(1, 2, 5, 10)
    for scales in ([1, 1, 1.6, 0.6], [1, 1, 0.6, 2.0]):
        model = _resize_model(x, scales=scales, mode=mode, coordinate_transformation_mode=coordinates)
        assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("coordinates", ["half_pixel", "align_corners", "asymmetric"])
def test_nearest_modes(nearest_mode, coordinates):
    x = rand(2, 3, 6, 5)
    model = _resize_model(x, sizes=[2, 3, 9, 3], mode="nearest", nearest_mode=nearest_mode,
                          coordinate_transformation_mode=coordinates)
    assert_matches_ort(model, {"x": x})


def test_nearest_integers_and_axes():
    x = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)
    model = _resize_model(x, scales=[2.0, 0.5], mode="nearest", axes=[2, 1])
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_keep_aspect_ratio(policy):
    x = rand(1, 1, 6, 8)
    model = _resize_model(x, sizes=[5, 5], mode="linear", axes=[2, 3], keep_aspect_ratio_policy=policy)
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_downsampling(mode):
    x = rand(1, 2, 12, 9)
    model = _resize_model(x, scales=[1, 1, 0.4, 0.7], mode=mode, antialias=1)
    assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_cubic_exclude_outside_and_a():
    x = rand(1, 1, 5, 5)
    model = _resize_model(x, scales=[1, 1, 1.7, 0.8], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)
    assert_matches_ort(model, {"x": x})


def test_crop_and_resize_extrapolates():
    x = rand(1, 1, 6, 6)
    model = _resize_model(x, sizes=[1, 1, 4, 5], roi=[0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], mode="linear",
                          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    assert_matches_ort(model, {"x": x})


def test_float16():
    x = rand(1, 2, 4, 5, dtype=np.float16)
    model = _resize_model(x, scales=[1, 1, 1.5, 2.5], mode="linear")
    assert_matches_ort(model, {"x": x}, rtol=1e-3, atol=1e-3)


def test_float64_matches_float32_onnxruntime():
    """onnxruntime has no float64 Resize: compare with its float32 result."""
    x = rand(1, 2, 4, 5, dtype=np.float64)
    expected, = run_ort(_resize_model(x.astype(np.float32), scales=[1, 1, 1.5, 2.5], mode="cubic"),
                        {"x": x.astype(np.float32)})
    got, = hobbit.compile(_resize_model(x, scales=[1, 1, 1.5, 2.5], mode="cubic")).run({"x": x})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_upsample_and_opset10_resize():
    x = rand(1, 2, 3, 4)
    scales = {"scales": np.asarray([1, 1, 2, 1.5], np.float32)}
    for op, opset in (("Upsample", 9), ("Resize", 10)):
        for mode in ("nearest", "linear"):
            node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
            assert_matches_ort(make_model([node], {"x": x}, ["y"], scales, opset=opset), {"x": x})


def test_unknown_mode_is_unsupported():
    x = rand(1, 1, 2, 2)
    with pytest.raises(UnsupportedModelError, match="mode"):
        hobbit.compile(_resize_model(x, scales=[1, 1, 2, 2], mode="area"))
