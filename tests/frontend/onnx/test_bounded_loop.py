"""ONNX Loop on run-time data runs as a BoundedLoop: a while-loop whose condition comes
from the data, a trip count computed from the data, scan outputs cut to the iterations
that ran, zero iterations, and a loop that would run past its bound (a RunError).
Every result is compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import RunError
from hobbit.frontend.onnx.ops.loop import MAX_TRIPS
from tests.helpers import make_model, run_ort


def _body(nodes: list, carried: list[str], outputs: list[str], consts: dict | None = None) -> object:
    """A Loop body with inputs (i, cond_in, *carried) and outputs (cond_out, *outputs)."""
    inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, []),
              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])]
    inputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in carried]
    outs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])]
    outs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs]
    tensors = [helper.make_tensor(name, TensorProto.FLOAT, [], [value]) for name, value in (consts or {}).items()]
    return helper.make_graph(nodes, "body", inputs, outs, tensors)


def _doubling(threshold: float = 100.0, op: str = "Mul") -> object:
    """while x.sum() < threshold: x = x * 2 (op Mul; Add: x + 2), with every x as a scan output."""
    body = _body([helper.make_node(op, ["x_in", "two"], ["x_out"]),
                  helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
                  helper.make_node("Less", ["s", "thr"], ["cond_out"]),
                  helper.make_node("Identity", ["x_out"], ["scan"])],
                 ["x_in"], ["x_out", "scan"], {"two": 2.0})
    nodes = [helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "thr"], ["c0"]),
             helper.make_node("Loop", ["", "c0", "x"], ["y", "history"], body=body, name="doubling")]
    x = np.full((2, 3), 0.5, np.float32)
    return make_model(nodes, {"x": x}, ["y", "history"], {"thr": np.array(threshold, np.float32)})


def _assert_matches(compiled, model, feeds: dict) -> list[np.ndarray]:
    """Equal to onnxruntime; a scan output of no iterations is (0, *its shape) where
    onnxruntime, which cannot tell its shape, answers (0,)."""
    got, want = compiled.run(feeds), run_ort(model, feeds)
    for g, w in zip(got, want):
        if w.shape == (0,) and g.shape[0] == 0:
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-6)
    return got


@pytest.mark.parametrize("threads", [1, 2])
def test_while_loop_on_a_reduce_sum_runs_until_the_data_says_stop(threads: int) -> None:
    model = _doubling()
    compiled = hobbit.compile(model, threads=threads)
    counts = []
    rng = np.random.default_rng(0)
    for scale in (0.01, 1.0, 7.0):
        x = (np.abs(rng.standard_normal((2, 3))) * scale + 0.01).astype(np.float32)
        counts.append(_assert_matches(compiled, model, {"x": x})[1].shape[0])
    assert counts[0] > counts[1] > counts[2] > 0


def test_while_loop_that_runs_no_iteration_returns_its_initial_values() -> None:
    model = _doubling()
    x = np.full((2, 3), 50.0, np.float32)
    y, history = hobbit.compile(model).run({"x": x})
    want_y, want_history = run_ort(model, {"x": x})
    np.testing.assert_array_equal(y, want_y)
    # onnxruntime cannot tell the shape of a scan output no iteration made: it answers (0,)
    assert history.shape == (0, 2, 3) and want_history.size == 0


def test_loop_that_would_run_past_its_bound_is_a_run_error_and_the_model_still_runs() -> None:
    model = _doubling(threshold=np.inf, op="Add")
    compiled = hobbit.compile(model)
    with pytest.raises(RunError, match=rf"doubling.*Loop iteration {MAX_TRIPS} is out of range"):
        compiled.run({"x": np.full((2, 3), 0.5, np.float32)})
    y, history = compiled.run({"x": np.full((2, 3), np.inf, np.float32)})
    assert history.shape == (0, 2, 3) and np.isinf(y).all()


def _counted(carried_only: bool = False) -> object:
    """for i in range(int(max(x))): acc = acc + x * i (scan: acc), x read from outside."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "fi"], ["xi"]),
             helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    outputs = ["acc_out"]
    if not carried_only:
        nodes.append(helper.make_node("Neg", ["acc_out"], ["scan"]))
        outputs.append("scan")
    body = _body(nodes, ["acc_in"], outputs)
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("Cast", ["m"], ["trip"], to=TensorProto.INT64),
             helper.make_node("Loop", ["trip", "", "acc0"], ["acc"] + ([] if carried_only else ["history"]),
                              body=body, name="counted")]
    return make_model(nodes, {"x": np.zeros((3, 4), np.float32)}, ["acc"] + ([] if carried_only else ["history"]),
                      {"acc0": np.ones((3, 4), np.float32)})


@pytest.mark.parametrize("carried_only", [False, True])
def test_trip_count_computed_from_the_data(carried_only: bool) -> None:
    model = _counted(carried_only)
    compiled = hobbit.compile(model)
    assert isinstance(compiled, hobbit.CompiledModel)  # one compiled model for every trip count
    rng = np.random.default_rng(1)
    for top in (0.5, 3.2, 9.9):
        x = rng.uniform(-1, top, (3, 4)).astype(np.float32)
        x.flat[5] = top
        got = _assert_matches(compiled, model, {"x": x})
        if not carried_only:
            assert got[1].shape == (int(top), 3, 4)


def test_a_loop_with_a_constant_trip_count_and_a_condition_from_data_is_bounded_by_the_count() -> None:
    """At most 5 iterations: the scan buffer has 5 rows, and the data can stop it earlier."""
    body = _body([helper.make_node("Add", ["x_in", "one"], ["x_out"]),
                  helper.make_node("ReduceMin", ["x_out"], ["low"], keepdims=0),
                  helper.make_node("Less", ["low", "ten"], ["cond_out"]),
                  helper.make_node("Neg", ["x_out"], ["scan"])],
                 ["x_in"], ["x_out", "scan"], {"one": 1.0, "ten": 10.0})
    nodes = [helper.make_node("Loop", ["five", "", "x"], ["y", "history"], body=body)]
    model = make_model(nodes, {"x": np.zeros(3, np.float32)}, ["y", "history"], {"five": np.array(5, np.int64)})
    compiled = hobbit.compile(model)
    lengths = [_assert_matches(compiled, model, {"x": np.array([v, 20, 30], np.float32)})[1].shape[0]
               for v in (0.0, 7.5, 9.5)]
    assert lengths == [5, 3, 1]


def test_a_check_that_fails_in_the_body_is_a_run_error_of_the_loop() -> None:
    """for i in range(n): scan x[i + k]; an index past x is reported, not read."""
    body = _body([helper.make_node("Add", ["i", "k"], ["at"]),
                  helper.make_node("Gather", ["x", "at"], ["scan"], axis=0),
                  helper.make_node("Identity", ["cond_in"], ["cond_out"])], [], ["scan"])
    nodes = [helper.make_node("Loop", ["n", ""], ["picked"], body=body, name="picker")]
    x = np.arange(5, dtype=np.float32) * 1.5
    model = make_model(nodes, {"x": x, "n": np.array(0, np.int64), "k": np.array(0, np.int64)}, ["picked"])
    compiled = hobbit.compile(model)
    feeds = {"x": x, "n": np.array(3, np.int64), "k": np.array(2, np.int64)}
    _assert_matches(compiled, model, feeds)
    with pytest.raises(RunError, match=r"picker.*index 5 is out of range \[-5, 4\]"):
        compiled.run({**feeds, "k": np.array(3, np.int64)})


def test_a_loop_on_data_inside_a_loop_on_data() -> None:
    """Each of (at most 4) outer iterations doubles x until its sum reaches 100, then subtracts 1."""
    inner = helper.make_graph(
        [helper.make_node("Mul", ["u_in", "two"], ["u_out"]),
         helper.make_node("ReduceSum", ["u_out"], ["su"], keepdims=0),
         helper.make_node("Less", ["su", "thr"], ["c_out"])], "inner",
        [helper.make_tensor_value_info("j", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("u_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("u_out", TensorProto.FLOAT, None)],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    outer = _body([helper.make_node("Loop", ["", "cond_in", "x_in"], ["doubled"], body=inner),
                   helper.make_node("Sub", ["doubled", "one"], ["x_out"]),
                   helper.make_node("Identity", ["x_out"], ["scan"]),
                   helper.make_node("Less", ["i", "three"], ["cond_out"])], ["x_in"], ["x_out", "scan"], {"one": 1.0})
    outer.initializer.append(helper.make_tensor("three", TensorProto.INT64, [], [3]))
    nodes = [helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "thr"], ["c0"]),
             helper.make_node("Loop", ["", "c0", "x"], ["y", "history"], body=outer)]
    model = make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y", "history"],
                       {"thr": np.array(100.0, np.float32)})
    compiled = hobbit.compile(model)
    for value in (0.5, 3.0, 20.0):
        _assert_matches(compiled, model, {"x": np.full((2, 3), value, np.float32)})


@pytest.mark.parametrize("threads", [1, 2])
def test_a_conv_body_gets_the_passes_plans_and_weights_of_a_model(threads: int) -> None:
    """x = Relu(Conv(x)) while max(x) > 0.05, a channel mean per iteration as the scan output:
    the body's Conv has its plan, scratch and packed weights like any model's."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 8, 3, 3)) * 0.08).astype(np.float32)
    body = _body([helper.make_node("Conv", ["x_in", "w"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["x_out"]),
                  helper.make_node("ReduceMax", ["x_out"], ["s"], keepdims=0),
                  helper.make_node("Greater", ["s", "lim"], ["cond_out"]),
                  helper.make_node("ReduceMean", ["x_out"], ["scan"], axes=[2, 3], keepdims=0)],
                 ["x_in"], ["x_out", "scan"])
    body.initializer.append(helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist()))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["x1"], pads=[1, 1, 1, 1]),
             helper.make_node("Loop", ["", "", "x1"], ["y", "history"], body=body)]
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    model = make_model(nodes, {"x": x}, ["y", "history"], {"lim": np.array(0.05, np.float32), "w0": w})
    compiled = hobbit.compile(model, threads=threads)
    lengths = []
    for scale in (1.0, 5.0):
        got, want = compiled.run({"x": x * scale}), run_ort(model, {"x": x * scale})
        for g, e in zip(got, want):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
        lengths.append(got[1].shape[0])
    assert lengths == [6, 8]
