"""Error paths: every failure is a HobbitError subclass naming what and where."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import (ConfigError, HobbitError, InputError, MissingDependencyError, ModelFormatError,
                           UnsupportedModelError, import_optional)
from tests.helpers import make_model, rand


def _relu_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"])


def test_a_missing_optional_dependency_raises_the_error_that_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "hobbit_absent_extra", None)
    with pytest.raises(MissingDependencyError, match=r"pip install it \(.*hobbit_absent_extra") as caught:
        import_optional("hobbit_absent_extra", lambda exc: MissingDependencyError(f"pip install it ({exc})"))
    assert isinstance(caught.value.__cause__, ImportError)
    assert import_optional("json", lambda exc: MissingDependencyError("unreachable")) is sys.modules["json"]


# -- unsupported constructs ------------------------------------------------------------

def test_all_unsupported_ops_reported_at_once() -> None:
    x = rand(2, 3)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("TfIdfVectorizer", ["a"], ["b"], name="tfidf_node"),
             helper.make_node("ImageDecoder", ["x"], ["c"], name="decoder_node"),
             helper.make_node("Multinomial", ["x"], ["d"], name="multinomial_node"),
             helper.make_node("TfIdfVectorizer", ["x"], ["e"], name="tfidf_again")]
    model = make_model(nodes, {"x": x}, ["b", "c", "d", "e"], opset=17)
    with pytest.raises(UnsupportedModelError) as info:
        hobbit.compile(model)
    items = info.value.items
    assert [(i.op_type, i.node, i.opset) for i in items] == [
        ("TfIdfVectorizer", "tfidf_node", 17), ("ImageDecoder", "decoder_node", 17),
        ("Multinomial", "multinomial_node", 17), ("TfIdfVectorizer", "tfidf_again", 17)]
    text = str(info.value)
    for word in ("TfIdfVectorizer", "ImageDecoder", "Multinomial", "tfidf_node", "multinomial_node", "opset 17"):
        assert word in text
    assert isinstance(info.value, HobbitError)


def test_unsupported_attribute_values_reported_together() -> None:
    """Converter-level refusals are collected too, and their dependants are not reported."""
    x = rand(2, 3)
    nodes = [helper.make_node("Cast", ["x"], ["s"], name="to_string", to=TensorProto.STRING),
             helper.make_node("Identity", ["s"], ["r"], name="after_cast"),
             helper.make_node("Reshape", ["x", "shape_in"], ["c"], name="runtime_reshape")]
    model = make_model(nodes, {"x": x, "shape_in": np.array([3, 2], np.int64)}, ["r", "c"], opset=20)
    with pytest.raises(UnsupportedModelError) as info:
        hobbit.compile(model)
    assert [(i.op_type, i.node) for i in info.value.items] == [("Cast", "to_string"), ("Reshape", "runtime_reshape")]
    assert "STRING" in str(info.value) and "graph input(s) ['shape_in']" in str(info.value)


def test_unknown_domain() -> None:
    x = rand(2, 3)
    node = helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")
    model = make_model([node], {"x": x}, ["y"])
    with pytest.raises(UnsupportedModelError, match="com.example") as info:
        hobbit.compile(model)
    assert info.value.items[0].op_type == "FancyOp" and info.value.items[0].node == "fancy"
    model.opset_import.append(helper.make_opsetid("com.example", 3))
    with pytest.raises(UnsupportedModelError, match="FancyOp") as info:
        hobbit.compile(model)
    assert info.value.items[0].domain == "com.example" and info.value.items[0].opset == 3


# -- unreadable models -------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff garbage", b"\x0a\x80\x80", b""], ids=["junk", "short", "empty"])
def test_malformed_bytes(data: bytes) -> None:
    with pytest.raises(ModelFormatError):
        hobbit.compile(data)


def test_truncated_file(tmp_path) -> None:
    data = _relu_model().SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError):
        hobbit.compile(str(path))


def test_missing_file(tmp_path) -> None:
    path = tmp_path / "nope.onnx"
    with pytest.raises(ModelFormatError, match="nope.onnx"):
        hobbit.compile(path)


def test_node_reading_undefined_tensor() -> None:
    model = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")], {"x": rand(2)}, ["y"])
    with pytest.raises(ModelFormatError, match="ghost") as info:
        hobbit.compile(model)
    assert "adder" in str(info.value)


def test_undefined_graph_output() -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y", "phantom"])
    with pytest.raises(ModelFormatError, match="phantom"):
        hobbit.compile(model)


def test_tensor_defined_twice_by_nodes() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"),
             helper.make_node("Neg", ["x"], ["y"], name="second")]
    with pytest.raises(ModelFormatError, match="'y'.*second"):
        hobbit.compile(make_model(nodes, {"x": rand(2)}, ["y"]))


def test_node_output_shadowing_an_initializer() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["w"], name="shadow"), helper.make_node("Add", ["x", "w"], ["y"])]
    with pytest.raises(ModelFormatError, match="'w'"):
        hobbit.compile(make_model(nodes, {"x": rand(2)}, ["y"], {"w": rand(2, seed=1)}))


def test_duplicate_graph_input_names() -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y"])
    model.graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]))
    with pytest.raises(ModelFormatError, match="'x'"):
        hobbit.compile(model)


def test_duplicate_initializer_names() -> None:
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": rand(2)}, ["y"], {"w": rand(2, seed=1)})
    model.graph.initializer.append(model.graph.initializer[0])
    with pytest.raises(ModelFormatError, match="'w'"):
        hobbit.compile(model)


# -- run() input validation -------------------------------------------------------------

@pytest.fixture(scope="module")
def two_inputs():
    feeds = {"a": rand(2, 3), "b": rand(2, 3, seed=1)}
    model = make_model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"])],
                       feeds, ["s", "r"])
    return hobbit.compile(model), feeds


def test_wrong_input_name(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match="'c'"):
        m.run({"a": feeds["a"], "c": feeds["b"]})


def test_missing_input(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match="'b'"):
        m.run({"a": feeds["a"]})


def test_wrong_dtype(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match="'b'.*float64"):
        m.run({"a": feeds["a"], "b": feeds["b"].astype(np.float64)})


def test_wrong_shape(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match=r"'a'.*\(3, 2\)"):
        m.run({"a": feeds["a"].reshape(3, 2), "b": feeds["b"]})


def test_non_array_input(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match="'a'.*list"):
        m.run({"a": feeds["a"].tolist(), "b": feeds["b"]})


def test_feeds_not_a_dict(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError):
        m.run([feeds["a"], feeds["b"]])


def test_positional_call_arity(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError, match="2 input"):
        m(feeds["a"])
    s, r = m(feeds["a"], feeds["b"])
    np.testing.assert_allclose(r, np.maximum(feeds["a"] + feeds["b"], 0), rtol=1e-6)


def test_errors_leave_the_model_usable(two_inputs) -> None:
    m, feeds = two_inputs
    with pytest.raises(InputError):
        m.run({"a": feeds["a"]})
    np.testing.assert_allclose(m.run(feeds)[0], feeds["a"] + feeds["b"], rtol=1e-6)


def test_single_input_call_returns_one_array() -> None:
    m = hobbit.compile(_relu_model())
    x = rand(2, 3)
    y = m(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_inputs_and_outputs_describe_the_model(two_inputs) -> None:
    m, _ = two_inputs
    assert [(s.name, s.shape, s.dtype) for s in m.inputs] == [("a", (2, 3), np.float32), ("b", (2, 3), np.float32)]
    assert [(s.name, s.shape, s.dtype) for s in m.outputs] == [("s", (2, 3), np.float32), ("r", (2, 3), np.float32)]
    assert "float32" in repr(m.inputs[0])


def test_output_dtypes_other_than_float() -> None:
    x = rand(2, 3)
    model = make_model([helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64)], {"x": x}, ["i"])
    m = hobbit.compile(model)
    assert m.outputs[0].dtype == np.int64 and m.outputs[0].shape == (2, 3)
    assert m(x).dtype == np.int64


def test_incompatible_shapes_name_the_node() -> None:
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")],
                       {"a": rand(2, 3), "b": rand(4, seed=1)}, ["y"])
    with pytest.raises(hobbit.ShapeError, match="bad_add"):
        hobbit.compile(model)


def test_input_without_shape_asks_for_input_shapes() -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y"])
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(ModelFormatError, match="input_shapes"):
        hobbit.compile(model)
    assert hobbit.compile(model, input_shapes={"x": (3,)}).inputs[0].shape == (3,)



@pytest.mark.parametrize("level", [-1, 4, 7, 1.5, "2", True, None])
def test_bad_opt_level_is_a_config_error(level: object) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    with pytest.raises(ConfigError, match="opt_level=") as info:
        hobbit.compile(model, opt_level=level, cache=False)
    assert repr(level) in str(info.value)
