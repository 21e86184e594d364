"""widen-half: 16-bit float models computed in float32, rounded only at their outputs.

Reference: onnxruntime's CPU provider, which computes these models in float32 too (it runs ops
without 16-bit kernels between Casts and removes the Cast pairs between them), so the two
engines differ only where float32 sums in a different order flip one final rounding. The
tolerance is therefore one rounding: eps of the 16-bit type times onnxruntime's value, plus
1e-4 for float32 noise on values near zero; float32 outputs of mixed models compare at float32 tolerances."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.passes import DEFAULT_PIPELINE
from hobbit.passes.half import is_half, widen_half
from tests.helpers import make_model, rand, run_ort
from tests.passes import import_model

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
WITHOUT_PASS = [p for p in DEFAULT_PIPELINE if p != "widen-half"]


def _half_inits(**arrays: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v.astype(F16) for k, v in arrays.items()}


def _conv_bn_relu():
    rng = np.random.default_rng(3)
    inits = _half_inits(w=rand(8, 3, 3, 3, seed=1) * 0.3, scale=rng.uniform(0.5, 2, 8), bias=rand(8, seed=2),
                        mean=rand(8, seed=3) * 0.1, var=rng.uniform(0.5, 2, 8))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    return nodes, {"x": rand(1, 3, 10, 10).astype(F16)}, inits


def _gemm_softmax():
    inits = _half_inits(w=rand(5, 48, seed=1) * 0.2, b=rand(5, seed=2))
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"], axis=1)]
    return nodes, {"x": rand(2, 3, 4, 4).astype(F16)}, inits


def _pools():
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 2]),
             helper.make_node("GlobalAveragePool", ["a"], ["y"])]
    return nodes, {"x": rand(1, 4, 12, 12).astype(F16)}, {}


def _concat():
    inits = _half_inits(w1=rand(4, 3, 1, 1, seed=1), w2=rand(6, 3, 3, 3, seed=2) * 0.3)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
             helper.make_node("Relu", ["c"], ["y"])]
    return nodes, {"x": rand(1, 3, 7, 7).astype(F16)}, inits


def _resize():
    inits = {"scales": np.array([1, 1, 2, 2], np.float32), **_half_inits(w=rand(2, 2, 3, 3, seed=1) * 0.3)}
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
             helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])]
    return nodes, {"x": rand(1, 2, 5, 5).astype(F16)}, inits


MODELS = {"conv-bn-relu": _conv_bn_relu, "gemm-softmax": _gemm_softmax, "pools": _pools, "concat": _concat,
          "resize": _resize}


def _assert_one_rounding_apart(got: np.ndarray, want: np.ndarray) -> None:
    """|got - want| <= eps * |want| + 1e-4, with eps of the 16-bit type (2^-10 for float16, 2^-7
    for bfloat16): between one and two ulps of `want`."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    want64 = want.astype(np.float64)
    diff = np.abs(got.astype(np.float64) - want64)
    bound = float(ml_dtypes.finfo(want.dtype).eps) * np.abs(want64) + 1e-4
    assert (diff <= bound).all(), f"{int((diff > bound).sum())} elements differ by more than one rounding"


def _run_ort_as_written(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime without graph optimizations: its Conv+BatchNorm fusion folds the weights in
    float16 (rounding them), which moves outputs by up to 3 ulps from the model as written."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _interior_dtypes(compiled: hobbit.CompiledModel) -> set[str]:
    graph = compiled.report.graph
    outputs = {id(v) for v in graph.outputs}
    return {np.dtype(v.dtype).name for node in graph.nodes for v in node.outputs if id(v) not in outputs}


@pytest.mark.parametrize("name", MODELS)
def test_float16_models_match_onnxruntime_in_float32(name):
    nodes, feeds, inits = MODELS[name]()
    model = make_model(nodes, feeds, ["y"], inits)
    compiled = hobbit.compile(model)
    _assert_one_rounding_apart(compiled.run(feeds)[0], _run_ort_as_written(model, feeds)[0])
    assert _interior_dtypes(compiled) == {"float32"}


def test_the_graph_keeps_its_interface_and_widens_the_rest():
    nodes, feeds, inits = _concat()
    graph = widen_half(import_model(nodes, feeds, ["y"], inits))
    assert [v.dtype for v in graph.inputs + graph.outputs] == [F16, F16]
    half_writers = [n for n in graph.nodes if any(is_half(v.dtype) for v in n.outputs)]
    assert [n.op for n in half_writers] == ["Cast"] and half_writers[0].outputs == graph.outputs
    assert all(not is_half(v.dtype) for n in graph.nodes for v in n.inputs if v is not None and v.const is not None)


def _cancellation():
    """(x + 3e-4) - x: 3e-4 in float32, 0 when the sum rounds to float16 first (x near 1)."""
    nodes = [helper.make_node("Add", ["x", "d"], ["s"]), helper.make_node("Sub", ["s", "x"], ["y"])]
    feeds = {"x": np.linspace(1, 1.5, 12).astype(F16)}
    return make_model(nodes, feeds, ["y"], {"d": np.array(3e-4, F16)}), feeds


def test_interior_values_are_not_rounded_as_in_onnxruntime():
    model, feeds = _cancellation()
    want = run_ort(model, feeds)[0]
    np.testing.assert_allclose(want, 3e-4, rtol=1e-2)
    _assert_one_rounding_apart(hobbit.compile(model).run(feeds)[0], want)


def test_with_no_passes_every_op_rounds_as_the_standard_says():
    """(The fuse pass alone already computes a fused element-wise chain in float32.)"""
    model, feeds = _cancellation()
    x = feeds["x"]
    per_op = ((x + np.float16(3e-4)).astype(F16) - x).astype(F16)
    np.testing.assert_array_equal(hobbit.compile(model, passes=[]).run(feeds)[0], per_op)


def test_float32_model_with_a_float16_middle():
    """float32 Conv -> Cast(float16) -> Relu -> MaxPool -> Cast(float) -> float32 Gemm: onnxruntime
    drops both Casts' rounding, so float32 tolerances hold."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["c"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Cast", ["m"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Flatten", ["f"], ["flat"]),
             helper.make_node("Gemm", ["flat", "g"], ["y"], transB=1)]
    feeds = {"x": rand(1, 3, 8, 8)}
    model = make_model(nodes, feeds, ["y"], {"w": rand(4, 3, 3, 3, seed=1), "g": rand(3, 64, seed=2)})
    compiled = hobbit.compile(model)
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)
    assert _interior_dtypes(compiled) == {"float32"}


def test_float16_input_float32_output():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    feeds = {"x": rand(1, 3, 6, 6).astype(F16)}
    model = make_model(nodes, feeds, ["y"], _half_inits(w=rand(5, 3, 3, 3, seed=1)))
    got = hobbit.compile(model).run(feeds)[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


def test_a_bare_cast_pair_loses_its_rounding():
    """Documented difference: Cast(float16) then Cast(float) with nothing between is dropped
    (onnxruntime keeps this one pair); without the pass it rounds."""
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)]
    feeds = {"x": np.linspace(0.1, 3, 20).astype(np.float32)}
    model = make_model(nodes, feeds, ["y"])
    np.testing.assert_array_equal(hobbit.compile(model).run(feeds)[0], feeds["x"])
    rounded = feeds["x"].astype(F16).astype(np.float32)
    np.testing.assert_array_equal(hobbit.compile(model, passes=WITHOUT_PASS).run(feeds)[0], rounded)
    np.testing.assert_array_equal(run_ort(model, feeds)[0], rounded)


def test_an_output_that_is_also_read_inside():
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Sigmoid", ["sq"], ["y"])]
    feeds = {"x": rand(3, 7).astype(F16)}
    model = make_model(nodes, feeds, ["sq", "y"])
    for got, want in zip(hobbit.compile(model).run(feeds), run_ort(model, feeds)):
        _assert_one_rounding_apart(got, want)


def test_comparisons_index_and_integer_results():
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("Greater", ["sq", "t"], ["gt"]),
             helper.make_node("ArgMax", ["sq"], ["arg"], axis=1),
             helper.make_node("Cast", ["sq"], ["i"], to=TensorProto.INT32)]
    feeds = {"x": (rand(4, 9) * 3).astype(F16)}
    model = make_model(nodes, feeds, ["gt", "arg", "i"], {"t": np.array(1.3, F16)})
    got, want = hobbit.compile(model).run(feeds), run_ort(model, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_bitcast_reads_the_float16_bits():
    """BitCast keeps its 16-bit input: the value is rounded to float16 right before it."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("BitCast", ["m"], ["y"], to=TensorProto.INT16)]
    feeds = {"x": rand(2, 8).astype(F16)}
    k = np.array(1.7, F16)
    model = make_model(nodes, feeds, ["y"], {"k": k}, opset=26)
    compiled = hobbit.compile(model)
    want = (feeds["x"].astype(np.float32) * np.float32(k)).astype(F16).view(np.int16)
    np.testing.assert_array_equal(compiled.run(feeds)[0], want)
    bitcast = next(n for n in compiled.report.graph.nodes if n.op == "BitCast")
    assert bitcast.inputs[0].dtype == F16


def test_bfloat16_matmul_add_relu_rounds_once():
    """bfloat16 the same way; reference: onnxruntime running the float32 model with the same
    (bfloat16-valued) weights and input, its output rounded to bfloat16."""
    x, w, b = rand(6, 16).astype(BF16), (rand(16, 5, seed=1) * 0.3).astype(BF16), rand(5, seed=2).astype(BF16)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    compiled = hobbit.compile(make_model(nodes, {"x": x}, ["y"], {"w": w, "b": b}))
    x32 = x.astype(np.float32)
    reference = make_model(nodes, {"x": x32}, ["y"], {"w": w.astype(np.float32), "b": b.astype(np.float32)})
    _assert_one_rounding_apart(compiled.run({"x": x})[0], run_ort(reference, {"x": x32})[0].astype(BF16))
    assert _interior_dtypes(compiled) == {"float32"}


def test_after_fusion_fused_groups_are_left_alone():
    """Run after `fuse`, the pass keeps a fused group's float16 output (the Conv's narrowing Cast
    with the Relu in one loop) and widens what reads it; MaxPool of rounded values rounds
    nothing more."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    feeds = {"x": rand(1, 3, 8, 8).astype(F16)}
    model = make_model(nodes, feeds, ["y"], _half_inits(w=rand(4, 3, 3, 3, seed=1) * 0.3))
    compiled = hobbit.compile(model, passes=["fuse", "widen-half"])
    _assert_one_rounding_apart(compiled.run(feeds)[0], run_ort(model, feeds)[0])
    fused = [n for n in compiled.report.graph.nodes if n.epilogue]
    assert [n.op for n in fused] == ["Cast"] and fused[0].outputs[0].dtype == F16


def test_after_fusion_an_epilogue_operand_through_a_dropped_cast_pair():
    """Conv(x) + Cast(Cast(x, float16), float): fused, the Add reads the pair's output as an
    epilogue operand; dropping the pair must hand the operand x itself."""
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["g"], to=TensorProto.FLOAT),
             helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "g"], ["y"])]
    feeds = {"x": rand(1, 3, 6, 6)}
    inits = {"w": rand(3, 3, 3, 3, seed=1)}
    compiled = hobbit.compile(make_model(nodes, feeds, ["y"], inits), passes=["fuse", "widen-half"])
    assert [n.op for n in compiled.report.graph.nodes] == ["Conv"]
    plain = make_model(nodes[2:3] + [helper.make_node("Add", ["c", "x"], ["y"])], feeds, ["y"], inits)
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(plain, feeds)[0], rtol=1e-4, atol=1e-4)
