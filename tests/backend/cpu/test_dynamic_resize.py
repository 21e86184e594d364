"""Resize with run-time height and width (issue 28): single-op ONNX models with input
[1, C, "h", "w"], compiled once at the bound (dynamic_shapes) and run at many sizes inside
it against onnxruntime.

Nearest resizes gather through the bound's source tables, a prefix of which is each
smaller size's table for integer upscales; linear and cubic resizes (one ResampleAxis per
axis) use the bound's taps with their indices clamped at run time to the input's length,
which is what Resize computes at a smaller size when the weights do not depend on it
(half_pixel, asymmetric, pytorch_half_pixel at integer scales). Where they do
(align_corners, exclude_outside) or the output is no fitting function of the input
(a downscale by 2 of an odd size), the model compiles per shape and says why. Each model
that should follow the run-time dims must come back as a DynamicModel; a white-box check
runs the module on bound-shaped buffers with NaN past the extents and a sentinel in the
outputs: nothing past an extent may be read into the result or written."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hobbit
from tests.helpers import assert_inside_extents, run_ort

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, database=None)
LOW, HIGH = 5, 40
SIZES = [(HIGH, HIGH), (LOW, LOW), (7, 13), (HIGH, 9), (23, 31), (LOW, HIGH), (HIGH, HIGH), (6, 6)]
C = 3


def _model(scales: tuple, attrs: tuple, dims: tuple = (1, C, "h", "w")) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **dict(attrs))
    graph = helper.make_graph([node], "dynamic_resize",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array(scales, np.float32), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


NEAREST = [((1, 1, 2, 2), (("mode", "nearest"),)),  # an FPN's top-down upsampling
           ((1, 1, 2, 3), (("mode", "nearest"), ("coordinate_transformation_mode", "asymmetric"),
                           ("nearest_mode", "floor"))),
           ((1, 1, 3, 1), (("mode", "nearest"), ("nearest_mode", "round_prefer_ceil")))]
INTERPOLATING = [((1, 1, 2, 2), (("mode", "linear"),)),
                 ((1, 1, 2, 2), (("mode", "linear"), ("coordinate_transformation_mode", "pytorch_half_pixel"))),
                 ((1, 1, 3, 2), (("mode", "linear"), ("coordinate_transformation_mode", "asymmetric"))),
                 ((1, 1, 2, 2), (("mode", "cubic"),)),
                 ((1, 1, 1, 4), (("mode", "cubic"), ("cubic_coeff_a", -0.5)))]


@functools.cache
def _compiled(scales: tuple, attrs: tuple, threads: int):
    model = _model(scales, attrs)
    compiled = hobbit.compile(model, threads=threads, dynamic_shapes={"h": (LOW, HIGH), "w": (LOW, HIGH)},
                              cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return model, compiled


def _input(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _check(scales: tuple, attrs: tuple, threads: int, h: int, w: int) -> None:
    model, compiled = _compiled(scales, attrs, threads)
    x = _input((1, C, h, w), h * 1000 + w)
    got = compiled.run({"x": x})[0]
    want = run_ort(model, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("scales, attrs", NEAREST + INTERPOLATING)
def test_resize(scales: tuple, attrs: tuple, threads: int) -> None:
    for h, w in SIZES:
        _check(scales, attrs, threads, h, w)


@given(h=st.integers(LOW, HIGH), w=st.integers(LOW, HIGH), case=st.sampled_from(NEAREST + INTERPOLATING))
@SETTINGS
def test_resize_drawn(h: int, w: int, case: tuple) -> None:
    _check(*case, 1, h, w)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("scales, attrs", [NEAREST[0], INTERPOLATING[0], INTERPOLATING[3]])
def test_reads_and_writes_stay_inside_extents(scales: tuple, attrs: tuple, threads: int) -> None:
    """NaN past the input's extents must not reach the result (a linear tap at the bound that
    a smaller input lacks is clamped to its last row), and nothing past the output's extents
    is written."""
    model, compiled = _compiled(scales, attrs, threads)
    build = compiled._current
    for h, w in [(LOW, LOW), (11, 30), (HIGH, HIGH)]:
        feeds = {"x": _input((1, C, h, w), h + w)}
        assert_inside_extents(build, model, feeds, [h, w], 1e-5, 1e-5)


REFUSED = [((1, 1, 2, 2), (("mode", "linear"), ("coordinate_transformation_mode", "align_corners")),
            "not the bound's, cut and clamped"),
           ((1, 1, 2, 2), (("mode", "cubic"), ("exclude_outside", 1)), "not the bound's, cut and clamped"),
           ((1, 1, 0.5, 0.5), (("mode", "nearest"),), "dim 2 of 'y'")]


@pytest.mark.parametrize("scales, attrs, reason", REFUSED)
def test_refused_and_still_right(scales: tuple, attrs: tuple, reason: str) -> None:
    """Weights that depend on the size, and outputs that are no fitting function of it, compile
    per shape, say why, and still agree with onnxruntime."""
    model = _model(scales, attrs)
    compiled = hobbit.compile(model, threads=1, dynamic_shapes={"h": (LOW, HIGH), "w": (LOW, HIGH)}, cache=False)
    assert type(compiled).__name__ != "DynamicModel"
    assert reason in compiled.reason
    x = _input((1, C, 9, 14), 3)
    np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _path() -> onnx.ModelProto:
    """Upsample, pool back, add the input, and both global pools: x2 nearest and bilinear
    branches concatenated on the channels, a 2x2 max pool to the input's size, a residual
    add and the global pools over the run-time height and width."""
    nodes = [helper.make_node("Resize", ["x", "", "two"], ["near"], mode="nearest"),
             helper.make_node("Resize", ["x", "", "two"], ["lin"], mode="linear"),
             helper.make_node("Concat", ["near", "lin"], ["both"], axis=1),
             helper.make_node("MaxPool", ["both"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["x", "x"], ["xx"], axis=1),
             helper.make_node("Add", ["pooled", "xx"], ["sum"]),
             helper.make_node("GlobalAveragePool", ["sum"], ["mean"]),
             helper.make_node("GlobalMaxPool", ["sum"], ["max"]),
             helper.make_node("Flatten", ["mean"], ["flat"])]
    graph = helper.make_graph(nodes, "upsample_path",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, "h", "w"])],
                              [helper.make_empty_tensor_value_info(n) for n in ("sum", "flat", "max")],
                              [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("threads", [1, 2])
def test_upsample_pool_add_path(threads: int) -> None:
    """Resizes, Concat on the channels, a strided pool, an add and the global pools in one
    module with run-time height and width."""
    model = _path()
    compiled = hobbit.compile(model, threads=threads, dynamic_shapes={"h": (LOW, HIGH), "w": (LOW, HIGH)},
                              cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    for h, w in SIZES:
        x = _input((1, C, h, w), h * w)
        for got, want in zip(compiled.run({"x": x}), run_ort(model, {"x": x})):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
