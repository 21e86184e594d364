"""Concat in place: producers write their slices of the output directly, the Concat
emits no code, and results match onnxruntime; ineligible Concats still copy."""

from __future__ import annotations

import numpy as np
from onnx import helper

import hobbit
from hobbit.passes.memory import needs_code
from tests.helpers import make_model, rand, run_ort


def _fire(axis=1, extra_reader=False, raw_input=False):
    """SqueezeNet's Fire module: squeeze 1x1, then expand 1x1 and 3x3, concatenated on C."""
    x = rand(1, 16, 9, 9)
    nodes = [helper.make_node("Conv", ["x", "Ws"], ["s"], name="squeeze"),
             helper.make_node("Relu", ["s"], ["sr"], name="squeeze_relu"),
             helper.make_node("Conv", ["sr", "W1"], ["e1"], name="expand1x1"),
             helper.make_node("Relu", ["e1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["sr", "W3"], ["e3"], pads=[1, 1, 1, 1], name="expand3x3"),
             helper.make_node("Relu", ["e3"], ["r3"], name="relu3"),
             helper.make_node("Concat", ["x" if raw_input else "r1", "r3"], ["cat"], axis=axis, name="cat"),
             helper.make_node("Sigmoid", ["cat"], ["y"], name="head")]
    outputs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["r1"], ["z"], name="other_reader"))
        outputs.append("z")
    inits = {"Ws": rand(8, 16, 1, 1, seed=1), "W1": rand(16, 8, 1, 1, seed=2), "W3": rand(16, 8, 3, 3, seed=3)}
    return make_model(nodes, {"x": x}, outputs, inits), x


def _check(model, x, threads=1):
    m = hobbit.compile(model, threads=threads)
    for got, want in zip(m.run({"x": x}), run_ort(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return next(n for n in m.report.graph.nodes if n.op == "Concat")


def test_channel_concat_is_written_in_place():
    for threads in (1, 2):
        concat = _check(*_fire(), threads=threads)
        assert concat.attrs.get("in_place") and not needs_code(concat)


def test_concat_copies_when_slices_are_not_contiguous_or_inputs_are_shared():
    for model, x in (_fire(axis=2), _fire(extra_reader=True), _fire(raw_input=True)):
        assert needs_code(_check(model, x))
