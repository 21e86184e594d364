"""One variant for every batch size (hobbit/runtime/batching.py): a batch-separable model
with a symbolic batch compiles once and answers any batch size like onnxruntime; models
that mix samples keep one variant per batch size; bad inputs get the same errors.
Tolerances: rtol 1e-4, atol 1e-5 (float32, small graphs)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit.errors import InputError
from hobbit.runtime.batching import ChunkedModel
from hobbit.runtime.jit import CompiledModel
from hobbit.runtime.specialize import MAX_CHUNK
from tests.helpers import rand, run_ort


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple], outputs: list[str],
           inits: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(dims)) for name, dims in inputs.items()],
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _cnn() -> onnx.ModelProto:
    inits = {"w": rand(6, 3, 3, 3, seed=1), "b": rand(6, seed=2), "fc": rand(6, 5, seed=3)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=1)]
    return _model(nodes, {"x": ("N", 3, 6, 6)}, ["y"], inits)


def _check(compiled, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    for got, want in zip(compiled.run(feeds), run_ort(model, feeds)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_every_batch_size_runs_on_the_first_variant():
    model = _cnn()
    compiled = hobbit.compile(model, cache=False, threads=1)
    first = compiled.variant({"x": rand(3, 3, 6, 6)})
    assert isinstance(first, ChunkedModel) and first.batch == 3
    for n in (3, 1, 2, 4, 6, 7, 10):
        feeds = {"x": rand(n, 3, 6, 6, seed=n)}
        _check(compiled, model, feeds)
        assert compiled.variant(feeds) is first
    assert compiled.separation.separable


def test_a_large_first_batch_compiles_a_capped_chunk():
    """A first call of 20 samples compiles for MAX_CHUNK (8) and runs as 8 + 8 + 4 padded."""
    model = _cnn()
    compiled = hobbit.compile(model, cache=False, threads=1)
    feeds = {"x": rand(20, 3, 6, 6, seed=2)}
    _check(compiled, model, feeds)
    assert compiled.variant(feeds).batch == MAX_CHUNK == 8
    _check(compiled, model, {"x": rand(1, 3, 6, 6, seed=5)})


def test_each_sample_matches_its_own_batch_1_answer():
    """Padding rows of the last chunk never reach real rows: batch N row i == batch 1 of sample i."""
    model = _cnn()
    compiled = hobbit.compile(model, cache=False, threads=1)
    x = rand(5, 3, 6, 6, seed=9)
    compiled.run({"x": x[:4]})  # variant at batch 4: batch 5 is one full chunk and one padded
    y, = compiled.run({"x": x})
    for i in range(5):
        want, = run_ort(model, {"x": x[i:i + 1]})
        np.testing.assert_allclose(y[i:i + 1], want, rtol=1e-4, atol=1e-5)


def test_several_inputs_and_rows_per_sample():
    """Two inputs share the batch; an output of [2N, 3] rows carries two rows per sample."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["y"]),
             helper.make_node("Mul", ["a", "b"], ["z"])]
    model = _model(nodes, {"a": ("N", 6), "b": ("N", 6)}, ["y", "z"], {"shape": np.array([-1, 3], np.int64)})
    compiled = hobbit.compile(model, cache=False, threads=1)
    for n in (2, 5, 1, 4):
        _check(compiled, model, {"a": rand(n, 6, seed=n), "b": rand(n, 6, seed=n + 10)})
    assert compiled.separation.rows == (2, 1)


def test_non_contiguous_inputs_are_accepted():
    model = _cnn()
    compiled = hobbit.compile(model, cache=False, threads=1)
    compiled.run({"x": rand(2, 3, 6, 6)})
    x = rand(6, 3, 6, 6, seed=4)[::2]
    assert not x.flags.c_contiguous
    _check(compiled, model, {"x": x})


def test_a_model_mixing_samples_compiles_per_batch_size():
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=0)], {"x": ("N", 4)}, ["y"])
    compiled = hobbit.compile(model, cache=False, threads=1)
    for n in (2, 3):
        feeds = {"x": rand(n, 4, seed=n)}
        _check(compiled, model, feeds)
        assert isinstance(compiled.variant(feeds), CompiledModel)
    assert not compiled.separation.separable
    assert "Softmax" in compiled.separation.reason


def test_bad_inputs_get_the_same_errors():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    compiled = hobbit.compile(_model(nodes, {"a": ("N", 4), "b": ("N", 4)}, ["y"]), cache=False, threads=1)
    compiled.run({"a": rand(2, 4), "b": rand(2, 4)})
    with pytest.raises(InputError, match="dim 'N' is 3"):
        compiled.run({"a": rand(3, 4), "b": rand(5, 4)})
    with pytest.raises(InputError, match="dtype"):
        compiled.run({"a": rand(3, 4).astype(np.float64), "b": rand(3, 4)})
    with pytest.raises(InputError, match="dim 1 must be 4"):
        compiled.run({"a": rand(3, 5), "b": rand(3, 5)})


def test_an_empty_batch_gives_empty_outputs():
    model = _cnn()
    compiled = hobbit.compile(model, cache=False, threads=1)
    compiled.run({"x": rand(2, 3, 6, 6)})
    y, = compiled.run({"x": rand(0, 3, 6, 6)})
    assert y.shape == (0, 5)


def test_out_arrays_receive_every_chunk():
    """run(output_names, feeds, out=...): the full chunks write straight into the caller's rows."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"])]
    model = _model(nodes, {"x": ("N", 4)}, ["r", "n"])
    compiled = hobbit.compile(model, cache=False, threads=1)
    compiled.run({"x": rand(2, 4)})
    x = rand(5, 4, seed=3)
    neg = np.full((5, 4), np.nan, np.float32)
    (got,) = compiled.run(["n"], {"x": x}, out=[neg])
    assert got is neg
    np.testing.assert_array_equal(neg, -x)
    with pytest.raises(InputError, match="shape"):
        compiled.run(["n"], {"x": x}, out=[np.empty((4, 4), np.float32)])
    relu, = compiled.run(["r"], {"x": x})
    np.testing.assert_array_equal(relu, np.maximum(x, 0))


def test_zoo_model_with_a_symbolic_batch_matches_per_sample_onnxruntime():
    """SqueezeNet 1.1 with its batch made symbolic: batches 1-3 on the batch-2 variant equal each
    sample's batch-1 onnxruntime answer (the zoo parity tolerances, rtol 1e-3, atol 1e-4)."""
    from hobbit import zoo
    model = zoo.squeezenet1_1()
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    compiled = hobbit.compile(model, cache=False)
    for n in (2, 3, 1):
        x = rand(n, 3, 224, 224, seed=n)
        y, = compiled.run({"input": x})
        for i in range(n):
            want, = run_ort(model, {"input": x[i:i + 1]})
            np.testing.assert_allclose(y[i:i + 1], want, rtol=1e-3, atol=1e-4)
    assert isinstance(compiled.variant({"input": x}), ChunkedModel)
