"""--input-shape / --input parsing and the checks against a model's declared inputs."""

from __future__ import annotations

import argparse

import numpy as np
import onnx
import pytest
from onnx import helper

from hobbit.frontend.onnx.source import OnnxSource
from hobbit.cli.inputs import InputFile, ShapeFlag, declared, input_shapes, load_feeds, parse_input_file, \
    parse_input_shape, require_static, with_input_shapes
from hobbit.errors import InputError
from hobbit.frontend.onnx.declared import declared_inputs
from hobbit.frontend.onnx.source import OnnxSource
from tests.helpers import rand, run_ort


def _model() -> onnx.ModelProto:
    """Add of x: float32[N, T, 4] and y: float32[1, T, 4] (two symbolic dims, one shared)."""
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "two",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "T", 4]),
                               helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, "T", 4])],
                              [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_parse_input_shape() -> None:
    assert parse_input_shape("x=2x5x4") == ShapeFlag("x", (2, 5, 4))
    assert parse_input_shape("scalar=") == ShapeFlag("scalar", ())
    assert str(ShapeFlag("x", (2, 5, 4))) == "--input-shape x=2x5x4"
    for bad in ["x", "x=2x0", "x=2,5", "x=2xx5", "=2"]:
        with pytest.raises(argparse.ArgumentTypeError, match="NAME=DIMS"):
            parse_input_shape(bad)


def test_parse_input_file() -> None:
    assert parse_input_file("x=a=b.npy") == InputFile("x", "a=b.npy")
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=FILE.npy"):
        parse_input_file("x.npy")


def test_require_static_names_every_open_input_and_the_flags() -> None:
    declared = declared_inputs(_model())
    with pytest.raises(InputError) as info:
        require_static(declared, "WHY")
    assert str(info.value) == ("input 'x' is float32[N, T, 4]; input 'y' is float32[1, T, 4]; WHY: "
                               "pass e.g. --input-shape x=1x1x4 --input-shape y=1x1x4")
    require_static(declared_inputs(_model(), {"x": (2, 3, 4), "y": (1, 3, 4)}), "WHY")
    with pytest.raises(InputError, match="input 'y'"):
        require_static(declared_inputs(_model(), {"x": (2, 3, 4)}), "WHY", free_axis0=True)


def test_input_shapes_checks_against_the_declaration() -> None:
    declared = declared_inputs(_model())
    assert input_shapes(declared, [ShapeFlag("x", (2, 3, 4))]) == {"x": (2, 3, 4)}
    with pytest.raises(InputError, match="sets axis 0 to 2, but input 'y' is declared float32\\[1, T, 4\\]"):
        input_shapes(declared, [ShapeFlag("y", (2, 3, 4))])


def test_load_feeds_returns_the_arrays(tmp_path) -> None:
    np.save(tmp_path / "y.npy", rand(1, 6, 4))
    feeds = load_feeds(declared_inputs(_model()), [InputFile("y", str(tmp_path / "y.npy"))], {})
    np.testing.assert_array_equal(feeds["y"], rand(1, 6, 4))


def test_with_input_shapes_makes_the_model_static_for_onnxruntime() -> None:
    fixed = with_input_shapes(_model(), {"x": (2, 3, 4), "y": (1, 3, 4)})
    assert [d.shape for d in declared_inputs(fixed)] == [(2, 3, 4), (1, 3, 4)]
    assert [d.shape for d in declared_inputs(_model())] == [(None, None, 4), (1, None, 4)]  # a copy
    x, y = rand(2, 3, 4), rand(1, 3, 4, seed=1)
    np.testing.assert_allclose(run_ort(fixed, {"x": x, "y": y})[0], x + y, rtol=1e-6)


def test_an_input_without_a_shape_takes_its_input_shape() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "shapeless",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(InputError, match=r"inputs \['x'\] declare no shape; give each one with --input-shape"):
        declared(OnnxSource(model), [])
    (spec,) = declared(OnnxSource(model), [ShapeFlag("x", (2, 3))])
    assert (spec.name, spec.shape, spec.dtype) == ("x", (2, 3), np.float32)
    assert [d.shape for d in declared_inputs(with_input_shapes(model, {"x": (2, 3)}))] == [(2, 3)]


def test_a_dim_may_be_a_range() -> None:
    assert parse_input_shape("x=1x1..512x4") == ShapeFlag("x", (1, (1, 512), 4))
    assert str(ShapeFlag("x", (1, (1, 512), 4))) == "--input-shape x=1x1..512x4"
    for bad in ["x=1x5..4x4", "x=1x0..4x4", "x=1x..4x4", "x=1x1..2..3x4", "x=1x1...4x4"]:
        with pytest.raises(argparse.ArgumentTypeError, match="LOW..HIGH"):
            parse_input_shape(bad)


def test_a_range_is_for_a_symbolic_dim_of_a_command_that_keeps_run_time_dims() -> None:
    model = declared_inputs(_model())
    assert input_shapes(model, [ShapeFlag("y", (1, (1, 64), 4))], ranges=True) == {"y": (1, (1, 64), 4)}
    with pytest.raises(InputError, match=r"--input-shape y=1x1..64x4: a dim LOW..HIGH is a run-time dim, which "
                                         r"`hobbit compile --emit lib` keeps"):
        input_shapes(model, [ShapeFlag("y", (1, (1, 64), 4))])
    with pytest.raises(InputError, match=r"sets axis 2 to 1..4, but input 'y' is declared float32\[1, T, 4\], "
                                         r"which fixes it at 4"):
        input_shapes(model, [ShapeFlag("y", (1, 8, (1, 4)))], ranges=True)


def test_an_input_without_a_shape_takes_a_range() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "shapeless",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (spec,) = declared(OnnxSource(model), [ShapeFlag("x", (2, (1, 9)))])
    assert (spec.shape, spec.symbols) == ((2, None), (None, "x:1"))
