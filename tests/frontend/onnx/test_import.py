"""ONNX frontend: opset-dependent converters, attribute vs input forms, auto_pad,
external-data weights, old-IR initializers-as-inputs and symbolic dims."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.frontend.onnx.converters import lookup
from hobbit.frontend.onnx.importer import import_onnx
from tests.helpers import assert_matches_ort, make_model, rand, run_ort

NEWEST = onnx.defs.onnx_opset_version()


def _small_cnn(opset: int):
    """Ops whose ONNX signature is the same from opset 7 to the newest."""
    x = rand(2, 3, 6, 6)
    rng = np.random.default_rng(3)
    inits = {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2),
             "scale": rng.uniform(0.5, 2, 4).astype(np.float32), "bias": rand(4, seed=4),
             "mean": rand(4, seed=5), "var": rng.uniform(0.5, 2, 4).astype(np.float32),
             "shape": np.array([2, -1], np.int64), "fc": rand(5, 144, seed=6), "fcb": rand(5, seed=7)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["g"], transB=1, alpha=0.5),
             helper.make_node("Sigmoid", ["g"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits, opset=opset), {"x": x}


@pytest.mark.parametrize("opset", [7, 11, 13, 17, NEWEST])
def test_model_at_each_opset_matches_onnxruntime(opset: int) -> None:
    model, feeds = _small_cnn(opset)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_converter_choice_follows_the_model_opset() -> None:
    assert lookup("", "Clip", 6).since == 1
    assert lookup("", "Clip", 11).since == 11
    assert lookup("", "Clip", NEWEST).since == 11
    assert lookup("ai.onnx", "Clip", 13).since == 11
    assert lookup("", "Reshape", 4).since == 1 and lookup("", "Reshape", 5).since == 5
    assert lookup("", "NoSuchOp", NEWEST) is None


def test_clip_attribute_form_at_opset_6() -> None:
    x = rand(3, 7)
    model = make_model([helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)], {"x": x}, ["y"], opset=6)
    got = assert_matches_ort(model, {"x": x})
    assert got[0].min() == pytest.approx(-0.5) and got[0].max() == pytest.approx(0.25)


@pytest.mark.parametrize("opset", [11, 13, NEWEST])
@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo",), ("", "hi"), ()], ids=str)
def test_clip_input_form(opset: int, bounds: tuple[str, ...]) -> None:
    x = rand(3, 7)
    inits = {"lo": np.array(-0.5, np.float32), "hi": np.array(0.25, np.float32)}
    model = make_model([helper.make_node("Clip", ["x", *bounds], ["y"])], {"x": x}, ["y"], inits, opset=opset)
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("kernel,stride", [(3, 2), (4, 2), (2, 1), (5, 3)])
def test_conv_auto_pad(auto_pad: str, kernel: int, stride: int) -> None:
    """Odd totals of padding differ between SAME_UPPER and SAME_LOWER."""
    x, w = rand(1, 2, 7, 8), rand(3, 2, kernel, kernel, seed=1)
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[stride, stride],
                            kernel_shape=[kernel, kernel])
    assert_matches_ort(make_model([node], {"x": x}, ["y"], {"w": w}), {"x": x}, rtol=1e-4, atol=1e-5)


def test_external_data_weights(tmp_path) -> None:
    model, feeds = _small_cnn(17)
    expected = run_ort(model, feeds)
    path = tmp_path / "model.onnx"
    onnx.save_model(onnx.ModelProto.FromString(model.SerializeToString()), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size > 144 * 5 * 4
    saved = onnx.load(str(path), load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in saved.graph.initializer)
    for source in (str(path), path):
        got = hobbit.compile(source).run(feeds)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)


def test_initializers_listed_as_graph_inputs() -> None:
    """IR version 3 models list every initializer among the graph inputs too."""
    x, w = rand(2, 4), rand(4, 3, seed=1)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    compiled = hobbit.compile(model)
    assert [s.name for s in compiled.inputs] == ["x"]
    assert import_onnx(model).inputs[0].name == "x"
    np.testing.assert_allclose(compiled(x), x @ w, rtol=1e-5, atol=1e-6)


def _symbolic_model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])], "sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4])],
        [numpy_helper.from_array(rand(3, 4, seed=1), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_symbolic_batch_dim_bound_by_input_shapes() -> None:
    model = _symbolic_model()
    compiled = hobbit.compile(model, input_shapes={"x": (5, 3, 4)})
    assert compiled.inputs[0].shape == (5, 3, 4) and compiled.outputs[0].shape == (5, 3, 4)
    x = rand(5, 3, 4)
    np.testing.assert_allclose(compiled(x), run_ort(model, {"x": x})[0], rtol=1e-6)


def test_symbolic_batch_dim_compiles_once_and_runs_several_sizes() -> None:
    model = _symbolic_model()
    compiled = hobbit.compile(model)
    assert compiled.inputs[0].shape == (None, 3, 4)
    for batch in (1, 5, 2, 5):
        x = rand(batch, 3, 4, seed=batch)
        np.testing.assert_allclose(compiled(x), run_ort(model, {"x": x})[0], rtol=1e-6)


@pytest.mark.parametrize("shape,word", [((2, 4, 4), "dim 1 must be 3"), ((2, 3), "rank 3")], ids=["dim", "rank"])
def test_symbolic_model_rejects_contradicting_shapes(shape: tuple, word: str) -> None:
    compiled = hobbit.compile(_symbolic_model())
    with pytest.raises(hobbit.InputError, match=word):
        compiled(rand(*shape))


def test_graph_outputs_keep_their_onnx_names() -> None:
    x = rand(2, 3)
    model = make_model([helper.make_node("Relu", ["x"], ["first"]), helper.make_node("Neg", ["first"], ["second"])],
                       {"x": x}, ["second", "first"])
    compiled = hobbit.compile(model)
    assert [s.name for s in compiled.outputs] == ["second", "first"]
    second, first = compiled.run({"x": x})
    np.testing.assert_allclose(first, np.maximum(x, 0))
    np.testing.assert_allclose(second, -np.maximum(x, 0))


def test_model_from_bytes_and_explicit_ai_onnx_domain() -> None:
    x = rand(2, 3)
    model = make_model([helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx")], {"x": x}, ["y"])
    model.opset_import[0].domain = "ai.onnx"
    np.testing.assert_array_equal(hobbit.compile(model.SerializeToString())(x), np.maximum(x, 0))


def test_repeated_and_missing_node_names() -> None:
    """onnxruntime rejects repeated node names; hobbit only uses them for messages and IR."""
    x = rand(2, 3)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="same"), helper.make_node("Sigmoid", ["a"], ["b"], name="same"),
             helper.make_node("Tanh", ["a"], ["c"])]
    b, c = hobbit.compile(make_model(nodes, {"x": x}, ["b", "c"])).run({"x": x})
    np.testing.assert_allclose(b, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    np.testing.assert_allclose(c, np.tanh(np.maximum(x, 0)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shapes,word", [({"y": (2, 3, 4)}, "'y'"), ({"x": (2, 3)}, "rank 3"),
                                         ({"x": (-1, 3, 4)}, ">= 0")], ids=["unknown", "rank", "negative"])
def test_bad_input_shapes_are_rejected(shapes: dict, word: str) -> None:
    with pytest.raises(hobbit.InputError, match=word):
        hobbit.compile(_symbolic_model(), input_shapes=shapes)
