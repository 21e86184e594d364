"""ReduceX ops against onnxruntime: attribute and input axes, keepdims, negative
axes, noop_with_empty_axes, integer, float16 and bool tensors, empty reduced axes,
constant folding."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.compiler import lower_to_llvm
from tests.helpers import assert_matches_ort, make_model, rand

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
       "ReduceLogSum"]
SHAPE = (2, 3, 5, 7)


def _feeds(shape=SHAPE):
    x = rand(*shape)
    return {"x": x, "xp": np.abs(x) + 0.5}  # ReduceLogSum and ReduceProd want positive, moderate inputs


def _input_of(op):
    return "xp" if op in ("ReduceLogSum", "ReduceProd") else "x"


@pytest.mark.parametrize("axes", [None, [1], [-1], [0, 2], [2, 3], [1, 3], [0, 1, 2, 3], [-3, -1]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_attribute(axes, keepdims):
    """Opset 11: axes is an attribute; every reducer in one model."""
    extra = {} if axes is None else {"axes": axes}
    nodes = [helper.make_node(op, [_input_of(op)], [op], keepdims=keepdims, **extra) for op in OPS]
    feeds = _feeds()
    assert_matches_ort(make_model(nodes, feeds, OPS, opset=11), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axes", [None, [0], [-2], [1, 2], [0, 3]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_input(axes, keepdims):
    """Opset 18: axes is an optional input for every reducer."""
    inits = {} if axes is None else {"axes": np.array(axes, dtype=np.int64)}
    nodes = [helper.make_node(op, [_input_of(op)] + ([] if axes is None else ["axes"]), [op], keepdims=keepdims)
             for op in OPS]
    feeds = _feeds()
    assert_matches_ort(make_model(nodes, feeds, OPS, inits, opset=18), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
def test_reducesum_axes_input_at_13(opset):
    """ReduceSum takes axes as an input from opset 13, the others still as an attribute."""
    feeds = {"x": rand(3, 4, 9)}
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["sum"], keepdims=0),
             helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0, -1]),
             helper.make_node("ReduceMax", ["x"], ["max"], axes=[1], keepdims=0)]
    model = make_model(nodes, feeds, ["sum", "mean", "max"], {"axes": np.array([-1, 1], np.int64)}, opset=opset)
    assert_matches_ort(model, feeds)


def test_noop_with_empty_axes():
    """Nothing is reduced, but pre/post maps (square, abs, sqrt, log) still apply, as in onnxruntime."""
    feeds = _feeds((3, 5))
    nodes = [helper.make_node(op, [_input_of(op)], [op], noop_with_empty_axes=1) for op in OPS]
    assert_matches_ort(make_model(nodes, feeds, OPS, opset=18), feeds)


@pytest.mark.parametrize("shape,axes", [((1000,), [0]), ((3, 1, 1, 40), [1, 2]), ((64, 33), [0]), ((64, 33), [1]),
                                        ((5, 1), [0]), ((2, 17, 3, 5), [1, 3])])
def test_odd_shapes(shape, axes):
    """Long rows (vector + masked tail), size-1 dims, short rows, alternating kept/reduced runs."""
    feeds = {"x": rand(*shape)}
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2"]
    nodes = [helper.make_node(op, ["x"], [op], axes=axes, keepdims=0) for op in ops]
    assert_matches_ort(make_model(nodes, feeds, ops, opset=12), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions(dtype):
    x = np.random.default_rng(0).integers(-50, 50, (3, 4, 6)).astype(dtype)
    ops = ["ReduceSum", "ReduceMax", "ReduceMin"]
    nodes = [helper.make_node(op, ["x"], [op], axes=[1, 2], keepdims=1) for op in ops]
    nodes.append(helper.make_node("ReduceSum", ["x"], ["sum0"], axes=[0], keepdims=0))
    assert_matches_ort(make_model(nodes, {"x": x}, ops + ["sum0"], opset=12), {"x": x}, rtol=0, atol=0)


def test_float64():
    x = rand(4, 5, 6, dtype=np.float64)
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"]
    nodes = [helper.make_node(op, ["x"], [op], axes=[0, 2]) for op in ops]
    assert_matches_ort(make_model(nodes, {"x": x}, ops, opset=12), {"x": x}, rtol=1e-10, atol=1e-12)


def test_constant_input_is_folded():
    w = rand(4, 6)
    nodes = [helper.make_node("ReduceMean", ["w"], ["m"], axes=[0], keepdims=0),
             helper.make_node("Add", ["x", "m"], ["y"])]
    feeds = {"x": rand(3, 6, seed=1)}
    model = make_model(nodes, feeds, ["y"], {"w": w}, opset=13)
    assert not any(n.op == "ReduceMean" for n in lower_to_llvm(model).graph.nodes)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("shape,axis", [((3, 17), 1), ((3, 17), 0), ((2, 5, 7, 3), -2), ((40,), 0)])
@pytest.mark.parametrize("keepdims,last", [(1, 0), (0, 1)])
def test_argmax_argmin(shape, axis, keepdims, last):
    x = np.round(rand(*shape) * 2)  # ties, so select_last_index matters
    ops = ["ArgMax", "ArgMin"]
    nodes = [helper.make_node(op, ["x"], [op], axis=axis, keepdims=keepdims, select_last_index=last) for op in ops]
    assert_matches_ort(make_model(nodes, {"x": x}, ops, opset=13), {"x": x}, rtol=0, atol=0)


def test_argmax_int64_default_axis():
    x = np.random.default_rng(1).integers(-5, 5, (6, 4)).astype(np.int64)
    node = helper.make_node("ArgMax", ["x"], ["y"])
    assert_matches_ort(make_model([node], {"x": x}, ["y"], opset=11), {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("opset,keepdims", [(13, 0), (18, 1)])
def test_reduce_log_sum_exp(opset, keepdims):
    """Decomposed into max, exp, sum, log: stable for large inputs."""
    x = rand(3, 4, 5) * 30
    if opset >= 18:
        node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=keepdims)
        inits = {"axes": np.array([0, -1], np.int64)}
    else:
        node = helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[0, -1], keepdims=keepdims)
        inits = {}
    assert_matches_ort(make_model([node], {"x": x}, ["y"], inits, opset=opset), {"x": x}, rtol=1e-5, atol=1e-5)


def _axes_input_model(op, x, axes, opset, keepdims=0):
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    return make_model([node], {"x": x}, ["y"], {"axes": np.array(axes, np.int64)}, opset=opset)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_float16_reductions_run_in_float32(op):
    x = (np.abs(rand(3, 4, 6)) + 0.5).astype(np.float16)
    assert_matches_ort(_axes_input_model(op, x, [1, 2], 18), {"x": x}, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_bool_reductions_are_any_and_all(op):
    x = np.array([[True, False, True], [True, True, True], [False, False, False]])
    assert_matches_ort(_axes_input_model(op, x, [1], 20, keepdims=1), {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceL2"])
def test_reduction_over_an_empty_axis_gives_the_identity(op):
    x = np.zeros((2, 0, 3), np.float32)
    assert_matches_ort(_axes_input_model(op, x, [1], 18), {"x": x})
