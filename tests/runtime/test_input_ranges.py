"""input_shapes= with (low, high) ranges (hobbit.dynamic_compile.input_ranges): a ranged dim is a
run-time dim with those bounds, one module for every size inside them (hobbit.runtime.dynamic).

An attention-shaped model (MatMul, Transpose, Softmax on [1, seq, 16]) is compiled once with a
range and compared with onnxruntime at 1, 7 and the bound; a size outside the range is refused
naming the input and dim; the ranges of inputs sharing a symbol, dynamic_shapes=, static dims and
malformed ranges are checked before anything compiles."""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.errors import ConfigError, InputError
from tests.helpers import run_ort

WIDTH = 16


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _attention(shape=(1, "seq", WIDTH)) -> onnx.ModelProto:
    """softmax(x Wq (x Wk)^T / 4) x Wv: MatMuls with a run-time M, N and K, a Transpose, a Softmax."""
    rng = np.random.default_rng(1)
    weights = [numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 4, name)
               for name in ("wq", "wk", "wv")]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], weights)


def _add(shape_a=(1, "seq", 8), shape_b=(1, "seq", 8)) -> onnx.ModelProto:
    return _model([helper.make_node("Add", ["a", "b"], ["y"])],
                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(shape_a)),
                   helper.make_tensor_value_info("b", TensorProto.FLOAT, list(shape_b))],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_a_range_is_a_run_time_dim_with_those_bounds():
    model = _attention()
    compiled = hobbit.compile(model, cache=False, input_shapes={"x": (1, (1, 48), WIDTH)})
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    assert compiled.bounds == {"seq": 48} and compiled.get_inputs()[0].shape == [1, "seq", WIDTH]
    for size in (1, 7, 48):
        x = _x(1, size, WIDTH, seed=size)
        got, = compiled.run({"x": x})
        assert got.shape == (1, size, WIDTH)
        np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match=r"input 'x'.*dim 1 \('seq'\) must be in \[1, 48\].*got 49"):
        compiled.run({"x": _x(1, 49, WIDTH)})
    assert compiled.compiles == 1


def test_a_range_is_dynamic_shapes_for_its_symbol():
    ranged = hobbit.compile(_attention(), cache=False, input_shapes={"x": (1, (4, 32), WIDTH)},
                            dynamic_shapes={"seq": (4, 32)})
    assert type(ranged).__name__ == "DynamicModel" and ranged.bounds == {"seq": 32}
    with pytest.raises(InputError, match=r"dim 1 \('seq'\) must be in \[4, 32\].*got 3"):
        ranged.run({"x": _x(1, 3, WIDTH)})
    with pytest.raises(ConfigError, match=r"dynamic_shapes\['seq'\] is \(1, 64\).*range \(4, 32\) in input 'x'"):
        hobbit.compile(_attention(), cache=False, input_shapes={"x": (1, (4, 32), WIDTH)},
                       dynamic_shapes={"seq": (1, 64)})
    with pytest.raises(ConfigError, match="dynamic_shapes=False"):
        hobbit.compile(_attention(), cache=False, input_shapes={"x": (1, (4, 32), WIDTH)}, dynamic_shapes=False)


def test_an_int_beside_a_range_fixes_its_symbol_in_every_input():
    model = _add(("batch", "seq", 8), ("batch", "seq", 8))
    compiled = hobbit.compile(model, cache=False, input_shapes={"a": (2, (1, 16), 8)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.symbols == ["seq"]
    assert [arg.shape for arg in compiled.get_inputs()] == [[2, "seq", 8], [2, "seq", 8]]
    a, b = _x(2, 5, 8, seed=1), _x(2, 5, 8, seed=2)
    np.testing.assert_array_equal(compiled.run({"a": a, "b": b})[0], a + b)
    with pytest.raises(InputError, match=r"input 'b'.*dim 0 is static and must be 2"):
        compiled.run({"a": a, "b": _x(3, 5, 8)})
    with pytest.raises(ConfigError, match=r"dynamic_shapes gives dim 'batch' a range, but input_shapes fixes it at 2"):
        hobbit.compile(model, cache=False, input_shapes={"a": (2, (1, 16), 8)}, dynamic_shapes={"batch": (1, 4)})


def test_a_whole_shape_beside_a_range_stays_fixed():
    """b's own symbol 'n' is sized by its whole shape: only a's range is a run-time dim."""
    model = _model([helper.make_node("ReduceSum", ["b"], ["s"], keepdims=0),
                    helper.make_node("Add", ["a", "s"], ["y"])],
                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, "seq", 8]),
                    helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    compiled = hobbit.compile(model, cache=False, input_shapes={"a": (1, (1, 16), 8), "b": (3, 8)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.symbols == ["seq"], getattr(compiled, "reason", 0)
    assert [arg.shape for arg in compiled.get_inputs()] == [[1, "seq", 8], [3, 8]]
    a, b = _x(1, 5, 8, seed=1), _x(3, 8, seed=2)
    np.testing.assert_allclose(compiled.run({"a": a, "b": b})[0], run_ort(model, {"a": a, "b": b})[0], rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(InputError, match=r"input 'b'.*dim 0 is static and must be 3"):
        compiled.run({"a": a, "b": _x(4, 8)})


def test_inputs_sharing_a_symbol_must_give_it_one_range():
    same = hobbit.compile(_add(), cache=False, input_shapes={"a": (1, (1, 16), 8), "b": (1, (1, 16), 8)})
    assert type(same).__name__ == "DynamicModel" and same.bounds == {"seq": 16}
    with pytest.raises(ConfigError, match=r"dim 'seq' the range \(1, 16\) in input 'a' \(dim 1\) but \(1, 32\) "
                                          r"in input 'b' \(dim 1\)"):
        hobbit.compile(_add(), cache=False, input_shapes={"a": (1, (1, 16), 8), "b": (1, (1, 32), 8)})
    with pytest.raises(ConfigError, match=r"dim 'seq' the size 5 in input 'b' \(dim 1\) but the range \(1, 16\) "
                                          r"in input 'a'"):
        hobbit.compile(_add(), cache=False, input_shapes={"a": (1, (1, 16), 8), "b": (1, 5, 8)})


def test_a_dim_with_no_name_gets_one():
    compiled = hobbit.compile(_attention((1, None, WIDTH)), cache=False, input_shapes={"x": (1, (1, 24), WIDTH)})
    assert type(compiled).__name__ == "DynamicModel" and compiled.bounds == {"x:1": 24}
    with pytest.raises(InputError, match=r"input 'x'.*dim 1 \('x:1'\) must be in \[1, 24\]"):
        compiled.run({"x": _x(1, 25, WIDTH)})


@pytest.mark.parametrize("shape, message", [
    ((1, (1, 16), (1, 16)), r"input_shapes\['x'\] dim 2 is a range \(1, 16\), but the model declares that dim "
                            r"static \(16\)"),
    (((1, 2), (1, 16), WIDTH), r"input_shapes\['x'\] dim 0 is a range \(1, 2\), but the model declares that dim "
                               r"static \(1\)"),
    ((1, (1, 16), 15), r"input_shapes\['x'\] dim 2 is 15, but the model declares that dim static \(16\)"),
    ((1, (16, 1), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\) with 1 <= low <= high; got \(16, 1\)"),
    ((1, (-1, 16), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\)"),
    ((1, (0, 16), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\)"),
    ((1, (True, 16), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\)"),
    ((1, (1, 8, 16), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\)"),
    ((1, (1, 16.0), WIDTH), r"input_shapes\['x'\] dim 1 must be \(low, high\)"),
    ((True, (1, 16), WIDTH), r"input_shapes\['x'\] dim 0 must be a size \(an int >= 0\) or a range"),
    ((-1, (1, 16), WIDTH), r"input_shapes\['x'\] dim 0 must be a size"),
    (((1, 16), WIDTH), r"input_shapes gives input 'x' 2 dims, but the model declares rank 3"),
])
def test_bad_ranges_are_refused_naming_the_input_and_dim(shape, message):
    with pytest.raises(ConfigError, match=message):
        hobbit.compile(_attention(), cache=False, input_shapes={"x": shape})


def test_an_unknown_input_is_refused():
    with pytest.raises(InputError, match=r"input_shapes names \['z'\], which are not model inputs"):
        hobbit.compile(_attention(), cache=False, input_shapes={"x": (1, (1, 16), WIDTH), "z": (1,)})


def test_a_model_compiled_per_shape_keeps_the_bounds():
    """TopK's kernel is compiled for static shapes only: one variant per shape, inside the range."""
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    model = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 4])],
                   [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("i", TensorProto.INT64, None)], [k])
    compiled = hobbit.compile(model, cache=False, input_shapes={"x": (1, (2, 8), 4)})
    assert type(compiled).__name__ == "SpecializingModel" and "TopK" in compiled.reason
    with pytest.raises(InputError, match=r"input 'x'.*dim 1 \('seq'\) must be in \[2, 8\].*got 9"):
        compiled.run({"x": _x(1, 9, 4)})
    x = _x(1, 5, 4)
    np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])


def test_a_pickle_keeps_the_ranges():
    compiled = hobbit.compile(_attention(), cache=False, input_shapes={"x": (1, (1, 24), WIDTH)})
    again = pickle.loads(pickle.dumps(compiled))
    assert type(again).__name__ == "DynamicModel" and again.bounds == {"seq": 24}
    x = _x(1, 9, WIDTH)
    np.testing.assert_array_equal(again.run({"x": x})[0], compiled.run({"x": x})[0])
