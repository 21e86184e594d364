"""MaxPool / AveragePool / global pools against onnxruntime over attribute variants."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.errors import UnsupportedModelError
from tests.helpers import assert_matches_ort, make_model, rand, run_ort

# (kernel, stride, pads (t, l, b, r), ceil_mode, input shape)
WINDOWS = [
    (2, 2, (0, 0, 0, 0), 0, (1, 3, 7, 7)),
    (2, 2, (1, 1, 1, 1), 1, (1, 1, 5, 5)),
    (3, 1, (1, 1, 1, 1), 0, (2, 5, 13, 11)),
    (3, 2, (1, 1, 1, 1), 1, (1, 3, 13, 11)),
    (3, 2, (1, 0, 2, 1), 0, (1, 3, 7, 9)),
    (3, 3, (0, 0, 0, 0), 1, (1, 3, 7, 7)),
    (5, 3, (2, 2, 1, 0), 1, (1, 3, 13, 11)),
    (5, 1, (0, 2, 0, 2), 0, (1, 7, 6, 21)),
    (7, 2, (3, 3, 3, 3), 1, (1, 2, 13, 11)),
    (7, 1, (3, 2, 1, 3), 0, (1, 1, 8, 8)),
    # CNN-sized rows
    (3, 2, (0, 0, 0, 0), 1, (1, 2, 9, 111)),  # SqueezeNet's pools
    (3, 2, (1, 1, 1, 1), 0, (1, 2, 7, 112)),  # ResNet's pool after the stem
    (2, 2, (0, 0, 0, 0), 0, (1, 2, 4, 70)),
    (3, 2, (1, 0, 2, 1), 1, (1, 2, 5, 97)),
]


@pytest.mark.parametrize("kernel,stride,pads,ceil,shape", WINDOWS)
def test_pools_match_ort(kernel, stride, pads, ceil, shape):
    """MaxPool and both AveragePool count modes in one model (one compile per window)."""
    x = rand(*shape, seed=kernel * 10 + stride)
    common = dict(kernel_shape=[kernel, kernel], strides=[stride, stride], pads=list(pads), ceil_mode=ceil)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **common),
             helper.make_node("AveragePool", ["x"], ["avg"], count_include_pad=0, **common),
             helper.make_node("AveragePool", ["x"], ["avg_pad"], count_include_pad=1, **common)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg", "avg_pad"], opset=19), {"x": x})


@pytest.mark.parametrize("kernel,strides,pads", [
    ((2, 3), (1, 2), (0, 1, 1, 0)),
    ((3, 1), (2, 1), (1, 0, 1, 0)),
    ((1, 4), (1, 3), (0, 0, 0, 2)),
])
def test_rectangular_windows(kernel, strides, pads):
    x = rand(1, 3, 10, 13)
    common = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads))
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **common),
             helper.make_node("AveragePool", ["x"], ["avg"], count_include_pad=1, **common)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg"], opset=11), {"x": x})


@pytest.mark.parametrize("dilation,ceil,width,col_stride", [(2, 0, 11, 1), (2, 1, 11, 1), (3, 0, 11, 1),
                                                            (2, 1, 83, 2)])
def test_dilated_pools(dilation, ceil, width, col_stride):
    x = rand(1, 3, 13, width)
    common = dict(kernel_shape=[3, 3], strides=[2, col_stride], pads=[2, 1, 1, 2], dilations=[dilation, dilation],
                  ceil_mode=ceil)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **common),
             helper.make_node("AveragePool", ["x"], ["avg"], count_include_pad=0, **common),
             helper.make_node("AveragePool", ["x"], ["avg_pad"], count_include_pad=1, **common)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg", "avg_pad"], opset=19), {"x": x})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad(auto_pad):
    x = rand(1, 3, 11, 8)
    common = dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad=auto_pad)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **common),
             helper.make_node("AveragePool", ["x"], ["avg"], **common)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg"], opset=11), {"x": x})


@pytest.mark.parametrize("opset", [7, 8, 10, 12, 22])
def test_opsets(opset):
    x = rand(2, 3, 9, 9)
    ceil = dict(ceil_mode=1) if opset >= 10 else {}
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], **ceil),
             helper.make_node("AveragePool", ["x"], ["avg"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0],
                              count_include_pad=1, **ceil)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg"], opset=opset), {"x": x})


def test_one_dimensional_pools():
    x = rand(2, 5, 17)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1),
             helper.make_node("AveragePool", ["x"], ["avg"], kernel_shape=[4], strides=[3], pads=[2, 1],
                              count_include_pad=1)]
    assert_matches_ort(make_model(nodes, {"x": x}, ["max", "avg"], opset=19), {"x": x})


def test_maxpool_int8():
    x = np.random.default_rng(0).integers(-128, 128, (1, 3, 9, 7)).astype(np.int8)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=12), {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("kernel,stride,pads,ceil,shape", [WINDOWS[10], WINDOWS[11], WINDOWS[13]])
def test_strided_maxpool_uint8_at_cnn_sizes(kernel, stride, pads, ceil, shape):
    """Quantized CNNs pool bytes (SqueezeNet int8's three pools): 64 lanes a vector."""
    x = np.random.default_rng(1).integers(0, 256, (1, 8) + shape[2:]).astype(np.uint8)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel, kernel], strides=[stride, stride],
                            pads=list(pads), ceil_mode=ceil)
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=12), {"x": x}, rtol=0, atol=0)


def _window_order_max(x: np.ndarray, kernel: int, stride: int, pads: tuple, ceil: int) -> np.ndarray:
    """MaxPool as hobbit documents it (hobbit.emit.reduce.combine): over each window's valid
    elements, rows then columns, the running max is kept only where it strictly wins, so a
    NaN wins when it comes later and is replaced by whatever comes after it."""
    pt, pl, pb, pr = pads
    n, c, h, w = x.shape
    size = [(d + p0 + p1 - kernel + (stride - 1 if ceil else 0)) // stride + 1 for d, p0, p1 in
            ((h, pt, pb), (w, pl, pr))]
    size = [s - 1 if ceil and (s - 1) * stride >= d + p0 else s for s, d, p0 in zip(size, (h, w), (pt, pl))]
    y = np.empty((n, c, *size), x.dtype)
    for i in range(size[0]):
        for j in range(size[1]):
            acc = np.full((n, c), -np.inf, x.dtype)
            for r in range(i * stride - pt, i * stride - pt + kernel):
                for t in range(j * stride - pl, j * stride - pl + kernel):
                    if 0 <= r < h and 0 <= t < w:
                        acc = np.where(acc > x[:, :, r, t], acc, x[:, :, r, t])
            y[:, :, i, j] = acc
    return y


@pytest.mark.parametrize("kernel,stride,pads,ceil,shape", [WINDOWS[3], WINDOWS[10], WINDOWS[11], WINDOWS[13]])
def test_strided_maxpool_nan_and_infinities_in_window_order(kernel, stride, pads, ceil, shape):
    """Strided pools combine each window in registers (hobbit/backend/cpu/pool.py): in the same
    order as the stride-1 kernel, so NaN and infinities come out as the documented order says."""
    x = rand(*shape, seed=3)
    x.reshape(-1)[::7], x.reshape(-1)[3::11], x.reshape(-1)[5::13] = np.nan, np.inf, -np.inf
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel, kernel], strides=[stride, stride],
                            pads=list(pads), ceil_mode=ceil)
    got = hobbit.compile(make_model([node], {"x": x}, ["y"], opset=12), cache=False).run({"x": x})[0]
    np.testing.assert_array_equal(got, _window_order_max(x, kernel, stride, pads, ceil))


@pytest.mark.parametrize("shape", [(2, 3, 17), (2, 5, 7, 9), (1, 3, 4, 5, 6)])
def test_global_pools(shape):
    x = rand(*shape)
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["avg"]),
             helper.make_node("GlobalMaxPool", ["x"], ["max"])]
    assert_matches_ort(make_model(nodes, {"x": x}, ["avg", "max"], opset=13), {"x": x})


def test_large_planes_are_vectorised_and_exact():
    x = rand(1, 16, 56, 56)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    model = make_model([node], {"x": x}, ["y"], opset=13)
    assert_matches_ort(model, {"x": x}, rtol=0, atol=0)
    ir_text = str(lower_to_llvm(model).optimized)
    assert "x float>" in ir_text  # some vector width, whatever the host


def test_constant_input_is_folded():
    """A pool of an initializer is evaluated at compile time by the numpy reference."""
    w = rand(1, 2, 9, 8)
    nodes = [helper.make_node("AveragePool", ["w"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=1, count_include_pad=1),
             helper.make_node("MaxPool", ["w"], ["q"], kernel_shape=[2, 2], strides=[2, 1], pads=[0, 1, 1, 0]),
             helper.make_node("Add", ["x", "p"], ["y"])]
    x = rand(1, 2, 5, 5, seed=3)
    model = make_model(nodes + [helper.make_node("Identity", ["q"], ["z"])], {"x": x}, ["y", "z"], {"w": w}, opset=19)
    report = lower_to_llvm(model)
    assert not any(n.op in ("AveragePool", "MaxPool") for n in report.graph.nodes)
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_one_by_one_window_at_stride_one_needs_no_kernel(op):
    """VGG's adaptive average pool of a 7x7 map to 7x7: the output is the input."""
    x = rand(1, 8, 7, 7)
    nodes = [helper.make_node(op, ["x"], ["p"], kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0]),
             helper.make_node("Relu", ["p"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], opset=13)
    assert [n.op for n in lower_to_llvm(model).graph.nodes] == ["Relu"]
    assert_matches_ort(model, {"x": x}, rtol=0, atol=0)
    strided = make_model([helper.make_node(op, ["x"], ["y"], kernel_shape=[1, 1], strides=[2, 2])], {"x": x}, ["y"])
    assert [n.op for n in lower_to_llvm(strided).graph.nodes] == [op]


def test_maxpool_indices_output_is_unsupported():
    x = rand(1, 1, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    with pytest.raises(UnsupportedModelError, match="Indices"):
        hobbit.compile(make_model([node], {"x": x}, ["y", "i"], opset=12))


def test_reference_matches_ort_on_ceil_overhang():
    """The ceil_mode rule that drops a last window starting in the end padding."""
    x = rand(1, 1, 5, 5)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                            ceil_mode=1, count_include_pad=1)
    model = make_model([node], {"x": x}, ["y"], opset=19)
    expected = run_ort(model, {"x": x})[0]
    assert expected.shape == (1, 1, 3, 3)
    got = assert_matches_ort(model, {"x": x})[0]
    assert got.shape == expected.shape


def test_maxpool_nan_matches_ort():
    """A NaN wins when it comes after the running max, as in onnxruntime's vector kernel."""
    x = np.array([[[[np.nan, 1, 2, np.nan, 3, 4, np.nan]]]], np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 2])
    got = assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=12), {"x": x})[0]
    assert np.isnan(got[0, 0, 0, 2]) and got[0, 0, 0, 0] == 1


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
def test_float16_pools_compute_in_float32_and_match_onnxruntime(op: str) -> None:
    x = rand(1, 3, 7, 9).astype(np.float16)
    attrs = {} if op.startswith("Global") else {"kernel_shape": [3, 2], "strides": [2, 1]}
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=18)
    assert_matches_ort(model, {"x": x}, rtol=1e-3, atol=1e-3)
