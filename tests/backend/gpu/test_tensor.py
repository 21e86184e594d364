"""Concat, Copy and Transpose on the GPU against onnxruntime (grid emulation)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.frontend.onnx.importer import import_onnx
from hobbit.passes import GPU_PIPELINE, run_pipeline
from hobbit.target import gpu_target
from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort
from tests.helpers import make_model, rand


@pytest.mark.parametrize("axis,shapes", [
    (1, [(2, 3, 5, 7), (2, 1, 5, 7), (2, 6, 5, 7)]),
    (3, [(2, 3, 4, 5), (2, 3, 4, 1), (2, 3, 4, 9)]),
    (0, [(1, 33), (2, 33), (3, 33)]),
])
def test_concat_of_three(axis, shapes) -> None:
    """The inputs come from kernels (a Relu each), so the Concat copies them: no input is a
    graph input the Concat could read in place."""
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(len(shapes))]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(len(shapes))], ["y"], axis=axis))
    assert_gpu_matches_ort(make_model(nodes, feeds, ["y"]), feeds, rtol=0, atol=0)


def test_concat_of_many_big_inputs() -> None:
    """Inputs of several blocks each, of a size that is no multiple of a block's span."""
    feeds = {f"x{i}": rand(1, 5 + i, 30, 31, seed=i) for i in range(5)}
    nodes = [helper.make_node("Concat", list(feeds), ["y"], axis=1)]
    gm = assert_gpu_matches_ort(make_model(nodes, feeds, ["y"]), feeds, rtol=0, atol=0,
                                targets=("cuda:sm_90", "rocm:gfx942"))[0]
    assert gm.launches[0].grid[0] > 5


def test_copy_of_an_output_that_is_an_input() -> None:
    """Legalisation gives a graph output that is a view of an input its own buffer: a Copy
    (the op squeezenet's GPU graph ends with), run by the element-wise kernels."""
    x = rand(2, 3, 4, seed=1)
    model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=1)], {"x": x}, ["y"])
    graph = run_pipeline(import_onnx(model), GPU_PIPELINE, gpu_target("cuda"))
    assert [n.op for n in graph.nodes if n.op != "Reshape"] == ["Copy"]
    assert_gpu_matches_ort(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("shape,perm", [
    ((2, 3, 5, 7), (0, 2, 3, 1)),
    ((4, 33, 17), (2, 0, 1)),
    ((3, 1, 4, 2, 5), (4, 1, 3, 0, 2)),
    ((6, 9), ()),
])
def test_transpose(shape, perm) -> None:
    x = rand(*shape, seed=2)
    attrs = {"perm": list(perm)} if perm else {}
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], **attrs)]
    assert_gpu_matches_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=0, atol=0)


def test_int64_concat() -> None:
    feeds = {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "b": np.arange(4, dtype=np.int64).reshape(2, 2)}
    nodes = [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    assert_gpu_matches_ort(make_model(nodes, feeds, ["y"]), feeds, rtol=0, atol=0,
                           targets=("cuda:sm_90", "rocm:gfx942"))
