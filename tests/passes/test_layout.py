"""The layout pass: transposed (KO) conv weights when H*W fills vectors badly,
panel-packed constant MatMul operands; results unchanged vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.target import host_target
from hobbit.frontend.onnx.importer import import_onnx
from hobbit.plan.gemm import unpack_panels
from hobbit.passes.layout import choose_layouts, idle_fraction
from tests.helpers import make_model, rand, run_ort


def _conv_model(c, hw, oc, k=1, stride=1, residual=False):
    x = rand(1, c, hw, hw)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[k // 2] * 4, strides=[stride] * 2)]
    inits = {"W": rand(oc, c, k, k, seed=1) * 0.2, "B": rand(oc, seed=2)}
    out = "c"
    if residual:
        oh = (hw + 2 * (k // 2) - k) // stride + 1
        inits["R"] = rand(1, oc, oh, oh, seed=3)
        nodes += [helper.make_node("Add", ["c", "R"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        out = "y"
    return make_model(nodes, {"x": x}, [out], inits), x


def test_idle_fraction():
    assert idle_fraction(49, 16) == pytest.approx(15 / 64)
    assert idle_fraction(3136, 16) == 0


@pytest.mark.parametrize("c,hw,oc,k,stride,residual,threads", [
    (64, 7, 64, 1, 1, False, 1),
    (40, 7, 48, 1, 1, True, 1),
    (32, 14, 64, 3, 2, True, 2),      # strided 3x3 through im2col, 7x7 output
    (96, 7, 128, 3, 1, False, 1),     # Winograd candidates stay Winograd
])
def test_conv_layouts_match_onnxruntime(c, hw, oc, k, stride, residual, threads):
    model, x = _conv_model(c, hw, oc, k, stride, residual)
    m = hobbit.compile(model, threads=threads)
    np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_layout_pass_transposes_weights_only_where_lanes_idle():
    lanes = host_target().lanes(4)
    small, _ = _conv_model(2 * lanes, 7, 2 * lanes)      # 49 positions: poor fit
    large, _ = _conv_model(2 * lanes, 8, 2 * lanes)      # 64 positions: exact fit
    for model, expected in ((small, "KO"), (large, "OIHW")):
        graph = choose_layouts(import_onnx(model), host_target())
        (conv,) = graph.nodes
        assert conv.attrs["weight_layout"] == expected
    graph = choose_layouts(import_onnx(small), host_target())
    w = import_onnx(small).nodes[0].inputs[1].const
    np.testing.assert_array_equal(unpack_panels(graph.nodes[0].inputs[1].const, w.shape[0]),
                                  w.reshape(w.shape[0], -1).T)


def test_constant_matmul_operand_is_packed_in_panels_and_exact():
    a = rand(3, 70)
    nodes = [helper.make_node("Gemm", ["a", "W", "b"], ["y"], transB=1)]
    inits = {"W": rand(45, 70, seed=1), "b": rand(45, seed=2)}
    model = make_model(nodes, {"a": a}, ["y"], inits)
    graph = choose_layouts(import_onnx(model), host_target())
    matmul = next(n for n in graph.nodes if n.op == "MatMul")
    assert matmul.attrs["b_layout"] == "panels" and matmul.attrs["n"] == 45
    np.testing.assert_array_equal(unpack_panels(matmul.inputs[1].const, 45), inits["W"].T)
    got = hobbit.compile(model).run({"a": a})[0]
    np.testing.assert_allclose(got, run_ort(model, {"a": a})[0], rtol=1e-5, atol=1e-5)
