"""DynamicModel: one module for every size of a model's symbolic dims (hobbit.runtime.dynamic).

Outputs are compared with onnxruntime (exact for these element-wise models: the same float32
operations); the checks, the bounds, growth, the fallback to one variant per shape where a
kernel or a constant cannot follow run-time dims, pickling and memory (exports:
tests/runtime/test_export_dynamic.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.errors import ConfigError, InputError
from tests.helpers import run_ort


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _bias_relu(shape=(1, "seq", 16)) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(-1, 1, shape[-1], dtype=np.float32), "w")
    return _model([helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], [w])


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_one_module_runs_every_size_inside_the_bounds():
    model = _bias_relu()
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (1, 100)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.bounds == {"seq": 100}
    for size in (1, 2, 15, 16, 17, 63, 100):
        x = _x(1, size, 16, seed=size)
        got, = compiled.run({"x": x})
        assert got.shape == (1, size, 16)
        np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])
    assert compiled.compiles == 1


def test_sizes_outside_the_bounds_and_wrong_static_dims_are_refused():
    compiled = hobbit.compile(_bias_relu(), cache=False, dynamic_shapes={"seq": (4, 32)})
    with pytest.raises(InputError, match=r"input 'x'.*dim 1 \('seq'\) must be in \[4, 32\].*got 33"):
        compiled.run({"x": _x(1, 33, 16)})
    with pytest.raises(InputError, match=r"dim 1 \('seq'\) must be in \[4, 32\].*got 3"):
        compiled.run({"x": _x(1, 3, 16)})
    with pytest.raises(InputError, match=r"input 'x'.*dim 2 is static and must be 16"):
        compiled.run({"x": _x(1, 8, 15)})
    with pytest.raises(InputError, match="dtype"):
        compiled.run({"x": _x(1, 8, 16).astype(np.float64)})


def test_one_symbol_must_have_one_size_in_every_input():
    model = _model([helper.make_node("Add", ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, "seq", 8]) for n in "ab"],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 8])])
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (1, 16)})
    with pytest.raises(InputError, match=r"dim 'seq' is 5 in input 'a' \(dim 1\) but 6 in input 'b'"):
        compiled.run({"a": _x(1, 5, 8), "b": _x(1, 6, 8)})


def test_staging_buffers_are_per_thread_and_never_returned():
    """Inputs and outputs whose data is not where the bound layout has it go through bound-shaped
    buffers kept between calls: a result must not change when the next call reuses them, and
    calls on other threads at once must not share them."""
    import threading
    model = _bias_relu((1, 3, "seq", 16))
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (1, 40)})
    assert type(compiled).__name__ == "DynamicModel"
    first, = compiled.run({"x": _x(1, 3, 9, 16, seed=1)})
    kept = first.copy()
    compiled.run({"x": _x(1, 3, 9, 16, seed=2)})
    np.testing.assert_array_equal(first, kept)
    failures = []

    def worker(seed: int) -> None:
        for size in (5, 31, 17, 40, 2) * 4:
            x = _x(1, 3, size, 16, seed=seed * 100 + size)
            got, = compiled.run({"x": x})
            if not np.array_equal(got, run_ort(model, {"x": x})[0]):
                failures.append((seed, size))
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_an_unbounded_symbol_grows_by_doubling():
    model = _bias_relu()
    compiled = hobbit.compile(model, cache=False)
    assert type(compiled).__name__ == "DynamicModel" and compiled.bounds == {"seq": 64}
    for size in (3, 64, 65, 200, 300, 7):  # 65 -> 256 (twice, rounded up), 300 -> 1024
        x = _x(1, size, 16, seed=size)
        np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
    assert compiled.compiles == 3 and compiled.bounds == {"seq": 1024}


def test_two_symbols_and_data_that_is_not_a_prefix_of_the_bound_layout():
    """[batch, seq, 16] with both run-time: a batch of 3 at seq 5 is copied into the bound layout."""
    model = _bias_relu(("batch", "seq", 16))
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"batch": (1, 4), "seq": (1, 20)})
    assert type(compiled).__name__ == "DynamicModel"
    for shape in ((3, 5, 16), (1, 20, 16), (4, 1, 16), (2, 20, 16)):
        x = _x(*shape)
        np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])


def test_a_batch_only_model_keeps_running_in_chunks():
    compiled = hobbit.compile(_bias_relu(("batch", 16)), cache=False)
    assert type(compiled).__name__ == "SpecializingModel"


def test_a_constant_that_depends_on_the_size_falls_back_to_one_variant_per_shape():
    """x / len(x): the folded length is a constant that is not a prefix of the bound's."""
    model = _model([helper.make_node("Shape", ["x"], ["s"], start=1),
                    helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT),
                    helper.make_node("Div", ["x", "f"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq"])])
    compiled = hobbit.compile(model, cache=False)
    assert type(compiled).__name__ == "SpecializingModel"
    assert "depends on the input sizes" in compiled.reason
    for size in (3, 9):
        x = _x(1, size)
        np.testing.assert_allclose(compiled.run({"x": x})[0], x / size, rtol=1e-6)


def test_prefix_constants_such_as_positions_stay_run_time():
    """x + [0, 1, ..., seq-1]: the folded Range is a prefix of the bound's, so one module serves."""
    model = _model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Squeeze", ["s"], ["n"]),
                    helper.make_node("Range", ["zero", "n", "one"], ["r"]),
                    helper.make_node("Add", ["x", "r"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.INT64, ["seq"])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, ["seq"])],
                   [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                    numpy_helper.from_array(np.array(1, np.int64), "one")])
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (1, 40)})
    assert type(compiled).__name__ == "DynamicModel"
    for size in (1, 17, 40):
        x = np.arange(size, dtype=np.int64) * 3
        np.testing.assert_array_equal(compiled.run({"x": x})[0], x + np.arange(size))


def test_bad_dynamic_shapes_are_config_errors():
    with pytest.raises(ConfigError, match="not symbolic dims of the model's inputs; its symbolic dims are"):
        hobbit.compile(_bias_relu(), cache=False, dynamic_shapes={"sequence": (1, 8)})
    with pytest.raises(ConfigError, match=r"must be \(low, high\)"):
        hobbit.compile(_bias_relu(), cache=False, dynamic_shapes={"seq": (9, 8)})


def test_dynamic_shapes_false_compiles_per_shape():
    compiled = hobbit.compile(_bias_relu(), cache=False, dynamic_shapes=False)
    assert type(compiled).__name__ == "SpecializingModel"


def test_pickles():
    """(Exported libraries with run-time dims: tests/runtime/test_export_dynamic.py.)"""
    compiled = hobbit.compile(_bias_relu(), cache=False, dynamic_shapes={"seq": (1, 32)})
    again = pickle.loads(pickle.dumps(compiled))
    x = _x(1, 9, 16)
    np.testing.assert_array_equal(again.run({"x": x})[0], compiled.run({"x": x})[0])


_MEMORY_SCRIPT = """
import numpy as np, hobbit
from tests.runtime.test_dynamic import _bias_relu, _x

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

compiled = hobbit.compile(_bias_relu((1, "seq", 256)), cache=False, dynamic_shapes={"seq": (1, 512)})
for size in (512, 1, 512):
    compiled.run({"x": _x(1, size, 256)})
before = rss()
for size in range(7, 507, 10):  # 50 distinct sizes
    compiled.run({"x": _x(1, size, 256, seed=size)})
print(compiled.compiles, rss() - before)
"""


def test_memory_does_not_grow_with_the_number_of_shapes():
    """In a fresh interpreter: a test worker's own heap, grown by earlier tests, moves its RSS."""
    done = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).parents[2], check=True)
    compiles, growth = map(int, done.stdout.split()[-2:])
    assert compiles == 1
    assert growth < 8 << 20


def _flattened(mix_samples: bool) -> onnx.ModelProto:
    """[batch, seq, 4] flattened to [batch * seq, 4] and back: no affine function of the two
    symbols; with mix_samples, a sum over the flattened rows mixes the samples too."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "rows"], ["f"]),
             helper.make_node("Relu", ["f"], ["r"])]
    if mix_samples:
        nodes += [helper.make_node("ReduceSum", ["r", "axis0"], ["t"], keepdims=1),
                  helper.make_node("Add", ["r", "t"], ["u"])]
    nodes.append(helper.make_node("Reshape", ["u" if mix_samples else "r", "s"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])],
                  [numpy_helper.from_array(np.array([-1, 4], np.int64), "rows"),
                   numpy_helper.from_array(np.array([0], np.int64), "axis0")])


def test_independent_samples_run_one_at_a_time_when_batch_and_sequence_cannot_be_run_time_together():
    model = _flattened(mix_samples=False)
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"batch": (1, 4), "seq": (1, 30)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.symbols == ["seq"]
    for shape in ((1, 1, 4), (3, 7, 4), (4, 30, 4)):
        x = _x(*shape)
        np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
    out = [np.empty((2, 9, 4), np.float32)]
    x = _x(2, 9, 4)
    assert compiled.run(["y"], {"x": x}, out=out)[0] is out[0]
    np.testing.assert_array_equal(out[0], np.maximum(x, 0))
    with pytest.raises(InputError, match=r"dim 0 \('batch'\).*in \[1, 4\]"):
        compiled.run({"x": _x(5, 3, 4)})
    assert compiled.compiles == 1


def test_samples_that_mix_are_not_run_one_at_a_time():
    compiled = hobbit.compile(_flattened(mix_samples=True), cache=False)
    assert type(compiled).__name__ == "SpecializingModel"
    assert "not an affine function" in compiled.reason


def test_the_compile_cache_keeps_the_module_and_its_extents(tmp_path, monkeypatch):
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    model = _bias_relu()
    first = hobbit.compile(model, cache=True, dynamic_shapes={"seq": (1, 40)})
    again = hobbit.compile(model, cache=True, dynamic_shapes={"seq": (1, 40)})
    other = hobbit.compile(model, cache=True, dynamic_shapes={"seq": (1, 41)})
    assert not getattr(first.report, "cached", False)
    assert again.report.cached and not getattr(other.report, "cached", False)
    for size in (1, 23, 40):
        x = _x(1, size, 16, seed=size)
        np.testing.assert_array_equal(again.run({"x": x})[0], first.run({"x": x})[0])
    with pytest.raises(InputError, match="must be in"):
        again.run({"x": _x(1, 41, 16)})


def test_low_bounds_rise_past_sizes_strided_windows_empty(tmp_path, monkeypatch):
    """Two stride-2 3x3 windows without padding leave nothing of fewer than 7 rows: the low
    bound rises to 7 (an InputError naming the range, not an empty kernel loop), and stays the
    one asked for where that is higher. The cache keeps the module's smallest sizes, not the
    bounds one compile asked for: a second compile asking for lower bounds gets its own."""
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
                    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "h", "w"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    for low, want in ((9, 9), (1, 7)):
        compiled = hobbit.compile(model, cache=True, dynamic_shapes={"h": (low, 64), "w": (low, 64)})
        assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
        with pytest.raises(InputError, match=rf"dim 2 \('h'\) must be in \[{want}, 64\]"):
            compiled.run({"x": _x(1, 4, want - 1, 20)})
        x = _x(1, 4, want, 20)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
