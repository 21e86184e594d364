"""The shape subgraphs torch.onnx exports fold to constants at import.

Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Shape -> Slice -> Concat,
ConstantOfShape, Range, Size and the Equal/Where "-1 means keep" pattern of an
exported `expand` all become constants, so Reshape and Expand get static shapes
and no shape arithmetic reaches the compiled graph."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import UnsupportedModelError
from hobbit.frontend.onnx.importer import import_onnx
from tests.helpers import make_model, rand, run_ort

SHAPE_OPS = {"Shape", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "ConstantOfShape", "Range",
             "Size", "Equal", "Where", "Cast", "NonZero"}


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _unsqueeze(src: str, dst: str, opset: int, inits: dict) -> onnx.NodeProto:
    if opset < 13:
        return helper.make_node("Unsqueeze", [src], [dst], axes=[0])
    inits["axes0"] = _i64(0)
    return helper.make_node("Unsqueeze", [src, "axes0"], [dst])



def _torch_like_model(opset: int):
    """y = x.reshape(x.shape[0], -1, x.shape[2] * x.shape[3]) + range + ones; z = w.expand(...)."""
    inits = {"i0": np.array(0, np.int64), "i2": np.array(2, np.int64), "i3": np.array(3, np.int64),
             "minus1": _i64(-1), "s1": _i64(1), "e2": _i64(2), "start": np.array(0, np.int64),
             "delta": np.array(1, np.int64), "target": _i64(-1, 4, 6), "neg": _i64(-1)}
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["d0"], axis=0),
        helper.make_node("Gather", ["shape", "i2"], ["d2"], axis=0),
        helper.make_node("Gather", ["shape", "i3"], ["d3"], axis=0),
        helper.make_node("Mul", ["d2", "d3"], ["d23"]),
        _unsqueeze("d0", "u0", opset, inits),
        _unsqueeze("d23", "u23", opset, inits),
        helper.make_node("Concat", ["u0", "minus1", "u23"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["r"]),
        # Shape -> Slice -> Concat: the trailing dims of x, used by ConstantOfShape
        helper.make_node("Slice", ["shape", "s1", "e2"], ["mid"]) if opset >= 10 else None,
        helper.make_node("Concat", ["u0", "mid", "u23"], ["ones_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["ones_shape"], ["ones"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        # Range over the last dim, cast to float
        helper.make_node("Squeeze", ["u23"], ["n"], axes=[0]) if opset < 13 else
        helper.make_node("Squeeze", ["u23", "axes0"], ["n"]),
        helper.make_node("Range", ["start", "n", "delta"], ["ramp_i"]),
        helper.make_node("Cast", ["ramp_i"], ["ramp"], to=TensorProto.FLOAT),
        helper.make_node("Size", ["x"], ["count_i"]),
        helper.make_node("Cast", ["count_i"], ["count"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["r", "ones"], ["r1"]),
        helper.make_node("Add", ["r1", "ramp"], ["r2"]),
        helper.make_node("Mul", ["r2", "count"], ["y"]),
        # torch's expand(-1, 4, 6): Where(Equal(target, -1), ones, target) -> Expand
        helper.make_node("Shape", ["target"], ["tlen"]),
        helper.make_node("ConstantOfShape", ["tlen"], ["tones"],
                         value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
        helper.make_node("Equal", ["target", "neg"], ["keep"]),
        helper.make_node("Where", ["keep", "tones", "target"], ["expand_shape"]),
        helper.make_node("Expand", ["w", "expand_shape"], ["z"]),
    ]
    feeds = {"x": rand(2, 3, 4, 5), "w": rand(3, 1, 6, seed=1)}
    return make_model([n for n in nodes if n is not None], feeds, ["y", "z"], inits, opset=opset), feeds


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_torch_shape_subgraphs_fold(opset):
    model, feeds = _torch_like_model(opset)
    graph = import_onnx(model)
    assert not {n.op for n in graph.nodes} & SHAPE_OPS, str(graph)
    reshape = next(n for n in graph.nodes if n.op == "Reshape")
    assert reshape.attrs["shape"] == (2, 3, 20)

    m = hobbit.compile(model)
    assert not {n.op for n in m.report.graph.nodes} & SHAPE_OPS
    for got, want in zip(m.run(feeds), run_ort(model, feeds)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_nonzero_of_constant_folds_into_gather_indices():
    mask = np.array([0, 1, 1, 0, 1], np.bool_)
    x = rand(3, 5)
    model = make_model([helper.make_node("NonZero", ["mask"], ["nz"]),
                        helper.make_node("Squeeze", ["nz", "ax"], ["idx"]),
                        helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)],
                       {"x": x}, ["y"], {"mask": mask, "ax": _i64(0)}, opset=13)
    graph = import_onnx(model)
    assert [n.op for n in graph.nodes] == ["Gather"]
    assert graph.nodes[0].inputs[1].const.tolist() == [1, 2, 4]
    y, = hobbit.compile(model).run({"x": x})
    np.testing.assert_array_equal(y, run_ort(model, {"x": x})[0])


def test_nonzero_of_runtime_tensor_has_a_bounded_shape():
    """NonZero of a runtime tensor has a data-dependent shape: it runs on the bounded path
    (hobbit.frontend.common.bounded), one compile for every count, each run cut to its count."""
    model = make_model([helper.make_node("NonZero", ["x"], ["y"])], {"x": rand(4)}, ["y"], opset=13)
    compiled = hobbit.compile(model)
    for x in (np.array([0, 1.5, 0, -2], np.float32), np.zeros(4, np.float32), rand(4)):
        y, = compiled.run({"x": x})
        np.testing.assert_array_equal(y, run_ort(model, {"x": x})[0])


def test_nonzero_of_a_bounded_value_counts_only_its_data():
    """NonZero of NonZero's positions: the padding past the first's count is never counted."""
    model = make_model([helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("NonZero", ["i"], ["y"])],
                       {"x": rand(6)}, ["y"], opset=13)
    compiled = hobbit.compile(model)
    for x in (np.array([0, 1, 0, 2, 3, 0], np.float32), np.zeros(6, np.float32), np.ones(6, np.float32)):
        np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
