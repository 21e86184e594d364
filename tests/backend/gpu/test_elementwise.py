"""Element-wise kernels and fused chains on the GPU, against onnxruntime (grid emulation)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort
from tests.helpers import make_model, rand


@pytest.mark.parametrize("shape", [(2, 3, 50, 70), (7,), (1, 1000)])
def test_fused_chain_with_broadcast_operand(shape) -> None:
    bias = rand(*shape[1:2] or (1,), seed=1).reshape((-1,) + (1,) * max(0, len(shape) - 2)) if len(shape) > 1 \
        else rand(1, seed=1)
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Tanh", ["r"], ["y"])]
    model = make_model(nodes, {"x": rand(*shape)}, ["y"], {"b": bias})
    assert_gpu_matches_ort(model, {"x": rand(*shape)}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Sigmoid", "Exp", "Abs", "Neg", "Sqrt", "Floor", "Erf", "Softplus"])
def test_unary(op) -> None:
    x = np.abs(rand(4, 33, seed=2)) if op == "Sqrt" else rand(4, 33, seed=2)
    model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"])
    assert_gpu_matches_ort(model, {"x": x}, rtol=2e-6, atol=1e-6)


def test_two_inputs_broadcast_both_ways() -> None:
    a, b = rand(3, 1, 5, seed=3), rand(1, 4, 1, seed=4)
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Sub", ["m", "a"], ["y"])]
    model = make_model(nodes, {"a": a, "b": b}, ["y"])
    assert_gpu_matches_ort(model, {"a": a, "b": b}, rtol=1e-6, atol=1e-6)


def test_int_and_bool_results() -> None:
    a, b = rand(6, 7, seed=5), rand(6, 7, seed=6)
    nodes = [helper.make_node("Greater", ["a", "b"], ["y"]),
             helper.make_node("Cast", ["a"], ["z"], to=helper.np_dtype_to_tensor_dtype(np.dtype(np.int32)))]
    model = make_model(nodes, {"a": a, "b": b}, ["y", "z"])
    assert_gpu_matches_ort(model, {"a": a, "b": b}, rtol=0, atol=0)
