"""Quantization ops against onnxruntime, all inputs at run time: QuantizeLinear /
DequantizeLinear (per tensor, per axis, blocked; 8- and 16-bit), DynamicQuantizeLinear,
MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.ops.nn import conv_reference
from tests.helpers import make_model, rand, run_ort

_ONNX = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int16: TensorProto.INT16,
         np.uint16: TensorProto.UINT16}


def _model(node, feeds, outputs, opset):
    model = make_model([node], {}, outputs, opset=opset)
    model.graph.input.extend(helper.make_tensor_value_info(n, _ONNX.get(a.dtype.type) or
                                                           helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                             for n, a in feeds.items())
    return model


def _check(node, feeds, outputs=("y",), opset=21, exact=True):
    model = _model(node, feeds, list(outputs), opset)
    expected = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        if exact:
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def _ties(shape, scale):
    """Values on and around rounding ties, plus some far outside the integer range."""
    x = (np.arange(np.prod(shape)) - np.prod(shape) / 2).astype(np.float32) * 0.5 * scale
    x[:3] = [1e6, -1e6, 0.0]
    return x.reshape(shape)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16])
def test_quantize_per_tensor_rounds_half_even_and_saturates(dtype):
    feeds = {"x": _ties((4, 7), 0.25), "s": np.array(0.25, np.float32), "z": np.array(3, dtype)}
    _check(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), feeds)


def test_quantize_per_axis_and_default_zero_point():
    feeds = {"x": rand(2, 3, 5) * 40, "s": np.array([0.5, 1.0, 2.0], np.float32)}
    _check(helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1), feeds)


def test_quantize_blocked():
    feeds = {"x": rand(3, 8) * 30, "s": np.abs(rand(3, 4, seed=1)) + 0.1,
             "z": np.arange(12, dtype=np.int8).reshape(3, 4)}
    _check(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2), feeds)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
def test_dequantize_per_tensor(dtype):
    x = np.arange(-60, 60, 5).astype(np.int64).clip(np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)
    feeds = {"x": x.reshape(4, 6), "s": np.array(0.37, np.float32), "z": np.array(2, dtype)}
    _check(helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"]), feeds, exact=False)


def test_dequantize_per_axis_and_blocked():
    x = np.arange(48, dtype=np.uint8).reshape(2, 4, 6)
    feeds = {"x": x, "s": np.array([0.5, 1.5, 2.5, 3.5], np.float32), "z": np.array([1, 2, 3, 4], np.uint8)}
    _check(helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-2), feeds, exact=False)
    feeds = {"x": x, "s": np.abs(rand(2, 4, 2)) + 0.1, "z": np.full((2, 4, 2), 7, np.uint8)}
    _check(helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=2, block_size=3), feeds, exact=False)


def test_dynamic_quantize_linear():
    feeds = {"x": rand(5, 9) * 3 + 1}
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"])
    _check(node, feeds, outputs=("y", "y_scale", "y_zero_point"), opset=11)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer(dtype):
    info = np.iinfo(dtype)
    gen = np.random.default_rng(0)
    feeds = {"a": gen.integers(info.min, info.max, (2, 5, 7), dtype=dtype),
             "b": gen.integers(info.min, info.max, (7, 3), dtype=dtype),
             "za": np.array(info.max // 2, dtype), "zb": np.array([3], dtype)}
    _check(helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"]), feeds, opset=10)


def test_matmul_integer_per_row_and_per_column_zero_points():
    """onnxruntime takes only per-tensor zero points here: numpy is the reference."""
    gen = np.random.default_rng(0)
    feeds = {"a": gen.integers(0, 255, (5, 7), dtype=np.uint8), "b": gen.integers(0, 255, (7, 3), dtype=np.uint8),
             "za": gen.integers(0, 255, (5,), dtype=np.uint8), "zb": gen.integers(0, 255, (3,), dtype=np.uint8)}
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    got, = hobbit.compile(_model(node, feeds, ["y"], 10)).run(feeds)
    wide = {k: v.astype(np.int32) for k, v in feeds.items()}
    np.testing.assert_array_equal(got, (wide["a"] - wide["za"][:, None]) @ (wide["b"] - wide["zb"]))


def test_qlinear_matmul():
    gen = np.random.default_rng(1)
    feeds = {"a": gen.integers(0, 255, (3, 4, 8), dtype=np.uint8), "sa": np.array(0.02, np.float32),
             "za": np.array(120, np.uint8), "b": gen.integers(0, 255, (8, 5), dtype=np.uint8),
             "sb": np.array(0.03, np.float32), "zb": np.array(130, np.uint8),
             "sy": np.array(0.05, np.float32), "zy": np.array(100, np.uint8)}
    _check(helper.make_node("QLinearMatMul", list(feeds), ["y"]), feeds, opset=10)


def test_conv_integer_with_padding_and_stride():
    gen = np.random.default_rng(2)
    feeds = {"x": gen.integers(0, 255, (1, 3, 7, 6), dtype=np.uint8),
             "w": gen.integers(0, 255, (4, 3, 3, 3), dtype=np.uint8),
             "zx": np.array(128, np.uint8), "zw": np.array(90, np.uint8)}
    node = helper.make_node("ConvInteger", list(feeds), ["y"], pads=[1, 0, 1, 2], strides=[2, 1])
    _check(node, feeds, opset=10)


def test_conv_integer_per_channel_weight_zero_points():
    """onnxruntime takes only a per-tensor weight zero point: the float64 Conv reference decides."""
    gen = np.random.default_rng(2)
    feeds = {"x": gen.integers(0, 255, (1, 2, 5, 5), dtype=np.uint8),
             "w": gen.integers(0, 255, (3, 2, 2, 2), dtype=np.uint8),
             "zx": np.array(128, np.uint8), "zw": np.array([1, 100, 255], np.uint8)}
    node = helper.make_node("ConvInteger", list(feeds), ["y"], pads=[1, 1, 1, 1])
    got, = hobbit.compile(_model(node, feeds, ["y"], 10)).run(feeds)
    x = feeds["x"].astype(np.float64) - 128
    w = feeds["w"].astype(np.float64) - feeds["zw"].reshape(3, 1, 1, 1)
    attrs = {"strides": (1, 1), "dilations": (1, 1), "pads": (1, 1, 1, 1), "group": 1}
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, conv_reference([x, w], attrs)[0].astype(np.int32))


def test_qlinear_conv_with_bias_and_per_channel_weight_scale():
    gen = np.random.default_rng(3)
    feeds = {"x": gen.integers(0, 255, (1, 2, 6, 6), dtype=np.uint8), "sx": np.array(0.01, np.float32),
             "zx": np.array(120, np.uint8), "w": gen.integers(-100, 100, (3, 2, 3, 3), dtype=np.int8),
             "sw": np.array([0.01, 0.02, 0.005], np.float32), "zw": np.zeros(3, np.int8),
             "sy": np.array(0.02, np.float32), "zy": np.array(10, np.uint8),
             "bias": gen.integers(-500, 500, (3,), dtype=np.int32)}
    _check(helper.make_node("QLinearConv", list(feeds), ["y"], pads=[1, 1, 1, 1]), feeds, opset=10)


def test_float8_quantization_is_unsupported():
    feeds = {"x": rand(4), "s": np.array(1.0, np.float32)}
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.FLOAT8E4M3FN)
    with pytest.raises(hobbit.errors.UnsupportedModelError):
        hobbit.compile(_model(node, feeds, ["y"], 21))
