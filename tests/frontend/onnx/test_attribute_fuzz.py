"""Attribute fuzzing: one-node models with drawn attribute values (negative, zero, out of
range, repeated), constant inputs and input shapes, run by hobbit and onnxruntime.

The property: hobbit either gives onnxruntime's answer or raises a HobbitError subclass.
It never raises another exception type, and never answers where onnxruntime refuses (at
session creation or at run time). Refusing a model onnxruntime accepts is allowed here
(hobbit may not support a variant); tests/frontend/onnx/test_rules.py pins the refusals
themselves. Hypothesis runs derandomized, so CI sees the same cases every run."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import hobbit
from hobbit.errors import HobbitError
from tests.helpers import make_model

EXAMPLES = 40  # per op: 760 models, about 20 s of one core
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

small_int = st.integers(-2, 4)


def _ints(draw, length: int, values=small_int) -> list[int]:
    """`length` entries, or now and then a list of the wrong length."""
    count = draw(st.sampled_from([length, length, length, max(length - 1, 1), length + 1]))
    return draw(st.lists(values, min_size=count, max_size=count))


def _shape(draw, rank: int, low: int = 1, high: int = 4) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(low, high), min_size=rank, max_size=rank)))


def _data(shape: tuple[int, ...], dtype=np.float32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-6, 7, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


class Case:
    """A one-node model: its op, attributes, graph inputs (fed) and initializers."""

    def __init__(self, op: str, attrs: dict, inputs: dict[str, np.ndarray], consts: dict[str, np.ndarray] | None = None,
                 order: list[str] | None = None, outputs: int = 1, opset: int = 17):
        self.op, self.attrs, self.inputs, self.consts = op, attrs, inputs, consts or {}
        self.order = order or [*inputs, *self.consts]
        self.outputs = [f"y{i}" for i in range(outputs)]
        self.opset = opset

    def model(self) -> onnx.ModelProto:
        node = helper.make_node(self.op, self.order, self.outputs, name="fuzzed", **self.attrs)
        return make_model([node], self.inputs, self.outputs, self.consts, self.opset)

    def __repr__(self) -> str:
        shapes = {n: a.shape for n, a in self.inputs.items()}
        consts = {n: a.tolist() if a.size <= 8 else a.shape for n, a in self.consts.items()}
        return f"{self.op}(opset {self.opset}, attrs={self.attrs}, inputs={shapes}, consts={consts})"


# -- per-op drawers ------------------------------------------------------------------------

def _conv(draw) -> Case:
    spatial = draw(st.integers(1, 2))
    group = draw(st.sampled_from([1, 1, 2, 0, -1]))
    channels = draw(st.sampled_from([2, 4])) if group == 2 else draw(st.integers(1, 3))
    x = _data((1, channels) + _shape(draw, spatial, 3, 6))
    kernel = _shape(draw, spatial, 1, 3)
    w = _data((draw(st.integers(1, 3)) * max(group, 1), max(channels // max(group, 1), 1)) + kernel, seed=1)
    attrs = {"strides": _ints(draw, spatial), "dilations": _ints(draw, spatial), "pads": _ints(draw, 2 * spatial)}
    attrs = {k: v for k, v in attrs.items() if draw(st.booleans())}
    if group != 1:
        attrs["group"] = group
    if draw(st.booleans()):
        attrs["kernel_shape"] = _ints(draw, spatial, st.integers(0, 3))
    return Case("Conv", attrs, {"x": x}, {"w": w})


def _pool(op: str):
    def draw_case(draw) -> Case:
        spatial = draw(st.integers(1, 2))
        x = _data((1, 2) + _shape(draw, spatial, 2, 6))
        attrs = {"kernel_shape": _ints(draw, spatial, st.integers(-1, 3))}
        for name, count in (("strides", spatial), ("pads", 2 * spatial), ("dilations", spatial)):
            if draw(st.booleans()) and (name != "dilations" or op == "MaxPool"):
                attrs[name] = _ints(draw, count)
        if draw(st.booleans()):
            attrs["ceil_mode"] = 1
        return Case(op, attrs, {"x": x})
    return draw_case


def _flatten(draw) -> Case:
    rank = draw(st.integers(1, 4))
    return Case("Flatten", {"axis": draw(st.integers(-rank - 2, rank + 2))}, {"x": _data(_shape(draw, rank))})


def _split(draw) -> Case:
    rank = draw(st.integers(1, 3))
    x = _data(_shape(draw, rank, 1, 6))
    axis = draw(st.integers(-rank, rank - 1))  # onnxruntime 1.32 aborts the process on others
    outputs = draw(st.integers(1, 3))
    if draw(st.booleans()):  # one output per num_outputs: onnxruntime 1.32 aborts the process on others
        count = draw(st.integers(-1, 4))
        return Case("Split", {"axis": axis, "num_outputs": count}, {"x": x}, outputs=max(count, 1), opset=18)
    if draw(st.booleans()):  # sizes that add up, zeros allowed
        cuts = sorted(draw(st.lists(st.integers(0, x.shape[axis]), min_size=outputs - 1, max_size=outputs - 1)))
        sizes = np.diff([0, *cuts, x.shape[axis]]).astype(np.int64)
    else:  # as many as there are outputs: onnxruntime 1.32 aborts the process on other counts
        sizes = np.array(draw(st.lists(st.integers(-1, 4), min_size=outputs, max_size=outputs)), np.int64)
    return Case("Split", {"axis": axis}, {"x": x}, {"split": sizes}, outputs=outputs)


def _axes_op(op: str):
    def draw_case(draw) -> Case:
        rank = draw(st.integers(1, 3))
        shape = _shape(draw, rank, 1, 3)
        axes = np.array(draw(st.lists(st.integers(-rank - 2, rank + 1), min_size=1, max_size=3)), np.int64)
        return Case(op, {}, {"x": _data(shape)}, {"axes": axes})
    return draw_case


def _concat(draw) -> Case:
    rank = draw(st.integers(1, 3))
    shape = _shape(draw, rank)
    axis = draw(st.integers(-rank - 1, rank))
    other = list(shape)
    if draw(st.booleans()) and -rank <= axis < rank:
        other[axis] = draw(st.integers(1, 4))
    return Case("Concat", {"axis": axis}, {"a": _data(shape), "b": _data(tuple(other), seed=1)})


def _gather(draw) -> Case:
    rank = draw(st.integers(1, 3))
    shape = _shape(draw, rank)
    axis = draw(st.integers(-rank - 1, rank))
    dim = shape[axis] if -rank <= axis < rank else 2
    indices = np.array(draw(st.lists(st.integers(-dim - 1, dim), min_size=1, max_size=4)), np.int64)
    if draw(st.booleans()):
        return Case("Gather", {"axis": axis}, {"x": _data(shape), "i": indices})
    return Case("Gather", {"axis": axis}, {"x": _data(shape)}, {"i": indices})


def _transpose(draw) -> Case:
    rank = draw(st.integers(1, 4))
    perm = _ints(draw, rank, st.integers(-rank, rank))
    if draw(st.booleans()):
        perm = list(draw(st.permutations(range(rank))))
    return Case("Transpose", {"perm": perm}, {"x": _data(_shape(draw, rank))})


def _reshape(draw) -> Case:
    rank = draw(st.integers(1, 3))
    x = _data(_shape(draw, rank))
    if draw(st.booleans()):  # a valid target, then one entry replaced by -1 or 0 (copy the input's dim)
        target = list(draw(st.permutations(x.shape)))
        spot = draw(st.integers(0, rank - 1))
        target[spot] = draw(st.sampled_from([target[spot], -1, 0]))
        shape = np.array(target, np.int64)
    else:
        shape = np.array(draw(st.lists(st.integers(-3, 6), min_size=1, max_size=4)), np.int64)
    attrs = {"allowzero": 1} if draw(st.booleans()) else {}
    return Case("Reshape", attrs, {"x": x}, {"shape": shape})


def _pad(draw) -> Case:
    rank = draw(st.integers(1, 3))
    pads = np.array(_ints(draw, 2 * rank, st.integers(-2, 3)), np.int64)
    mode = draw(st.sampled_from(["constant", "reflect", "edge"]))
    return Case("Pad", {"mode": mode}, {"x": _data(_shape(draw, rank, 1, 4))}, {"pads": pads})


def _resize(draw) -> Case:
    x = _data((1, 1) + _shape(draw, 2, 1, 4))
    mode = draw(st.sampled_from(["nearest", "linear"]))
    if draw(st.booleans()) or mode == "linear":  # onnxruntime's linear Resize of 4-D scales the inner axes only
        scales = np.array([1, 1] + draw(st.lists(st.sampled_from([1.0, 2.0, 0.5, 3.0]), min_size=2, max_size=2)),
                          np.float32)
    else:
        scales = np.array(_ints(draw, 4, st.sampled_from([1.0, 2.0, 0.5, 0.0, -1.0, np.nan, np.inf])), np.float32)
    return Case("Resize", {"mode": mode}, {"x": x}, {"roi": np.zeros(0, np.float32), "scales": scales})


def _int_binary(op: str):
    def draw_case(draw) -> Case:
        shape = _shape(draw, draw(st.integers(1, 2)))
        dtype = draw(st.sampled_from([np.int32, np.int64]))
        a = _data(shape, dtype)
        b = np.array(draw(st.lists(st.integers(-3, 3), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                     dtype).reshape(shape)
        attrs = {"fmod": 1} if op == "Mod" and draw(st.booleans()) else {}
        if draw(st.booleans()):
            return Case(op, attrs, {"a": a, "b": b})
        return Case(op, attrs, {"a": a}, {"b": b})
    return draw_case


def _batchnorm(draw) -> Case:
    channels = draw(st.integers(1, 4))
    x = _data((2, channels, 3))
    count = draw(st.sampled_from([channels, channels, channels - 1, channels + 1]))
    consts = {"scale": _data((count,), seed=1), "bias": _data((count,), seed=2), "mean": _data((count,), seed=3),
              "var": np.abs(_data((count,), seed=4)) + 0.5}
    return Case("BatchNormalization", {"epsilon": 1e-5}, {"x": x}, consts)


def _softmax(draw) -> Case:
    rank = draw(st.integers(1, 3))
    return Case("Softmax", {"axis": draw(st.integers(-rank - 1, rank))}, {"x": _data(_shape(draw, rank))})


def _reduce(op: str):
    def draw_case(draw) -> Case:
        rank = draw(st.integers(1, 3))
        axes = np.array(draw(st.lists(st.integers(-rank - 1, rank), min_size=0, max_size=3)), np.int64)
        attrs = {"keepdims": draw(st.sampled_from([0, 1]))}
        return Case(op, attrs, {"x": _data(_shape(draw, rank))}, {"axes": axes}, opset=18)
    return draw_case


DRAWERS = {
    "Conv": _conv, "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"), "Flatten": _flatten,
    "Split": _split, "Unsqueeze": _axes_op("Unsqueeze"), "Squeeze": _axes_op("Squeeze"), "Concat": _concat,
    "Gather": _gather, "Transpose": _transpose, "Reshape": _reshape, "Pad": _pad, "Resize": _resize,
    "Div": _int_binary("Div"), "Mod": _int_binary("Mod"), "BatchNormalization": _batchnorm, "Softmax": _softmax,
    "ReduceSum": _reduce("ReduceSum"), "ReduceMax": _reduce("ReduceMax"),
}


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs, or None when it refuses the model or the run."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    except Exception:  # noqa: BLE001 - any refusal counts: InvalidGraph, Fail, InvalidArgument, ...
        return None


def _hobbit(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | HobbitError:
    try:
        return hobbit.compile(model, threads=1).run(feeds)
    except HobbitError as exc:
        return exc


@pytest.mark.parametrize("op", sorted(DRAWERS))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_hobbit_matches_onnxruntime_or_refuses(op: str, data: st.DataObject) -> None:
    case = data.draw(st.composite(lambda draw: DRAWERS[op](draw))(), label="case")
    model = case.model()
    expected = _onnxruntime(model, case.inputs)
    got = _hobbit(model, case.inputs)
    if isinstance(got, HobbitError):
        return
    assert expected is not None, f"hobbit answered where onnxruntime refuses: {case}"
    assert len(got) == len(expected), case
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (case, g.shape, e.shape, g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, err_msg=repr(case), **TOLERANCE)
