"""ConvInteger and MatMulInteger (the integer products of dynamically quantized models) on
the int8 kernels, against onnxruntime: geometries of the conv tests, uint8 and int8
activations, per-tensor and per-channel weight zero points, the activations' zero point
as a run-time input (what DynamicQuantizeLinear feeds them), batched products, and odd K
and N. The outputs are int32 sums, so both sides are exact and must be equal; every case
also checks that the product really ran as QConvInteger / QMatMulInteger, with the VNNI
kernels (host) and the AVX2 fallback (x86-64-v3) alike.

onnxruntime's ConvInteger takes only per-tensor weight zero points; for per-channel ones
the reference is the integer convolution computed in numpy (int64)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.plan.int8 import dot_product
from hobbit.target import parse_target
from tests.helpers import run_ort
from tests.backend.cpu.test_int8_conv import GEOMETRIES, Geometry

TARGETS = [t for t in ("host", "x86-64-v3") if dot_product(parse_target(t)) is not None]
ONNX_TYPES = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def _integer_model(op: str, x_shape: tuple, x_dtype, w: np.ndarray, w_zero: np.ndarray,
                   attrs: dict | None = None) -> onnx.ModelProto:
    """op(x, w, x_zero, w_zero) with x and its zero point inputs, w and its zero point constants."""
    x_type = ONNX_TYPES[np.dtype(x_dtype)]
    node = helper.make_node(op, ["x", "w", "x_zero", "w_zero"], ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("x", x_type, list(x_shape)), helper.make_tensor_value_info("x_zero", x_type, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_zero, "w_zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _operands(x_shape: tuple, x_dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(x_dtype)
    rng = np.random.default_rng(seed)
    x = rng.integers(info.min, info.max, x_shape, endpoint=True).astype(x_dtype)
    zero = np.array(rng.integers(info.min, info.max, endpoint=True), x_dtype)
    return x, zero


def _run(model: onnx.ModelProto, feeds: dict, target: str, kernel: str) -> np.ndarray:
    compiled = hobbit.compile(model, target=target, cache=False)
    assert kernel in [n.op for n in compiled.report.graph.nodes]
    (y,) = compiled.run(feeds)
    assert y.dtype == np.int32
    return y


def _weights(shape: tuple, seed: int, dtype=np.int8) -> np.ndarray:
    """int8 weights over the whole range, -128 included (the centred weight the kernel reads)."""
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True).astype(dtype)


CONV_GEOMETRIES = [g for g in GEOMETRIES if g.size <= 14]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x_dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("g", CONV_GEOMETRIES, ids=str)
def test_conv_integer_equals_onnxruntime(g: Geometry, x_dtype, target):
    x, x_zero = _operands((g.batch, g.channels, g.size, g.size), x_dtype, seed=g.channels)
    w_zero = np.array(3, np.int8)
    w = np.clip(_weights(g.weight_shape, seed=g.out).astype(np.int32) + 3, -128, 127).astype(np.int8)  # w - 3 fits
    model = _integer_model("ConvInteger", x.shape, x_dtype, w, w_zero, g.attrs)
    feeds = {"x": x, "x_zero": x_zero}
    np.testing.assert_array_equal(_run(model, feeds, target, "QConvInteger"), run_ort(model, feeds)[0])


def _numpy_conv_integer(x: np.ndarray, x_zero, w: np.ndarray, w_zero: np.ndarray, pad: int) -> np.ndarray:
    """Stride 1, group 1: sum over c, kh, kw of (x - x_zero) * (w - w_zero[o]) in int64, x padded with x_zero."""
    xc = np.pad(x.astype(np.int64) - int(x_zero), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wc = w.astype(np.int64) - w_zero.astype(np.int64).reshape(-1, 1, 1, 1)
    kh, kw = w.shape[2:]
    oh, ow = xc.shape[2] - kh + 1, xc.shape[3] - kw + 1
    windows = np.lib.stride_tricks.sliding_window_view(xc, (kh, kw), axis=(2, 3))[:, :, :oh, :ow]
    return np.einsum("nchwij,ocij->nohw", windows, wc).astype(np.int32)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_integer_per_channel_weight_zero_points(target):
    x, x_zero = _operands((2, 6, 9, 9), np.uint8, seed=1)
    w = _weights((5, 6, 3, 3), seed=2, dtype=np.uint8) // 2 + 64  # within 64 .. 191: centred fits int8
    w_zero = np.array([64, 100, 128, 150, 191], np.uint8)
    model = _integer_model("ConvInteger", x.shape, np.uint8, w, w_zero, {"pads": [1] * 4})
    got = _run(model, {"x": x, "x_zero": x_zero}, target, "QConvInteger")
    np.testing.assert_array_equal(got, _numpy_conv_integer(x, x_zero, w, w_zero, pad=1))


def test_conv_integer_with_weights_past_int8_once_centred_stays_exact():
    """uint8 weights 0 .. 255 about zero point 0 do not fit the kernels' int8: the float path runs, exactly."""
    x, x_zero = _operands((1, 4, 7, 7), np.uint8, seed=3)
    w = _weights((3, 4, 3, 3), seed=4, dtype=np.uint8)
    model = _integer_model("ConvInteger", x.shape, np.uint8, w, np.array(0, np.uint8), {"pads": [1] * 4})
    compiled = hobbit.compile(model, cache=False)
    assert "QConvInteger" not in [n.op for n in compiled.report.graph.nodes]
    feeds = {"x": x, "x_zero": x_zero}
    np.testing.assert_array_equal(compiled.run(feeds)[0], run_ort(model, feeds)[0])


MATMULS = [  # (x shape, N)
    ((3, 61), 37),  # odd K and N: partial groups of k and a partial panel
    ((1, 512), 100),  # a batch-1 fully-connected layer
    ((2, 5, 64), 16),  # batched activations
    ((1, 3), 1),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x_dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("x_shape,n", MATMULS, ids=str)
@pytest.mark.parametrize("per_column", [False, True], ids=["per_tensor", "per_column"])
def test_matmul_integer_equals_onnxruntime(x_shape, n, x_dtype, per_column, target):
    x, x_zero = _operands(x_shape, x_dtype, seed=x_shape[-1])
    w_zero = np.arange(n, dtype=np.int64) % 7 - 3 if per_column else np.array(-2)
    w = np.clip(_weights((x_shape[-1], n), seed=n).astype(np.int64) + w_zero, -128, 127).astype(np.int8)
    model = _integer_model("MatMulInteger", x.shape, x_dtype, w, w_zero.astype(np.int8))
    feeds = {"x": x, "x_zero": x_zero}
    np.testing.assert_array_equal(_run(model, feeds, target, "QMatMulInteger"), run_ort(model, feeds)[0])
