"""schedule="naive" (hobbit.backend.cpu.naive): the plain loop nests agree with onnxruntime over
the attributes each op takes, at one and two threads, and are plain: no vectors, no packed
weights, no plan."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.errors import ConfigError
from tests.helpers import make_model, rand, run_ort


def check(model, feeds: dict[str, np.ndarray], threads: int = 1, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    want = run_ort(model, feeds)
    got = hobbit.compile(model, schedule="naive", threads=threads, cache=False).run(feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


CONVS = [  # (x shape, w shape, attrs)
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 4, 8, 7), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 10), (8, 2, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2], "group": 2}),
    ((1, 6, 9, 9), (6, 1, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2], "group": 6}),
    ((1, 8, 5, 5), (16, 8, 1, 1), {}),
    ((1, 2, 16, 12), (3, 2, 5, 3), {"pads": [2, 1, 2, 1], "strides": [1, 2]}),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CONVS)
def test_conv_with_bias_relu_and_residual(x_shape, w_shape, attrs, threads):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs), helper.make_node("Relu", ["c"], ["r"])]
    model = make_model(nodes, {"x": rand(*x_shape)}, ["r"], {"w": rand(*w_shape, seed=1), "b": rand(w_shape[0], seed=2)})
    check(model, {"x": rand(*x_shape)}, threads)
    y_shape = run_ort(model, {"x": rand(*x_shape)})[0].shape
    residual = [helper.make_node("Conv", ["x", "w"], ["c"], **attrs), helper.make_node("Add", ["c", "s"], ["y"])]
    model = make_model(residual, {"x": rand(*x_shape), "s": rand(*y_shape, seed=3)}, ["y"], {"w": rand(*w_shape, seed=1)})
    check(model, {"x": rand(*x_shape), "s": rand(*y_shape, seed=3)}, threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("a_shape,b_shape,constant", [
    ((5, 7), (7, 9), True),  # a linear layer
    ((1, 64), (64, 33), True),  # one row: threads share the columns
    ((3, 4, 6), (6, 5), True),
    ((2, 3, 4, 6), (2, 1, 6, 5), False),  # broadcast batch dims, both activations
])
def test_matmul(a_shape, b_shape, constant, threads):
    nodes = [helper.make_node("MatMul", ["a", "b"], ["c"]), helper.make_node("Add", ["c", "bias"], ["y"])]
    bias = {"bias": rand(b_shape[-1], seed=4)}
    if constant:
        model = make_model(nodes, {"a": rand(*a_shape)}, ["y"], {"b": rand(*b_shape, seed=1), **bias})
        feeds = {"a": rand(*a_shape)}
    else:
        feeds = {"a": rand(*a_shape), "b": rand(*b_shape, seed=1)}
        model = make_model(nodes, feeds, ["y"], bias)
    check(model, feeds, threads)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [3, 3], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1,
                     "ceil_mode": 1}),
])
def test_pool(op, attrs):
    x = rand(2, 3, 9, 10)
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=19)
    check(model, {"x": x}, threads=2)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), ([3], 1), ([1, 2, 3], 1)])
def test_reduce(op, axes, keepdims):
    x = rand(2, 3, 4, 5)
    axes_init = {"axes": np.array(axes, np.int64)}
    model = make_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], {"x": x}, ["y"], axes_init,
                       opset=18)
    check(model, {"x": x})


def test_kernels_are_plain_loops():
    """No vector types in the naive kernels' IR, weights in the model's own layout, no plan."""
    x = rand(1, 8, 14, 14)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["c"], ["f"]), helper.make_node("MatMul", ["f", "fc"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"w": rand(16, 8, 3, 3, seed=1), "fc": rand(16 * 14 * 14, 10, seed=2)})
    naive = lower_to_llvm(model, threads=1, schedule="naive")
    auto = lower_to_llvm(model, threads=1)
    kernels = [line for line in naive.llvm_ir.splitlines() if line.startswith("define") and "hobbit_main" not in line]
    assert any('"Conv[' in line for line in kernels) and any('"MatMul[' in line for line in kernels)
    assert " x float>" not in naive.llvm_ir
    assert " x float>" in auto.llvm_ir  # the auto schedule's microkernels, for contrast
    assert not naive.plan.kernels
    conv = next(n for n in naive.graph.nodes if n.op == "Conv")
    assert conv.inputs[1].shape == (16, 8, 3, 3)


def test_naive_is_fp32_and_cpu_only():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(4)}, ["y"])
    with pytest.raises(ConfigError, match="float32"):
        hobbit.compile(model, schedule="naive", precision="bf16")
    with pytest.raises(ConfigError, match="schedule= must be one of"):
        hobbit.compile(model, schedule="fast")
    with pytest.raises(ConfigError, match="CPU mode"):
        hobbit.compile(model, schedule="naive", target="cuda")
