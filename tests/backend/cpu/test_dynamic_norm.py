"""Softmax, LayerNormalization and the reductions with run-time dims (issue 28): single-op
ONNX models with a symbolic dim, compiled once at the bound (dynamic_shapes) and run at
many sizes inside it against onnxruntime.

The cases are a transformer's and a CNN's: rows over a run-time sequence normalised over a
static last axis ([1, S, C] LayerNorm, LogSoftmax), attention scores [1, H, S, S] softmaxed
over their run-time last axis (with -inf and float32-min masks in them), softmax over a
middle axis that is run-time or has run-time columns after it, InstanceNormalization over a
run-time spatial dim (LayerNorm normalising a run-time dim), and reductions that keep or
reduce the run-time dim. Sizes cover 1, ragged vector tails (odd sizes, not multiples of
16) and the bound; each model must come back as a DynamicModel (a silent per-shape
fallback fails), at one and two threads. A white-box check runs the module on bound-shaped
buffers with NaN past the extents and a sentinel in the outputs: nothing past an extent may
be read into the result or written."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hobbit
from tests.helpers import assert_inside_extents, run_ort

RTOL, ATOL = 1e-5, 1e-5
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, database=None)
BOUND = 70
# 1, ragged tails of 16- and 8-lane vectors, whole vectors, and the bound.
SIZES = [1, 2, 7, 15, 16, 17, 33, 64, BOUND]
C = 40  # a static row length that is not a multiple of the vector width


def _model(nodes, inputs, initializers=(), outputs=("y",), opset: int = 17,
           dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "dynamic_norm",
                              [helper.make_tensor_value_info(name, dtype, shape) for name, shape in inputs],
                              [helper.make_empty_tensor_value_info(name) for name in outputs],
                              [numpy_helper.from_array(np.asarray(a), name) for name, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def softmax(op: str, shape: tuple, axis: int, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x"], ["y"], axis=axis)], [("x", list(shape))], dtype=dtype)


def masked_scores(heads: int) -> onnx.ModelProto:
    """Attention probabilities: Softmax(scores + mask) over the last axis, scores [1, H, S, S],
    mask [1, 1, 1, S] (0, -inf or float32's min per key)."""
    return _model([helper.make_node("Add", ["x", "mask"], ["masked"]),
                   helper.make_node("Softmax", ["masked"], ["y"], axis=-1)],
                  [("x", [1, heads, "seq", "seq"]), ("mask", [1, 1, 1, "seq"])])


def layernorm(shape: tuple, bias: bool = True, stats: bool = False, axis: int = -1) -> onnx.ModelProto:
    rng = np.random.default_rng(shape[-1])
    params = [("scale", rng.standard_normal(shape[-1]).astype(np.float32))]
    if bias:
        params.append(("bias", rng.standard_normal(shape[-1]).astype(np.float32)))
    outputs = ("y", "mean", "inv_std") if stats else ("y",)
    node = helper.make_node("LayerNormalization", ["x"] + [name for name, _ in params], list(outputs),
                            axis=axis, epsilon=1e-5)
    return _model([node], [("x", list(shape))], params, outputs)


def layernorm_over_sequence(width: int) -> onnx.ModelProto:
    """LayerNorm of [2, S, width] over its last two dims (axis 1), scale and bias given as
    inputs of the normalised shape [S, width]: a run-time normalised length."""
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=1, epsilon=1e-5)
    return _model([node], [("x", [2, "seq", width]), ("scale", ["seq", width]), ("bias", ["seq", width])])


def instance_norm(channels: int) -> onnx.ModelProto:
    """InstanceNormalization of [1, C, S]: hobbit's LayerNorm over the run-time dim S."""
    rng = np.random.default_rng(channels)
    return _model([helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"], epsilon=1e-5)],
                  [("x", [1, channels, "seq"])],
                  [("scale", rng.standard_normal(channels).astype(np.float32)),
                   ("bias", rng.standard_normal(channels).astype(np.float32))])


def rms_norm(channels: int) -> onnx.ModelProto:
    """RMSNorm as exported (x / sqrt(mean(x^2) + eps) * w): a ReduceMean over the static last
    axis of [1, S, C] among element-wise ops that broadcast its [1, S, 1] result."""
    w = np.random.default_rng(channels).standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "x"], ["square"]),
             helper.make_node("ReduceMean", ["square", "axes"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["x", "rms"], ["normal"]),
             helper.make_node("Mul", ["normal", "w"], ["y"])]
    return _model(nodes, [("x", [1, "seq", channels])],
                  [("axes", np.array([-1], np.int64)), ("eps", np.array(1e-6, np.float32)), ("w", w)], opset=18)


def reduce(op: str, shape: tuple, axes: tuple, keepdims: int, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], [("x", list(shape))],
                  [("axes", np.array(axes, np.int64))], opset=18, dtype=dtype)


def arg_reduce(op: str, shape: tuple, axis: int, keepdims: int, last: int,
               dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)],
                  [("x", list(shape))], dtype=dtype)


@functools.cache
def _compiled(builder, args: tuple, threads: int):
    model = builder(*args)
    compiled = hobbit.compile(model, threads=threads, dynamic_shapes={"seq": (1, BOUND)}, cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return model, compiled


def _feeds(model: onnx.ModelProto, seq: int, data=None) -> dict[str, np.ndarray]:
    """Normal values for every input at `seq` (`data(name, shape, rng)` for others)."""
    rng = np.random.default_rng(seq)
    feeds = {}
    for spec in model.graph.input:
        shape = tuple(seq if d.dim_param else d.dim_value for d in spec.type.tensor_type.shape.dim)
        value = None if data is None else data(spec.name, shape, rng)
        feeds[spec.name] = rng.standard_normal(shape).astype(np.float32) if value is None else value
    return feeds


def _check(builder, args: tuple, threads: int, seq: int, data=None, rtol: float = RTOL, atol: float = ATOL) -> None:
    model, compiled = _compiled(builder, args, threads)
    feeds = _feeds(model, seq, data)
    got = compiled.run(feeds)
    want = run_ort(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _mask(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray | None:
    """Keys masked with -inf or float32's min (never the first key: a row of nothing but -inf
    is NaN in both), the rest 0."""
    if name != "mask":
        return None
    pick = rng.random(shape)
    mask = np.where(pick < 0.2, -np.inf, np.where(pick < 0.4, np.finfo(np.float32).min, 0.0)).astype(np.float32)
    mask[..., 0] = 0
    return mask


ROWS = [("Softmax", (1, 3, "seq", "seq"), 3),  # attention scores: L and the rows run-time
        ("LogSoftmax", (1, "seq", C), 2),  # rows run-time, L static
        ("Softmax", ("seq", 100), 1),
        ("Softmax", (2, "seq", 3, "seq"), 3)]  # rows over a run-time, a static and a run-time dim


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, shape, axis", ROWS)
def test_softmax_rows(op: str, shape: tuple, axis: int, threads: int) -> None:
    for seq in SIZES:
        _check(softmax, (op, shape, axis), threads, seq)


COLUMNS = [("Softmax", (2, "seq", 5), 1),  # L run-time; threads share the columns
           ("LogSoftmax", (3, 4, "seq"), 1),  # run-time columns, threads share them
           ("Softmax", ("seq", 6, 3), 1),  # run-time rows (outer), threads share them
           ("LogSoftmax", (4, "seq", "seq"), 1)]  # L and the columns run-time


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, shape, axis", COLUMNS)
def test_softmax_columns(op: str, shape: tuple, axis: int, threads: int) -> None:
    for seq in SIZES:
        _check(softmax, (op, shape, axis), threads, seq)


@pytest.mark.parametrize("threads", [1, 2])
@given(seq=st.integers(1, BOUND))
@SETTINGS
def test_masked_scores(threads: int, seq: int) -> None:
    """Softmax over a run-time last axis of scores plus a mask of -inf and float32's min."""
    _check(masked_scores, (4,), threads, seq, _mask)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, bias, stats", [((1, "seq", 768), True, False), ((2, "seq", C), False, True),
                                                (("seq", 3, C), True, True)])
def test_layernorm(shape: tuple, bias: bool, stats: bool, threads: int) -> None:
    """[.., S, C] normalised over C, with scale and bias, and the Mean and InvStdDev outputs."""
    for seq in SIZES:
        _check(layernorm, (shape, bias, stats), threads, seq, atol=1e-4 if shape[-1] == 768 else ATOL)


@pytest.mark.parametrize("threads", [1, 2])
@given(seq=st.integers(1, BOUND))
@SETTINGS
def test_layernorm_drawn(threads: int, seq: int) -> None:
    _check(layernorm, ((1, "seq", 768), True, False), threads, seq, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_layernorm_over_a_run_time_dim(threads: int) -> None:
    """The normalised length itself is run-time: the mean divides by it, its tail is masked."""
    for seq in SIZES:
        _check(layernorm_over_sequence, (3,), threads, seq, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_instance_norm_over_a_run_time_dim(threads: int) -> None:
    """The normalised length itself is run-time: the mean divides by it, its tail is masked.
    (A row of one element has variance 0, so y is the bias and the scale multiplies
    rounding noise: onnxruntime leaves ~1e-5 there.)"""
    for seq in SIZES:
        _check(instance_norm, (6,), threads, seq, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
@given(seq=st.integers(1, BOUND))
@SETTINGS
def test_rms_norm(threads: int, seq: int) -> None:
    _check(rms_norm, (C,), threads, seq)


REDUCTIONS = [("ReduceMean", (2, "seq", 9), (2,), 1),  # the run-time dim kept, outer
              ("ReduceMean", (2, "seq", 9), (1,), 1),  # reduced: the mean divides by the extent
              ("ReduceMean", (1, "seq", C), (-1,), 0),
              ("ReduceSum", (2, "seq", 9), (1, 2), 0),  # reduced with the static dim after it
              ("ReduceMax", (2, 3, "seq"), (2,), 0),  # reduced, innermost: a masked run-time tail
              ("ReduceMin", (2, 3, "seq"), (1,), 1),  # kept, innermost: the output row stops at the extent
              ("ReduceL2", ("seq", 5, "seq"), (0, 2), 1),  # two run-time dims, both reduced
              ("ReduceSumSquare", ("seq", 5, "seq"), (1,), 0),  # two run-time dims, both kept
              ("ReduceLogSum", (3, "seq"), (0, 1), 1)]


def _positive(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    return (rng.random(shape) + 0.5).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, shape, axes, keepdims", REDUCTIONS)
def test_reductions(op: str, shape: tuple, axes: tuple, keepdims: int, threads: int) -> None:
    for seq in SIZES:
        _check(reduce, (op, shape, axes, keepdims), threads, seq, _positive if op == "ReduceLogSum" else None,
               rtol=1e-5, atol=1e-4)


@given(seq=st.integers(1, BOUND), case=st.sampled_from(REDUCTIONS))
@SETTINGS
def test_reductions_drawn(seq: int, case: tuple) -> None:
    op = case[0]
    _check(reduce, case, 1, seq, _positive if op == "ReduceLogSum" else None, rtol=1e-5, atol=1e-4)


ARGS = [("ArgMax", (2, "seq", 9), 1, 1, 0),  # along the run-time dim
        ("ArgMin", (2, "seq", 9), 2, 0, 1),  # run-time rows
        ("ArgMax", (3, 4, "seq"), 1, 1, 1)]  # run-time columns


@pytest.mark.parametrize("op, shape, axis, keepdims, last", ARGS)
def test_arg_reduce(op: str, shape: tuple, axis: int, keepdims: int, last: int) -> None:
    def ties(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, 4, shape).astype(np.float32)  # ties, for select_last_index
    for seq in SIZES:
        _check(arg_reduce, (op, shape, axis, keepdims, last), 1, seq, ties)


def _typed(dtype: np.dtype):
    def data(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        return (rng.standard_normal(shape) * 4).astype(dtype)
    return data


OTHER_DTYPES = [(reduce, ("ReduceSum", (2, "seq", 9), (1,), 1, TensorProto.FLOAT16), np.float16),
                (reduce, ("ReduceMax", (2, "seq", 9), (1,), 0, TensorProto.INT32), np.int32),
                (reduce, ("ReduceSum", (2, 9, "seq"), (2,), 0, TensorProto.INT64), np.int64),
                (arg_reduce, ("ArgMax", (2, "seq", 9), 1, 1, 0, TensorProto.INT64), np.int64),
                (softmax, ("Softmax", (1, 2, "seq", "seq"), 3, TensorProto.FLOAT16), np.float16)]


@pytest.mark.parametrize("builder, args, dtype", OTHER_DTYPES)
def test_other_dtypes(builder, args: tuple, dtype: np.dtype) -> None:
    """float16 (computed in float32 between casts) and integer reductions run inside the extents too."""
    for seq in (1, 17, BOUND):
        _check(builder, args, 1, seq, _typed(dtype), rtol=1e-3, atol=1e-3)


INSIDE = [(softmax, ("Softmax", (1, 3, "seq", "seq"), 3)), (softmax, ("LogSoftmax", (4, "seq", "seq"), 1)),
          (softmax, ("Softmax", (3, 4, "seq"), 1)), (layernorm, ((2, "seq", C), False, True)),
          (layernorm_over_sequence, (3,)), (instance_norm, (6,)), (reduce, ("ReduceMean", (2, "seq", 9), (1,), 1)),
          (reduce, ("ReduceL2", ("seq", 5, "seq"), (0, 2), 1)), (reduce, ("ReduceMin", (2, 3, "seq"), (1,), 1)),
          (arg_reduce, ("ArgMax", (3, 4, "seq"), 1, 1, 0))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("builder, args", INSIDE)
def test_reads_and_writes_stay_inside_extents(builder, args: tuple, threads: int) -> None:
    """Data past the extents of a bound-shaped buffer is garbage: NaN there must not leak into
    the result, and nothing past the extents is written (the outputs keep their sentinel)."""
    model, compiled = _compiled(builder, args, threads)
    build = compiled._current
    for seq in (1, 17, BOUND):
        feeds = _feeds(model, seq)
        assert_inside_extents(build, model, feeds, [seq], RTOL, 1e-4)


@pytest.mark.parametrize("builder, args, op", [(softmax, ("Softmax", (4, 3, "seq"), 0), "Softmax"),
                                               (arg_reduce, ("ArgMax", (4, 3, "seq"), 0, 1, 0), "ArgMax")])
def test_refused_and_still_right(builder, args: tuple, op: str) -> None:
    """A run-time dim after the axis that does not lead the dims after it (the columns are
    then not one range) is refused by name: the model compiles per shape instead, and still
    agrees with onnxruntime."""
    model = builder(*args)
    compiled = hobbit.compile(model, threads=1, dynamic_shapes={"seq": (1, BOUND)}, cache=False)
    assert type(compiled).__name__ != "DynamicModel"
    assert op in compiled.reason and "run-time dim after axis 0" in compiled.reason
    feeds = _feeds(model, 9)
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(model, feeds)[0], rtol=RTOL, atol=1e-4)
