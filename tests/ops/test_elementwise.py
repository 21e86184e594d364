"""Element-wise ops against onnxruntime: every unary op over values that exercise
its branches, binary ops over numpy broadcasting shapes, and fused chains."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.helpers import assert_matches_ort, make_model, rand

# (op, attributes, input scale, rtol, atol). Transcendentals are polynomial
# approximations (~2e-7 relative), hence the 1e-5 tolerances for them.
UNARY = [
    ("Relu", {}, 3.0, 0, 0),
    ("LeakyRelu", {"alpha": 0.2}, 3.0, 1e-6, 0),
    ("Sigmoid", {}, 6.0, 1e-5, 1e-6),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 4.0, 1e-6, 1e-7),
    ("HardSwish", {}, 5.0, 1e-6, 1e-6),
    ("Tanh", {}, 4.0, 1e-5, 1e-6),
    ("Erf", {}, 2.5, 1e-5, 1e-6),
    ("Exp", {}, 10.0, 1e-5, 0),
    ("Neg", {}, 1.0, 0, 0),
    ("Abs", {}, 1.0, 0, 0),
    ("Floor", {}, 5.0, 0, 0),
    ("Ceil", {}, 5.0, 0, 0),
    ("Elu", {"alpha": 0.7}, 3.0, 1e-5, 1e-6),
    ("Softplus", {}, 4.0, 1e-5, 1e-6),
]


@pytest.mark.parametrize("op,attrs,scale,rtol,atol", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(1, 37), (2, 3, 5, 7)])
def test_unary_matches_onnxruntime(op, attrs, scale, rtol, atol, shape):
    x = rand(*shape) * scale
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    assert_matches_ort(model, {"x": x}, rtol=rtol, atol=atol)


def test_positive_domain_ops_match_onnxruntime():
    x = np.abs(rand(3, 33)) + 0.1
    for op in ("Sqrt", "Log", "Reciprocal"):
        model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"])
        assert_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)


def test_clip_attribute_and_input_forms():
    x = rand(2, 50) * 10
    old = make_model([helper.make_node("Clip", ["x"], ["y"], min=-1.5, max=2.0)], {"x": x}, ["y"], opset=6)
    assert_matches_ort(old, {"x": x}, rtol=0, atol=0)
    new = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, ["y"],
                     {"lo": np.float32(0.0), "hi": np.float32(6.0)})
    assert_matches_ort(new, {"x": x}, rtol=0, atol=0)


BROADCASTS = [((4, 5), (4, 5)), ((2, 3, 4, 5), (5,)), ((2, 3, 4, 5), (3, 1, 1)), ((2, 1, 4, 1), (1, 3, 1, 5)),
              ((7,), ()), ((1, 16, 9, 9), (1, 16, 1, 1)), ((3, 17), (3, 1))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("a_shape,b_shape", BROADCASTS)
def test_binary_broadcasting_matches_onnxruntime(op, a_shape, b_shape):
    a = rand(*a_shape, seed=1)
    b = rand(*b_shape, seed=2) if b_shape else np.float32(1.7)
    b = np.asarray(b, dtype=np.float32)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    assert_matches_ort(model, {"a": a, "b": b}, rtol=1e-6, atol=1e-7)
    swapped = make_model([helper.make_node(op, ["b", "a"], ["y"])], {"a": a, "b": b}, ["y"])
    assert_matches_ort(swapped, {"a": a, "b": b}, rtol=1e-6, atol=1e-7)


def test_pow_sum_mean_and_int64_arithmetic():
    x = np.abs(rand(3, 20)) + 0.5
    nodes = [helper.make_node("Pow", ["x", "e"], ["p"]), helper.make_node("Sum", ["x", "p", "x"], ["s"]),
             helper.make_node("Mean", ["s", "p"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"e": np.float32(2.0)})
    assert_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)
    i = np.arange(-20, 20, dtype=np.int64).reshape(4, 10)
    nodes = [helper.make_node("Mul", ["i", "k"], ["m"]), helper.make_node("Add", ["m", "i"], ["y"])]
    model = make_model(nodes, {"i": i}, ["y"], {"k": np.array([3], dtype=np.int64)})
    assert_matches_ort(model, {"i": i}, rtol=0, atol=0)


def test_gelu_chain_fuses_and_matches_onnxruntime():
    """The exporters' GELU (Div, Erf, Add, Mul, Mul) becomes one element-wise kernel."""
    import hobbit
    x = rand(2, 64) * 3
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
    model = make_model(nodes, {"x": x}, ["y"], inits)
    assert_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)
    kernels = hobbit.compile(model).report.graph.nodes
    assert len(kernels) == 1  # x is read again by the chain's epilogue, not recomputed
    assert [s.op for s in kernels[0].epilogue] == ["Erf", "Add", "Mul", "Mul"]


def test_special_values_propagate_like_onnxruntime():
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, 88.0, -100.0, 100.0]], dtype=np.float32)
    for op in ("Relu", "Sigmoid", "Tanh", "Exp", "Erf"):
        model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"])
        assert_matches_ort(model, {"x": x}, rtol=1e-5, atol=1e-6)


# (input shape, slope shape, slope is a graph input): the slopes PyTorch exports ([C, 1, 1] per
# channel, [1] shared) and the rest of one-way broadcasting (trailing dims, a full-shape slope).
PRELU_SLOPES = [((2, 3, 4, 5), (3, 1, 1), False), ((2, 3, 4, 5), (1,), False), ((2, 3, 4, 5), (), False),
                ((2, 3, 4, 5), (5,), True), ((2, 3, 4, 5), (2, 3, 4, 5), True), ((6, 7), (7,), False),
                ((2, 3, 4, 5), (1, 3, 1, 1), True)]


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 15, 16, 17, 18])
@pytest.mark.parametrize("x_shape,slope_shape,runtime", PRELU_SLOPES)
def test_prelu_at_every_opset_exporters_used(opset, x_shape, slope_shape, runtime):
    """PRelu-7 and -9 (PyTorch's opsets 7-15) and -16, with constant and run-time slopes."""
    x = rand(*x_shape) * 3
    slope = np.asarray(rand(*slope_shape, seed=1) if slope_shape else np.float32(0.3), dtype=np.float32)
    feeds, inits = ({"x": x, "s": slope}, {}) if runtime else ({"x": x}, {"s": slope})
    model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], feeds, ["y"], inits, opset=opset)
    assert_matches_ort(model, feeds, rtol=1e-6, atol=0)


@pytest.mark.parametrize("opset,dtype", [(9, np.float16), (13, np.float16), (16, np.float64),
                                         (16, np.int32), (17, np.int64), (18, np.float16)])
def test_prelu_dtypes(opset, dtype):
    """float16 computes in float32 and rounds once; integer types (opset 9 on) stay exact.
    onnxruntime runs float64 and integer PRelu only from opset 16, its function body."""
    x = (rand(2, 3, 4, 5) * 20).astype(dtype)
    slope = (rand(3, 1, 1, seed=1) * 4).astype(dtype)
    model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": slope}, opset=opset)
    assert_matches_ort(model, {"x": x}, rtol=1e-3 if dtype == np.float16 else 0, atol=0)


def test_prelu_special_values_and_shared_slope_as_leaky_relu():
    """A constant slope of one value is LeakyRelu; NaN, infinities and -0.0 pass as onnxruntime's."""
    from hobbit.frontend.onnx.importer import import_onnx
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, -1e-30, 3.0, -2.0]], dtype=np.float32)
    for opset in (11, 17):
        model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"],
                           {"s": np.array([0.25], dtype=np.float32)}, opset=opset)
        got, = assert_matches_ort(model, {"x": x}, rtol=0, atol=0)
        assert np.signbit(got[0, 4])
        assert [n.op for n in import_onnx(model).nodes] == ["LeakyRelu"]


def test_prelu_slope_that_does_not_broadcast_one_way_is_named():
    """One-way broadcasting: the output keeps X's shape, so a slope that would widen it is an error."""
    import hobbit
    from hobbit.errors import ShapeError
    x = rand(3, 4)
    for slope_shape in ((5,), (2, 3, 4), (3, 1, 1)):
        model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="act")], {"x": x}, ["y"],
                           {"s": rand(*slope_shape, seed=1)}, opset=13)
        with pytest.raises(ShapeError, match="act"):
            hobbit.compile(model)
