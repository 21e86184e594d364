"""A key/value cache kept in place between decoding steps (hobbit.runtime.kvcache,
hobbit.dynamic_compile.keep_caches_in_place).

The model is one attention step with its cache as input and output, as a decoder exports it:
present = Concat(past, new) along the run-time past dim, read by the scores and the weighted
sum. Each step's outputs are compared with onnxruntime fed the previous presents (1e-5: the
engines sum in other orders); plain run() must keep working and return arrays of its own,
and run(cache=) must write the new rows only (what it returned before keeps its values).
An exported library keeps the pairs in its manifest (checked on load) and runs the same way.
GPT-2 decoded with the cache: tests/zoo/test_gpt2_decode.py."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import ArtifactError, ConfigError, InputError
from tests.helpers import run_ort

D = 8


def _step(heads: int, bound: tuple[int, int] | None = (1, 40), cache: bool = False) -> tuple[onnx.ModelProto, object]:
    """x [1, heads, 1, D] -> y [1, heads, 1, D] (attention of x over the cache grown by 2x) and
    present_k/_v [1, heads, past + 1, D]; compiled with the past dim bounded by `bound`."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["x", "two"], ["k"]),
             helper.make_node("Neg", ["x"], ["v"]),
             helper.make_node("Concat", ["past_k", "k"], ["present_k"], axis=2),
             helper.make_node("Concat", ["past_v", "v"], ["present_v"], axis=-2),
             helper.make_node("Transpose", ["present_k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["x", "kt"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "present_v"], ["y"])]
    cache = [1, heads, "past", D]
    graph = helper.make_graph(
        nodes, "step",
        [helper.make_tensor_value_info("x", f, [1, heads, 1, D]), helper.make_tensor_value_info("past_k", f, cache),
         helper.make_tensor_value_info("past_v", f, cache)],
        [helper.make_tensor_value_info("y", f, [1, heads, 1, D]),
         helper.make_tensor_value_info("present_k", f, [1, heads, "total", D]),
         helper.make_tensor_value_info("present_v", f, [1, heads, "total", D])],
        [helper.make_tensor("two", f, [], [2.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = hobbit.compile(model, cache=cache, dynamic_shapes=None if bound is None else {"past": bound})
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return model, compiled


def _rand(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _start(heads: int, length: int) -> dict[str, np.ndarray]:
    return {"past_k": _rand(1, heads, length, D, seed=1), "past_v": _rand(1, heads, length, D, seed=2)}


@pytest.mark.parametrize("heads", [2, 1])
def test_steps_with_the_cache_in_place_match_onnxruntime(heads):
    model, compiled = _step(heads)
    past = _start(heads, 3)
    cache = compiled.cache(past)
    assert cache.names == ["past_k", "past_v"]
    returned = []
    for step in range(12):
        x = _rand(1, heads, 1, D, seed=10 + step)
        want = run_ort(model, {"x": x, **past})
        got = compiled.run({"x": x}, cache=cache)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"step {step}")
        assert got[1].shape == (1, heads, 4 + step, D) and not got[1].flags.writeable
        np.testing.assert_array_equal(cache["past_k"], want[1])
        returned.append((got[1], want[1]))
        past = {"past_k": want[1], "past_v": want[2]}
    for view, value in returned:  # later steps wrote past what an earlier one returned
        np.testing.assert_array_equal(view, value)
    assert compiled.compiles == 1


def test_the_past_is_laid_out_as_the_present_and_reported_at_its_own_bound():
    _, compiled = _step(2)
    assert compiled.cache_inputs == ["past_k", "past_v"]
    build = compiled._current
    names = [s.name for s in build.model.inputs]
    assert [(names[i], compiled.output_names[o]) for i, o in build.pairs] == [("past_k", "present_k"),
                                                                            ("past_v", "present_v")]
    assert build.model.inputs[1].shape == build.model.outputs[1].shape == (1, 2, 41, D)
    assert compiled.inputs[1].shape == (1, 2, 40, D)


@pytest.mark.parametrize("heads", [2, 1])
def test_a_plain_run_still_works_and_returns_arrays_of_its_own(heads):
    """heads 2: the past is staged in the present's buffer (the Concat skips it); heads 1: the
    past is read where it is, and the Concat copies it."""
    model, compiled = _step(heads)
    past = _start(heads, 5)
    kept = {name: value.copy() for name, value in past.items()}
    results = []
    for step in range(4):
        x = _rand(1, heads, 1, D, seed=20 + step)
        want = run_ort(model, {"x": x, **past})
        got = compiled.run({"x": x, **past})
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        assert all(r.flags.owndata and r.flags.writeable and r.flags.c_contiguous for r in got)
        results.append((got, [w.copy() for w in want]))
        past = {"past_k": got[1], "past_v": got[2]}
    for got, want in results:  # no later run wrote into an earlier one's results
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for name, value in kept.items():  # nor into its inputs
        np.testing.assert_array_equal(_start(heads, 5)[name], value)
    out = [np.empty((1, heads, 1, D), np.float32), np.empty((1, heads, 10, D), np.float32),
           np.empty((1, heads, 10, D), np.float32)]
    x = _rand(1, heads, 1, D, seed=3)
    got = compiled.run({"x": x, **past}, out=out)
    assert all(g is o for g, o in zip(got, out))
    for a, b in zip(got, run_ort(model, {"x": x, **past})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_compile_cache_hit_keeps_the_cache_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path))
    model, first = _step(2, cache=True)
    monkeypatch.setattr("hobbit.compiler.dynamic_graph", lambda *a, **k: pytest.fail("compiled again"))
    _, hit = _step(2, cache=True)
    assert hit.cache_inputs == first.cache_inputs == ["past_k", "past_v"]
    past = _start(2, 3)
    cache = hit.cache(past)
    x = _rand(1, 2, 1, D, seed=60)
    for a, b in zip(hit.run({"x": x}, cache=cache), run_ort(model, {"x": x, **past})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_plain_runs_and_cache_steps_mix():
    model, compiled = _step(2)
    past = _start(2, 4)
    cache = compiled.cache(past)
    for step in range(3):
        x = _rand(1, 2, 1, D, seed=30 + step)
        plain = compiled.run({"x": x, "past_k": cache["past_k"], "past_v": cache["past_v"]})
        got = compiled.run({"x": x}, cache=cache)
        for a, b in zip(got, plain):
            np.testing.assert_array_equal(a, b)


def test_the_cache_moves_when_the_bound_grows():
    """No declared bound: past a bound of 64 the model compiles again, and the cache moves once."""
    model, compiled = _step(2, bound=None)
    past = _start(2, 62)
    cache = compiled.cache(past)
    for step in range(5):
        x = _rand(1, 2, 1, D, seed=40 + step)
        want = run_ort(model, {"x": x, **past})
        got = compiled.run({"x": x}, cache=cache)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"step {step}")
        past = {"past_k": want[1], "past_v": want[2]}
    assert compiled.compiles == 2 and cache["past_k"].shape == (1, 2, 67, D)


def test_misuse_is_refused():
    _, compiled = _step(2)
    _, other = _step(2)
    cache = compiled.cache(_start(2, 3))
    x = _rand(1, 2, 1, D, seed=0)
    with pytest.raises(InputError, match=r"feeds give \['past_k'\], which the cache holds"):
        compiled.run({"x": x, "past_k": cache["past_k"]}, cache=cache)
    with pytest.raises(InputError, match="another model"):
        other.run({"x": x}, cache=cache)
    with pytest.raises(InputError, match="out= and cache="):
        compiled.run({"x": x}, cache=cache, out=[np.empty((1, 2, 1, D), np.float32)] * 3)
    with pytest.raises(InputError, match=r"starting contents of every cache input, \['past_k', 'past_v'\]"):
        compiled.cache({"past_k": _start(2, 3)["past_k"]})
    with pytest.raises(InputError, match=r"dim 2 \('past'\) must be in \[1, 40\]"):
        compiled.run({"x": x}, cache=compiled.cache(_start(2, 41)))
    assert cache["past_k"].shape == (1, 2, 3, D)  # nothing ran


def test_a_model_without_a_cache_has_none_to_keep():
    f = TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Concat", ["a", "b"], ["y"], axis=1),
                               helper.make_node("Relu", ["y"], ["z"])], "g",
                              [helper.make_tensor_value_info("a", f, [1, "n", 4]),
                               helper.make_tensor_value_info("b", f, [1, 1, 4])],
                              [helper.make_tensor_value_info("z", f, [1, "total", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"n": (1, 16)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.cache_inputs == []
    with pytest.raises(ConfigError, match="keeps no cache in place"):
        compiled.cache({"a": np.zeros((1, 3, 4), np.float32)})


def test_an_exported_library_keeps_the_cache_in_place_too(tmp_path):
    model, compiled = _step(2)
    files = compiled.export(tmp_path / "lib", name="step")
    manifest = json.loads(files.manifest.read_text())
    assert manifest["dynamic"]["in_place"] == [[1, 1], [2, 2]]
    header = files.header.read_text()
    assert 'output 1 ("present_k") may be the buffer of input 1 ("past_k")' in header
    assert '"past_k"  float32[1, 2, past, 8]  (at most 2624 bytes: [1, 2, 41, 8])' in header
    loaded = hobbit.load(tmp_path / "lib")
    assert loaded.cache_inputs == ["past_k", "past_v"]
    past = _start(2, 3)
    cache = loaded.cache(past)
    for step in range(4):
        x = _rand(1, 2, 1, D, seed=50 + step)
        want = run_ort(model, {"x": x, **past})
        plain = loaded.run({"x": x, **past})
        got = loaded.run({"x": x}, cache=cache)
        for a, b, c in zip(got, plain, want):
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5, err_msg=f"step {step}")
            np.testing.assert_array_equal(a, b)
        past = {"past_k": want[1], "past_v": want[2]}


@pytest.mark.parametrize("pairs, message", [
    ([[1, 0]], "an input and an output of one shape and dtype"),
    ([[1, 1], [2, 1]], "pairs of distinct inputs and distinct outputs"),
    ([[3, 1]], r"field 'dynamic.in_place' is 3"),
    ("1,1", "a list of \\[input, output\\]"),
])
def test_a_damaged_in_place_section_is_refused(tmp_path, pairs, message):
    _, compiled = _step(2)
    files = compiled.export(tmp_path / "lib", name="step")
    manifest = json.loads(files.manifest.read_text())
    manifest["dynamic"]["in_place"] = pairs
    files.manifest.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=message):
        hobbit.load(tmp_path / "lib")
