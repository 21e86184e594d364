"""The onnxruntime-like Python API of compiled models: run(output_names, feeds) beside
run(feeds), get_inputs()/get_outputs() against onnxruntime's NodeArgs, results written into
caller-provided arrays (out=), and pickling (deepcopy, spawn workers) by rebuilding."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.runtime.cache import CachedReport
from tests.helpers import rand, run_ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE = 240  # seconds: far above a small compile in a fresh process, far below "the suite hangs"


def _model(inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "api", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _two_outputs() -> onnx.ModelProto:
    """y = Relu(x), z = Neg(x) on a static [2, 3] float input."""
    return _model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                  [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])])


def _symbolic() -> onnx.ModelProto:
    """A named symbolic dim, an unnamed one and a static one, a bool input, and an output
    whose shape the model leaves undeclared."""
    return _model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", None, 3]),
                   helper.make_tensor_value_info("b", TensorProto.BOOL, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None, 3]),
                   helper.make_empty_tensor_value_info("nb")],
                  [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Not", ["b"], ["nb"])])


def _inner_symbolic() -> onnx.ModelProto:
    """A symbolic dim that is not a batch dim, so every shape gets its own variant."""
    return _model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "L"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "L"]),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, "L"])],
                  [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])])


def _dtypes() -> onnx.ModelProto:
    return _model([helper.make_tensor_value_info("h", TensorProto.FLOAT16, [4]),
                   helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2]),
                   helper.make_tensor_value_info("d", TensorProto.DOUBLE, []),
                   helper.make_tensor_value_info("u", TensorProto.UINT8, [3])],
                  [helper.make_empty_tensor_value_info(n) for n in ("h2", "i2", "d2", "u2")],
                  [helper.make_node("Neg", ["h"], ["h2"]), helper.make_node("Abs", ["i"], ["i2"]),
                   helper.make_node("Neg", ["d"], ["d2"]), helper.make_node("Identity", ["u"], ["u2"])])


def _sequence_out() -> onnx.ModelProto:
    return _model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                  [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])])


def _described(args: list) -> list[tuple]:
    return [(a.name, a.shape, a.type) for a in args]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


# -- get_inputs / get_outputs ----------------------------------------------------------------
@pytest.mark.parametrize("make", [_two_outputs, _symbolic, _dtypes, _sequence_out])
def test_inputs_and_outputs_are_described_like_onnxruntime(make) -> None:
    model = make()
    ours, theirs = hobbit.compile(model), _session(model)
    assert _described(ours.get_inputs()) == _described(theirs.get_inputs())
    assert _described(ours.get_outputs()) == _described(theirs.get_outputs())


def test_symbolic_dims_show_as_their_name_or_none() -> None:
    ours = hobbit.compile(_symbolic())
    assert isinstance(ours, hobbit.DynamicModel)
    assert ours.get_inputs()[0].shape == ["N", None, 3]
    assert [a.type for a in ours.get_inputs()] == ["tensor(float)", "tensor(bool)"]


def test_input_shapes_fix_the_described_dims() -> None:
    ours = hobbit.compile(_inner_symbolic(), input_shapes={"x": (2, 5)})
    assert ours.get_inputs()[0].shape == [2, 5]


def test_a_described_shape_cannot_be_changed_from_outside() -> None:
    ours = hobbit.compile(_symbolic())
    ours.get_inputs()[0].shape.append(7)
    assert ours.get_inputs()[0].shape == ["N", None, 3]


# -- run(output_names, feeds) ----------------------------------------------------------------
def test_onnxruntime_argument_order_selects_and_orders_outputs() -> None:
    model = _two_outputs()
    m = hobbit.compile(model)
    feeds = {"x": rand(2, 3)}
    y, z = run_ort(model, feeds)
    for names in (None, [], ("y", "z")):
        got = m.run(names, feeds)
        np.testing.assert_array_equal(got[0], y)
        np.testing.assert_array_equal(got[1], z)
    z_only, y_again = m.run(["z", "y"], feeds)
    np.testing.assert_array_equal(z_only, z)
    np.testing.assert_array_equal(y_again, y)
    np.testing.assert_array_equal(m.run(feeds)[1], z)
    np.testing.assert_array_equal(m.run(feeds=feeds)[0], y)


def test_unknown_output_name_is_named_with_the_outputs() -> None:
    m = hobbit.compile(_two_outputs())
    with pytest.raises(hobbit.InputError, match=r"'q'.*\['y', 'z'\]"):
        m.run(["y", "q"], {"x": rand(2, 3)})


@pytest.mark.parametrize("args, message", [
    (([rand(2, 3)],), r"run\(\) takes the feeds as a dict of input name -> numpy array, not a list of ndarray"),
    (((rand(2, 3),),), "not a tuple of ndarray"),
    ((["y"],), r"got output_names \['y'\] and no feeds"),
    (("y", {"x": rand(2, 3)}), "got str"),
    (([1], {"x": rand(2, 3)}), "list of str"),
    ((None, [rand(2, 3)]), "feeds, got list"),
    ((None,), "feeds, got NoneType"),
    (({"x": rand(2, 3)}, {"x": rand(2, 3)}), "feeds dict alone"),
])
def test_run_arguments_are_checked(args, message) -> None:
    m = hobbit.compile(_two_outputs())
    with pytest.raises(hobbit.InputError, match=message):
        m.run(*args)


@pytest.mark.parametrize("feeds, message", [
    ({"x": rand(2, 3), "q": rand(2, 3)}, "run(): the model has no input named 'q'; the model's inputs are ['x']"),
    ({}, "run(): no value for input 'x'; the model's inputs are ['x']"),
    ({"w": rand(2, 3)}, "run(): the model has no input named 'w' and no value for input 'x'; the model's inputs "
                        "are ['x']"),
])
def test_wrong_input_names_say_only_what_is_wrong(feeds, message) -> None:
    for model in (hobbit.compile(_two_outputs()), hobbit.compile(_inner_symbolic())):
        with pytest.raises(hobbit.InputError) as info:
            model.run(feeds)
        assert str(info.value) == message


def test_specializing_model_takes_both_orders_and_checks_names_first() -> None:
    model = _symbolic()
    m = hobbit.compile(model, dynamic_shapes=False)
    feeds = {"x": rand(4, 5, 3), "b": np.array([True, False])}
    expected = run_ort(model, feeds)
    nb, y = m.run(["nb", "y"], feeds)
    np.testing.assert_array_equal(y, expected[0])
    np.testing.assert_array_equal(nb, expected[1])
    np.testing.assert_array_equal(m.run(feeds)[0], expected[0])
    fresh = hobbit.compile(model, dynamic_shapes=False)
    with pytest.raises(hobbit.InputError, match="'w'"):
        fresh.run(["w"], feeds)
    assert fresh.report is None  # refused before any variant compiled


def test_sequence_outputs_come_back_as_lists_in_both_orders() -> None:
    model = _sequence_out()
    m = hobbit.compile(model)
    x = rand(2, 3)
    (s, y), (y2, s2) = m.run({"x": x}), m.run(["y", "s"], {"x": x})
    assert isinstance(s, list) and len(s) == 2 and isinstance(s2, list) and len(s2) == 2
    np.testing.assert_array_equal(s[1], x)
    np.testing.assert_array_equal(s2[0], x)
    np.testing.assert_array_equal(y, run_ort(model, {"x": x})[1])
    np.testing.assert_array_equal(y2, y)


# -- out= --------------------------------------------------------------------------------------
def test_out_arrays_are_written_and_returned() -> None:
    m = hobbit.compile(_two_outputs())
    feeds = {"x": rand(2, 3)}
    expected = m.run(feeds)
    out = [np.full((2, 3), np.nan, np.float32), np.full((2, 3), np.nan, np.float32)]
    got = m.run(feeds, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    np.testing.assert_array_equal(out[0], expected[0])
    np.testing.assert_array_equal(out[1], expected[1])
    z = np.empty((2, 3), np.float32)
    (got_z,) = m.run(["z"], feeds, out=[z])
    assert got_z is z
    np.testing.assert_array_equal(z, expected[1])


@pytest.mark.parametrize("dynamic", [False, None], ids=["specializing", "dynamic"])
def test_out_on_a_model_with_symbolic_dims(dynamic) -> None:
    m = hobbit.compile(_inner_symbolic(), dynamic_shapes=dynamic)
    x = rand(2, 5)
    y = np.empty((2, 5), np.float32)
    (got,) = m.run(["y"], {"x": x}, out=[y])
    assert got is y
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def _misaligned(shape: tuple[int, ...]) -> np.ndarray:
    raw = np.zeros(int(np.prod(shape)) * 4 + 8, np.uint8)
    start = 1 if raw.ctypes.data % 4 == 0 else 2
    return raw[start:start + int(np.prod(shape)) * 4].view(np.float32).reshape(shape)


def _read_only() -> np.ndarray:
    a = np.empty((2, 3), np.float32)
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("out, message", [
    (np.empty((2, 3), np.float32), "takes a list"),
    ([np.empty((2, 3), np.float32)], "has 1 array"),
    ([np.empty((2, 3), np.float64), np.empty((2, 3), np.float32)], r"out\[0\] .* dtype float64"),
    ([np.empty((2, 3), np.float32), np.empty((3, 2), np.float32)], r"out\[1\] .* shape \(3, 2\)"),
    ([np.empty((2, 6), np.float32)[:, ::2], np.empty((2, 3), np.float32)], "C-contiguous"),
    ([_misaligned((2, 3)), np.empty((2, 3), np.float32)], "not aligned"),
    ([np.empty((2, 3), np.float32), _read_only()], "read-only"),
    ([[1.0], np.empty((2, 3), np.float32)], "must be a numpy array"),
])
def test_out_arrays_are_checked(out, message) -> None:
    m = hobbit.compile(_two_outputs())
    with pytest.raises(hobbit.InputError, match=message):
        m.run({"x": rand(2, 3)}, out=out)


def test_out_may_not_share_memory_with_inputs_or_each_other() -> None:
    m = hobbit.compile(_two_outputs())
    x = rand(2, 3)
    with pytest.raises(hobbit.InputError, match=r"out\[1\].*input #0"):
        m.run({"x": x}, out=[np.empty((2, 3), np.float32), x])
    both = np.empty((2, 2, 3), np.float32)
    with pytest.raises(hobbit.InputError, match=r"out\[1\].*out\[0\]"):
        m.run({"x": x}, out=[both[0], both.reshape(-1)[3:9].reshape(2, 3)])
    y = np.empty((2, 3), np.float32)
    with pytest.raises(hobbit.InputError, match="named twice"):
        m.run(["y", "y"], {"x": x}, out=[y, np.empty((2, 3), np.float32)])


def test_out_refuses_a_sequence_output() -> None:
    m = hobbit.compile(_sequence_out())
    with pytest.raises(hobbit.InputError, match="'s'.*sequence"):
        m.run(None, {"x": rand(2, 3)}, out=[[np.empty((2, 3), np.float32)] * 2, np.empty((2, 3), np.float32)])
    y = np.empty((2, 3), np.float32)
    assert m.run(["y"], {"x": rand(2, 3)}, out=[y])[0] is y


# -- pickling --------------------------------------------------------------------------------
def test_pickle_and_deepcopy_make_the_same_model() -> None:
    m = hobbit.compile(_two_outputs(), threads=1)
    feeds = {"x": rand(2, 3)}
    expected = m.run(feeds)
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert isinstance(other, hobbit.CompiledModel) and other is not m
        for got, want in zip(other.run(feeds), expected):
            np.testing.assert_array_equal(got, want)
        assert _described(other.get_inputs()) == _described(m.get_inputs())


def test_specializing_model_round_trips() -> None:
    m = hobbit.compile(_symbolic(), dynamic_shapes=False)
    feeds = {"x": rand(3, 2, 3), "b": np.array([False, True])}
    expected = m.run(feeds)
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert isinstance(other, hobbit.SpecializingModel)
        assert _described(other.get_outputs()) == _described(m.get_outputs())
        for got, want in zip(other.run(feeds), expected):
            np.testing.assert_array_equal(got, want)


def test_a_recipe_pickles_the_model_file_as_its_bytes_and_hits_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.onnx"
    onnx.save(_two_outputs(), path)
    m = hobbit.compile(str(path), cache=True)
    data = pickle.dumps(m.recipe)
    path.unlink()  # the pickle carries the model itself, not its path
    other = pickle.loads(data).compile()
    assert isinstance(other.report, CachedReport) and other.report.origin.startswith("the compile cache")
    np.testing.assert_array_equal(other.run({"x": rand(2, 3)})[1], -rand(2, 3))


def test_a_variant_pickles_as_its_machine_code() -> None:
    variant = hobbit.compile(_inner_symbolic(), dynamic_shapes=False).variant({"x": rand(2, 4)})
    other = pickle.loads(pickle.dumps(variant))
    feeds = {"x": rand(2, 4)}
    for got, want in zip(other.run(feeds), variant.run(feeds)):
        np.testing.assert_array_equal(got, want)


def _negate_in_worker(model, x: np.ndarray) -> np.ndarray:
    return model.run(["z"], {"x": x})[0]


def test_a_spawned_worker_runs_a_pickled_model() -> None:
    m = hobbit.compile(_two_outputs(), threads=1)
    x = rand(2, 3)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.apply_async(_negate_in_worker, (m, x)).get(DEADLINE)
    np.testing.assert_array_equal(got, -x)


_ROUND_TRIP = r"""
import copy, pickle
import numpy as np
import hobbit
from tests.runtime.test_api import _symbolic, _two_outputs
for model in (hobbit.compile(_two_outputs(), threads=1), hobbit.compile(_symbolic(), threads=1)):
    feeds = {"x": np.ones((2, 3), np.float32)} if isinstance(model, hobbit.CompiledModel) else \
        {"x": np.ones((2, 2, 3), np.float32), "b": np.ones(2, bool)}
    for other in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        other.run(feeds)
    del other, model
print("ok")
"""


def test_pickling_prints_no_ignored_exceptions() -> None:
    done = subprocess.run([sys.executable, "-c", _ROUND_TRIP], cwd=ROOT, capture_output=True, text=True,
                          timeout=DEADLINE, env={**os.environ, "PYTHONPATH": ROOT, "HOBBIT_CACHE": "0"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr, done.stderr[-3000:]
