"""If, Loop and Scan are unrolled at import; every case is compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import UnsupportedModelError
from tests.helpers import assert_matches_ort, make_model, rand, run_ort


def _branch(name: str, op: str, value: str) -> object:
    return helper.make_graph([helper.make_node(op, [value], [f"{name}_out"])], name, [],
                             [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)])


def _if_model(cond_input: bool, else_op: str = "Neg") -> tuple:
    x = rand(3, 4)
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", "Relu", "x"),
                              else_branch=_branch("else", else_op, "x"))]
    if cond_input:
        return make_model(nodes, {"x": x, "cond": np.array(True)}, ["y"]), x
    return make_model(nodes, {"x": x}, ["y"], {"cond": np.array(False)}), x


def test_if_on_a_constant_condition_inlines_one_branch() -> None:
    model, x = _if_model(cond_input=False)
    assert_matches_ort(model, {"x": x})


def test_if_on_an_input_condition_with_matching_branches_is_one_model() -> None:
    model, x = _if_model(cond_input=True)
    compiled = hobbit.compile(model)
    assert isinstance(compiled, hobbit.CompiledModel)
    for cond in (True, False):
        feeds = {"x": x, "cond": np.array(cond)}
        np.testing.assert_array_equal(compiled.run(feeds)[0], run_ort(model, feeds)[0])


def test_if_on_an_input_condition_with_different_shapes_specialises_per_value() -> None:
    model, x = _if_model(cond_input=True, else_op="Transpose")
    compiled = hobbit.compile(model)
    assert compiled.value_inputs == ["cond"]
    for cond in (True, False, True):
        feeds = {"x": x, "cond": np.array(cond)}
        np.testing.assert_array_equal(compiled.run(feeds)[0], run_ort(model, feeds)[0])


def test_if_on_data_with_matching_branches_selects_elementwise() -> None:
    """The condition comes from a large input: both branches run and a Where picks."""
    x = rand(64, 80)
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", "Relu", "x"),
                              else_branch=_branch("else", "Neg", "x"))]
    model = make_model(nodes, {"x": x}, ["y"], {"zero": np.array(0, np.float32)})
    compiled = hobbit.compile(model)
    for sign in (1, -1):
        feeds = {"x": np.abs(x) * sign}
        np.testing.assert_array_equal(compiled.run(feeds)[0], run_ort(model, feeds)[0])


def _loop_body() -> object:
    """acc_out = acc_in + x * i; the scan output is acc_out."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "fi"], ["xi"]),
             helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Identity", ["acc_out"], ["scan_out"])]
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, None)])


def test_loop_with_carried_value_and_scan_output() -> None:
    x = rand(2, 5)
    node = helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "history"], body=_loop_body())
    model = make_model([node], {"x": x}, ["acc", "history"],
                       {"trip": np.array(4, np.int64), "acc0": np.zeros((2, 5), np.float32)})
    assert_matches_ort(model, {"x": x})


def test_loop_beyond_the_unroll_limit_is_unsupported() -> None:
    x = rand(2, 5)
    node = helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "history"], body=_loop_body(), name="long_loop")
    model = make_model([node], {"x": x}, ["acc", "history"],
                       {"trip": np.array(100000, np.int64), "acc0": np.zeros((2, 5), np.float32)})
    with pytest.raises(UnsupportedModelError, match="long_loop.*more than"):
        hobbit.compile(model)


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_cumulative_sum(direction: int) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("sum_in", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("next", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [4])])
    x, init = rand(6, 4), rand(4, seed=1)
    node = helper.make_node("Scan", ["init", "x"], ["total", "partial"], body=body, num_scan_inputs=1,
                            scan_input_directions=[direction])
    assert_matches_ort(make_model([node], {"init": init, "x": x}, ["total", "partial"], opset=16),
                       {"init": init, "x": x})
