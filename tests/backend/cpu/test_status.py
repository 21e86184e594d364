"""Run-time checks (hobbit.emit.status): every op that reads positions from data
refuses an out-of-range one with a RunError naming the node and the value, where
onnxruntime refuses it too; valid data in the same compiled model still answers
correctly before and after, at one thread and at two (the team walk)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import hobbit
from hobbit.errors import RunError, ShapeError, UnsupportedModelError
from tests.helpers import make_model, rand, run_ort

ORT_REFUSES = (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.InvalidArgument)
X = np.arange(24, dtype=np.float32).reshape(4, 6)


def _i64(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


# (op, attributes, opset, good feeds, bad feeds, expected message part)
CASES = {
    "Gather": ({"axis": 0}, 13, {"x": X, "i": _i64(0, -4, 3)}, {"x": X, "i": _i64(0, 4, 1)},
               "index 4 is out of range [-4, 3] along axis 0"),
    "Gather-int32-axis1": ({"axis": 1}, 13, {"x": X, "i": np.array([5, -6], np.int32)},
                           {"x": X, "i": np.array([1, -7], np.int32)}, "index -7 is out of range [-6, 5] along axis 1"),
    "Gather-huge": ({"axis": 0}, 13, {"x": X, "i": _i64(1)}, {"x": X, "i": _i64(10**12)}, "index 1000000000000"),
    "GatherElements": ({"axis": 1}, 13, {"x": X, "i": _i64([0, 5], [-6, 1])}, {"x": X, "i": _i64([0, 6], [1, 1])},
                       "index 6 is out of range [-6, 5] along axis 1"),
    "GatherND": ({}, 13, {"x": X, "i": _i64([3, 5], [-4, -6])}, {"x": X, "i": _i64([3, 5], [4, 0])},
                 "index 4 is out of range [-4, 3] along axis 0"),
    "GatherND-batch": ({"batch_dims": 1}, 13, {"x": X, "i": _i64([5], [0], [1], [2])},
                       {"x": X, "i": _i64([5], [0], [9], [2])}, "index 9 is out of range [-6, 5] along axis 1"),
    "ScatterElements": ({"axis": 0}, 18, {"x": X, "i": _i64([3, -1]), "u": np.ones((1, 2), np.float32)},
                        {"x": X, "i": _i64([3, -5]), "u": np.ones((1, 2), np.float32)},
                        "index -5 is out of range [-4, 3] along axis 0"),
    "ScatterND": ({}, 18, {"x": X, "i": _i64([3], [-4]), "u": np.ones((2, 6), np.float32)},
                  {"x": X, "i": _i64([3], [4]), "u": np.ones((2, 6), np.float32)},
                  "index 4 is out of range [-4, 3] along axis 0"),
    "ReverseSequence": ({"batch_axis": 1, "time_axis": 0}, 13, {"x": X, "i": _i64(4, 0, 1, 2, 3, 4)},
                        {"x": X, "i": _i64(4, 0, 5, 2, 3, 4)}, "sequence length 5 is out of range [0, 4]"),
    "TensorScatter": ({"axis": 1}, 24, {"x": X.reshape(2, 4, 3), "u": np.ones((2, 2, 3), np.float32), "i": _i64(2, 0)},
                      {"x": X.reshape(2, 4, 3), "u": np.ones((2, 2, 3), np.float32), "i": _i64(0, 3)},
                      "write position 3 is out of range [0, 2]"),
}


def _model(case: str) -> tuple:
    attrs, opset, good, bad, message = CASES[case]
    op = case.split("-")[0]
    node = helper.make_node(op, list(good), ["y"], name=f"my_{op.lower()}", **attrs)
    return make_model([node], good, ["y"], opset=opset), good, bad, message, op


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_out_of_range_data_is_a_run_error_like_onnxruntime(case: str, threads: int) -> None:
    model, good, bad, message, op = _model(case)
    compiled = hobbit.compile(model, threads=threads, cache=False)
    want = run_ort(model, good)[0]
    np.testing.assert_array_equal(compiled.run(good)[0], want)
    with pytest.raises(ORT_REFUSES):
        run_ort(model, bad)
    with pytest.raises(RunError) as info:
        compiled.run(bad)
    assert f"node 'my_{op.lower()}' ({op})" in str(info.value)
    assert message in str(info.value)
    np.testing.assert_array_equal(compiled.run(good)[0], want)


def test_recurrence_sequence_lengths_are_checked() -> None:
    seq, batch, hidden = 5, 3, 2
    feeds = {"X": rand(seq, batch, 4), "W": rand(1, hidden, 4, seed=1), "R": rand(1, hidden, hidden, seed=2),
             "B": rand(1, 2 * hidden, seed=3), "L": np.array([5, 0, 2], np.int32)}
    model = make_model([helper.make_node("RNN", list(feeds), ["Y"], hidden_size=hidden, name="rnn")], feeds, ["Y"],
                       opset=14)
    compiled = hobbit.compile(model, cache=False)
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)
    for lengths in ([6, 1, 1], [-1, 1, 1]):
        with pytest.raises(RunError, match=rf"sequence length {lengths[0]} is out of range \[0, 5\]"):
            compiled.run(dict(feeds, L=np.array(lengths, np.int32)))


def test_the_first_of_several_failing_nodes_is_named() -> None:
    nodes = [helper.make_node("Gather", ["x", "i"], ["a"], name="first", axis=0),
             helper.make_node("Gather", ["x", "j"], ["b"], name="second", axis=1)]
    feeds = {"x": X, "i": _i64(9), "j": _i64(9)}
    compiled = hobbit.compile(make_model(nodes, feeds, ["a", "b"], opset=13), cache=False)
    with pytest.raises(RunError, match="node 'first'"):
        compiled.run(feeds)
    with pytest.raises(RunError, match="node 'second'.*along axis 1"):
        compiled.run(dict(feeds, i=_i64(1)))


def test_one_hot_out_of_range_is_all_off_as_specified() -> None:
    """OneHot is the exception: ONNX defines an index outside [-depth, depth) as an all-off row."""
    feeds = {"i": _i64(5, 1, -1, -4)}
    model = make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], feeds, ["y"],
                       {"d": _i64(3), "v": np.array([0, 1], np.float32)})
    np.testing.assert_array_equal(hobbit.compile(model, cache=False).run(feeds)[0], run_ort(model, feeds)[0])


@pytest.mark.parametrize("op,attrs", [("Gather", {"axis": 0}), ("GatherElements", {"axis": 0}),
                                      ("GatherND", {})])
def test_constant_out_of_range_indices_are_a_compile_error(op: str, attrs: dict) -> None:
    """Folded or converted at compile time, the same indices must not answer either."""
    indices = _i64([7]) if op != "Gather" else _i64(7)
    model = make_model([helper.make_node(op, ["x", "i"], ["y"], **attrs)], {}, ["y"], {"x": X, "i": indices},
                       opset=13)
    with pytest.raises((ShapeError, UnsupportedModelError), match="out of range"):
        hobbit.compile(model, cache=False)


def test_status_records_survive_the_compile_cache(tmp_path, monkeypatch) -> None:
    """A model loaded from the cache carries its table of check records in its object code."""
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path))
    model, good, bad, message, _ = _model("GatherND")
    hobbit.compile(model, cache=True)
    cached = hobbit.compile(model, cache=True)
    with pytest.raises(RunError, match=message.replace("[", r"\[").replace("]", r"\]")):
        cached.run(bad)
