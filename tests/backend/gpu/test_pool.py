"""MaxPool and AveragePool on the GPU against onnxruntime (grid emulation): pads, strides,
dilations, ceil_mode, count_include_pad, ragged sizes, batch 2, integer max, a window too
big to unroll; the Indices output is declined at import."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import UnsupportedModelError
from hobbit.frontend.onnx.importer import import_onnx
from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort
from tests.helpers import make_model, rand, sample

CASES = [  # (shape, attrs)
    ((1, 3, 11, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 12, 7), {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0]}),
    ((1, 2, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [2, 1, 2, 1], "ceil_mode": 1}),
]


@pytest.mark.parametrize("shape,attrs", CASES)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool(op, shape, attrs) -> None:
    x = rand(*shape, seed=1)
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    assert_gpu_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)


def test_average_counting_pads() -> None:
    x = rand(2, 3, 9, 8, seed=2)
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], count_include_pad=1, ceil_mode=1)]
    assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=1e-5, atol=1e-6)


def test_dilated_max_pool() -> None:
    x = rand(1, 2, 13, 12, seed=3)
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[1, 2],
                              dilations=[2, 3], pads=[2, 1, 1, 1])]
    assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_window_too_big_to_unroll(op) -> None:
    x = rand(1, 3, 15, 14, seed=4)
    nodes = [helper.make_node(op, ["x"], ["y"], kernel_shape=[9, 8], strides=[3, 3], pads=[3, 2, 3, 2])]
    assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=1e-5, atol=1e-6)


def test_integer_max_pool() -> None:
    x = sample((1, 2, 7, 9), np.int8, seed=5)
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=0, atol=0,
                           targets=("cuda:sm_90", "rocm:gfx942"))


def test_large_pool_fills_several_outputs_per_thread() -> None:
    """Enough outputs that each thread computes four of them (flat_plan)."""
    x = rand(1, 64, 112, 112, seed=6)
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    gm, = assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=0, atol=0,
                                 targets=("cuda:sm_90",), emulated=("cuda:sm_90",))
    assert gm.launches[0].threads == 256


def test_global_pools_are_reductions() -> None:
    """GlobalAveragePool and GlobalMaxPool import as ReduceMean / ReduceMax (the reductions'
    kernels), so the pool kernels never see them."""
    x = rand(1, 4, 5, 5, seed=7)
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], {"x": x}, ["y"])
    assert [n.op for n in import_onnx(model).nodes] == ["ReduceMean"]


def test_max_pool_indices_declined() -> None:
    x = rand(1, 1, 4, 4, seed=8)
    model = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])], {"x": x}, ["y", "i"])
    with pytest.raises(UnsupportedModelError, match="Indices"):
        hobbit.compile(model, target="cuda", cache=False)
