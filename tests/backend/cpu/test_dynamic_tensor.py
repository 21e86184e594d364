"""The data-movement kernels (hobbit/backend/cpu/tensor.py) on run-time dims: single-op ONNX
models with symbolic dims, each compiled ONCE with bounds and run at several sizes (1, sizes
that are not a multiple of the vector width, the bound, and sizes hypothesis draws) against
onnxruntime. Every model must come back as a DynamicModel: a silent fall back to one compile
per shape fails the test. The cases the kernels refuse fall back with a reason naming them.

Copies are exact, so outputs must equal onnxruntime's bit for bit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.errors import RunError
from tests.helpers import run_ort

SETTINGS = settings(max_examples=4, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
BOUND = 40
FIXED = (1, 7, 13, BOUND)  # 1, odd sizes off any vector width, the bound
GUARD = 64  # elements after each input and output array (_check)


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_empty_tensor_value_info(n) for n in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


_compiled: dict[str, object] = {}


def _compile(key: str, model: onnx.ModelProto, bounds: dict, **kw) -> object:
    """One compile per model for the whole module (hypothesis' examples reuse it)."""
    if key not in _compiled:
        _compiled[key] = hobbit.compile(model, cache=False, dynamic_shapes=bounds, **kw)
    compiled = _compiled[key]
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return compiled


def _guarded(a: np.ndarray, tail) -> tuple[np.ndarray, np.ndarray]:
    """A buffer holding `a` and then GUARD elements of `tail`, and the view of `a` in it."""
    buffer = np.full(a.size + GUARD, tail, a.dtype)
    buffer[:a.size] = a.reshape(-1)
    return buffer, buffer[:a.size].reshape(a.shape)


def _garbage(dtype: np.dtype):
    """What lies past an extent: NaN, or an integer no index can be."""
    if dtype.kind == "f":
        return np.nan
    return True if dtype == np.bool_ else np.iinfo(dtype).max


def _check(compiled, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """Equal to onnxruntime; inputs handed over as they are (their data a prefix of the bound
    layout) are followed by garbage the kernels must not read into the result, and outputs
    written into the caller's arrays (out=) must leave the memory after them alone."""
    want = run_ort(model, feeds)
    inputs = {name: _guarded(a, _garbage(a.dtype))[1] for name, a in feeds.items()}
    outs = [_guarded(np.zeros_like(w), 0x5A) for w in want]
    got = compiled.run(inputs, out=[view for _, view in outs])
    assert len(got) == len(want)
    for g, w, (buffer, _) in zip(got, want, outs):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
        assert (buffer[w.size:].view(np.uint8) == np.full(GUARD, 0x5A, w.dtype).view(np.uint8)).all(), \
            "written past the output"


def _sizes(check: Callable[[int], None]) -> None:
    """check(size) at FIXED and at sizes hypothesis draws in [1, BOUND]."""
    for size in FIXED:
        check(size)
    given(st.integers(1, BOUND))(SETTINGS(check))()


# -- Transpose ---------------------------------------------------------------------------

@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 2, 3, 1), (3, 1, 0, 2)])
def test_transpose_of_a_run_time_sequence(perm):
    model = _model([helper.make_node("Transpose", ["x"], ["y"], perm=perm)],
                   [("x", TensorProto.FLOAT, [1, "seq", 3, 5])], ["y"])
    compiled = _compile(f"transpose{perm}", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 3, 5, seed=s)}))


def test_transpose_of_batch_and_sequence():
    """[B, S, H, D] -> [B, H, S, D], two run-time symbols."""
    model = _model([helper.make_node("Transpose", ["x"], ["y"], perm=(0, 2, 1, 3))],
                   [("x", TensorProto.FLOAT, ["batch", "seq", 2, 8])], ["y"])
    compiled = _compile("transpose_bs", model, {"batch": (1, 4), "seq": (1, BOUND)})
    for b, s in [(1, 1), (4, BOUND), (3, 7), (2, 1)]:
        _check(compiled, model, {"x": _x(b, s, 2, 8, seed=b * 100 + s)})

    @SETTINGS
    @given(b=st.integers(1, 4), s=st.integers(1, BOUND))
    def drawn(b: int, s: int) -> None:
        _check(compiled, model, {"x": _x(b, s, 2, 8, seed=b * 100 + s)})

    drawn()
    assert compiled.compiles == 1


def test_transpose_shared_by_threads():
    """Large enough at the bound to share its outer loop: the shares follow the run-time length."""
    model = _model([helper.make_node("Transpose", ["x"], ["y"], perm=(0, 2, 1, 3))],
                   [("x", TensorProto.FLOAT, [1, "seq", 8, 64])], ["y"])
    compiled = _compile("transpose_threads", model, {"seq": (1, 64)}, threads=2)
    for s in (1, 3, 33, 64):
        _check(compiled, model, {"x": _x(1, s, 8, 64, seed=s)})


# -- Gather ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_embedding_lookup(dtype):
    """A constant table indexed by run-time-length ids (negatives count from the end)."""
    table = _x(11, 6, seed=1)
    model = _model([helper.make_node("Gather", ["table", "ids"], ["y"])],
                   [("ids", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [1, "seq"])], ["y"], [("table", table)])
    compiled = _compile(f"embedding{np.dtype(dtype)}", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"ids": np.random.default_rng(s).integers(-11, 11, (1, s)).astype(dtype)}))


def test_embedding_lookup_refuses_an_id_out_of_range():
    table = _x(11, 6, seed=1)
    model = _model([helper.make_node("Gather", ["table", "ids"], ["y"])],
                   [("ids", TensorProto.INT64, [1, "seq"])], ["y"], [("table", table)])
    compiled = _compile("embedding_range", model, {"seq": (1, BOUND)})
    ids = np.zeros((1, 9), np.int64)
    ids[0, 8] = 11
    with pytest.raises(RunError, match="index"):
        compiled.run({"ids": ids})


@pytest.mark.parametrize("indices", [[0, 3, 5, -1], [2], 4])
def test_gather_constant_indices_along_a_static_axis(indices):
    """[1, S, 6] gathered along its static last axis: a table copy, or a strided one."""
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=2)],
                   [("x", TensorProto.FLOAT, [1, "seq", 6])], ["y"], [("i", np.array(indices, np.int64))])
    compiled = _compile(f"gather_static{indices}", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 6, seed=s)}))


def test_gather_run_time_indices_along_a_static_axis():
    """A value with a run-time dim before the axis, indices given at run time."""
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=2)],
                   [("x", TensorProto.FLOAT, [2, "seq", 5, 3]), ("i", TensorProto.INT64, [4])], ["y"])
    compiled = _compile("gather_runtime_static_axis", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(2, s, 5, 3, seed=s), "i": np.array([4, -5, 0, 2], np.int64)}))


def test_gather_along_a_run_time_axis():
    """Indices into the sequence: checked against its length in this inference."""
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                   [("x", TensorProto.FLOAT, [1, "seq", 6]), ("i", TensorProto.INT64, [3])], ["y"])
    compiled = _compile("gather_runtime_axis", model, {"seq": (1, BOUND)})

    def check(s: int) -> None:
        indices = np.random.default_rng(s).integers(-s, s, 3)
        _check(compiled, model, {"x": _x(1, s, 6, seed=s), "i": indices})

    _sizes(check)
    with pytest.raises(RunError, match="index"):  # inside the bound, past this length
        compiled.run({"x": _x(1, 5, 6), "i": np.array([0, 5, 1], np.int64)})


def test_gather_a_constant_position_of_the_sequence():
    """x[:, 0]: the first token (a classifier's pooler)."""
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                   [("x", TensorProto.FLOAT, [1, "seq", 6])], ["y"], [("i", np.array(0, np.int64))])
    compiled = _compile("gather_first", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 6, seed=s)}))


# -- Concat, Split, Slice, Pad, Expand, Tile ----------------------------------------------

def test_concat_along_a_static_axis():
    model = _model([helper.make_node("Concat", ["a", "b"], ["y"], axis=2)],
                   [("a", TensorProto.FLOAT, [1, "seq", 4]), ("b", TensorProto.FLOAT, [1, "seq", 7])], ["y"])
    compiled = _compile("concat_static", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"a": _x(1, s, 4, seed=s), "b": _x(1, s, 7, seed=s + 1)}))


def test_concat_of_a_key_value_cache():
    """[past (run-time), new] along the sequence axis, as a decoder's key/value cache grows."""
    model = _model([helper.make_node("Concat", ["past", "new"], ["y"], axis=2)],
                   [("past", TensorProto.FLOAT, [1, 2, "past", 8]), ("new", TensorProto.FLOAT, [1, 2, 1, 8])], ["y"])
    compiled = _compile("concat_kv", model, {"past": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"past": _x(1, 2, s, 8, seed=s), "new": _x(1, 2, 1, 8, seed=s + 1)}))


def test_concat_of_two_run_time_parts():
    model = _model([helper.make_node("Concat", ["a", "b", "a"], ["y"], axis=1)],
                   [("a", TensorProto.FLOAT, [1, "seq", 3]), ("b", TensorProto.FLOAT, [1, "seq", 3])], ["y"])
    compiled = _compile("concat_two", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"a": _x(1, s, 3, seed=s), "b": _x(1, s, 3, seed=s + 1)}))


def test_split_along_a_static_axis():
    """GPT-2's fused query/key/value projection cut in three."""
    model = _model([helper.make_node("Split", ["x", "sizes"], ["q", "k", "v"], axis=2)],
                   [("x", TensorProto.FLOAT, [1, "seq", 9])], ["q", "k", "v"], [("sizes", np.array([2, 3, 4], np.int64))])
    compiled = _compile("split", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 9, seed=s)}))


def test_slice_along_a_static_axis():
    model = _model([helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                   [("x", TensorProto.FLOAT, [1, "seq", 10])], ["y"],
                   [("starts", np.array([1], np.int64)), ("ends", np.array([9], np.int64)),
                    ("axes", np.array([2], np.int64)), ("steps", np.array([3], np.int64))])
    compiled = _compile("slice", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 10, seed=s)}))


@pytest.mark.parametrize("pads", [[0, 0, 2, 0, 0, 1], [0, 1, -1, 0, 2, 1], [0, 0, 0, 0, -1, 0]])
def test_constant_pad(pads):
    """Padding or cropping a static axis, or the run-time one (the output's extent grows with it)."""
    model = _model([helper.make_node("Pad", ["x", "pads", "value"], ["y"])],
                   [("x", TensorProto.FLOAT, [1, "seq", 5])], ["y"],
                   [("pads", np.array(pads, np.int64)), ("value", np.array(1.5, np.float32))])
    compiled = _compile(f"pad{pads}", model, {"seq": (2, BOUND)})
    for s in (2, 7, 13, BOUND):
        _check(compiled, model, {"x": _x(1, s, 5, seed=s)})


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_modes_along_a_static_axis(mode):
    model = _model([helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
                   [("x", TensorProto.FLOAT, [1, "seq", 5])], ["y"], [("pads", np.array([0, 0, 3, 0, 0, 2], np.int64))])
    compiled = _compile(f"pad_{mode}", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 5, seed=s)}))


def test_expand_of_a_run_time_dim():
    model = _model([helper.make_node("Expand", ["x", "shape"], ["y"])],
                   [("x", TensorProto.FLOAT, [1, "seq", 1])], ["y"], [("shape", np.array([2, 1, 8], np.int64))])
    compiled = _compile("expand", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 1, seed=s)}))


def test_tile_of_static_dims():
    model = _model([helper.make_node("Tile", ["x", "repeats"], ["y"])],
                   [("x", TensorProto.FLOAT, [1, "seq", 3])], ["y"], [("repeats", np.array([2, 1, 3], np.int64))])
    compiled = _compile("tile", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"x": _x(1, s, 3, seed=s)}))


# -- element-wise-shaped kernels the transformers use ------------------------------------

def test_cast_where_and_identity():
    """Cast of a mask, Where choosing between a value and a constant, an output copied (Identity)."""
    nodes = [helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.BOOL),
             helper.make_node("Where", ["m", "x", "fill"], ["y"]),
             helper.make_node("Identity", ["x"], ["z"])]
    model = _model(nodes, [("mask", TensorProto.INT64, [1, "seq"]), ("x", TensorProto.FLOAT, [1, "seq"])],
                   ["y", "z"], [("fill", np.array(-1e4, np.float32))])
    compiled = _compile("cast_where", model, {"seq": (1, BOUND)})
    _sizes(lambda s: _check(compiled, model, {"mask": np.random.default_rng(s).integers(0, 2, (1, s)),
                                              "x": _x(1, s, seed=s)}))


# -- refused ---------------------------------------------------------------------------

@pytest.mark.parametrize("node, inputs, inits, reason", [
    (helper.make_node("Tile", ["x", "r"], ["y"]), [("x", TensorProto.FLOAT, [1, "seq", 3])],
     [("r", np.array([1, 2, 1], np.int64))], "repeats run-time dim 1"),
    (helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]), [("x", TensorProto.FLOAT, [1, "seq", 3])],
     [("st", np.array([1], np.int64)), ("en", np.array([1 << 30], np.int64)), ("ax", np.array([1], np.int64))],
     "slices run-time dim 1"),
    (helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect"), [("x", TensorProto.FLOAT, [1, "seq", 3])],
     [("p", np.array([0, 1, 0, 0, 1, 0], np.int64))], "pads run-time dim 1 in reflect mode"),
])
def test_refused_cases_fall_back_with_a_reason(node, inputs, inits, reason):
    model = _model([node], inputs, ["y"], inits)
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (2, BOUND)})
    assert type(compiled).__name__ != "DynamicModel"
    assert reason in compiled.reason
    x = _x(1, 9, 3)
    np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
