"""Sequences: tensors in a list whose length is known when compiling (inputs: per call)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import hobbit
from hobbit import onnx_backend
from tests.helpers import make_model, rand, run_ort


def test_split_to_sequence_then_concat_matches_onnxruntime() -> None:
    x = rand(6, 5)
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["seq"], axis=0),
             helper.make_node("SequenceErase", ["seq", "first"], ["rest"]),
             helper.make_node("SequenceLength", ["rest"], ["n"]),
             helper.make_node("ConcatFromSequence", ["rest"], ["y"], axis=1, new_axis=1)]
    model = make_model(nodes, {"x": x}, ["y", "n"], {"split": np.array(2, np.int64),
                                                       "first": np.array(0, np.int64)}, opset=17)
    got = hobbit.compile(model).run({"x": x})
    for g, e in zip(got, run_ort(model, {"x": x})):
        np.testing.assert_array_equal(g, e)


def _sequence_model() -> object:
    """Insert a tensor at an input position into an input sequence; output the sequence."""
    graph = helper.make_graph(
        [helper.make_node("SequenceInsert", ["seq", "t", "pos"], ["out"])], "seq",
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
        [helper.make_tensor_sequence_value_info("out", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_sequence_input_and_output_through_the_backend() -> None:
    """One prepared model serves sequences of different lengths and element shapes."""
    rep = onnx_backend.prepare(_sequence_model())
    t = rand(2, seed=9)
    for items, pos in (([rand(3), rand(3, seed=1)], 1), ([rand(2, 2, seed=2)], 0), ([], 0)):
        out, = rep.run([items, t, np.array(pos, np.int64)])
        want = items[:pos] + [t] + items[pos:]
        assert len(out) == len(want)
        for got, expected in zip(out, want):
            np.testing.assert_array_equal(got, expected)


def test_sequence_input_must_be_a_list_of_arrays() -> None:
    model = hobbit.compile(_sequence_model())
    try:
        model.run({"seq": rand(3), "t": rand(2), "pos": np.array(0, np.int64)})
    except hobbit.InputError as exc:
        assert "'seq' is a sequence" in str(exc)
    else:
        raise AssertionError("a plain array for a sequence input was accepted")
