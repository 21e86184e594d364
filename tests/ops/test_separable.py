"""Batch separability (hobbit/ops/separable.py): small graphs with a symbolic batch,
imported at two batch sizes; graphs that mix samples along dim 0 are refused, CNN, MLP
and attention-like graphs are separable with the right rows per sample."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from hobbit.frontend.onnx.importer import import_onnx
from hobbit.ops.separable import separation
from tests.helpers import rand


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple], outputs: list[str],
           inits: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """Inputs as (dims...) with "N" for the symbolic batch."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(dims)) for name, dims in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _separation(model: onnx.ModelProto, small: int = 2, large: int = 3):
    def at(batch: int):
        shapes = {}
        for vi in model.graph.input:
            dims = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
            shapes[vi.name] = tuple(dims)
        return import_onnx(model, shapes)
    return separation(at(small), small, at(large), large)


def _not_separable(nodes, inputs, inits=None, outputs=("y",)):
    result = _separation(_model(nodes, inputs, list(outputs), inits))
    assert not result.separable
    assert result.reason
    return result.reason


def test_softmax_over_the_batch_is_refused():
    reason = _not_separable([helper.make_node("Softmax", ["x"], ["y"], axis=0)], {"x": ("N", 4)})
    assert "Softmax" in reason


def test_concat_along_the_batch_is_refused():
    _not_separable([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], {"x": ("N", 4)})


def test_reduce_mean_over_the_batch_is_refused():
    _not_separable([helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)], {"x": ("N", 4)})


def test_transpose_moving_the_batch_is_refused():
    _not_separable([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], {"x": ("N", 4)})


def test_flatten_axis_0_is_refused():
    _not_separable([helper.make_node("Flatten", ["x"], ["y"], axis=0)], {"x": ("N", 4)})


def test_matmul_contracting_over_the_batch_is_refused():
    """x^T x and x x^T: B (or A) carries the batch along the contracted dim; the transpose that
    puts it there is refused first, and the MatMul fact refuses it too (test_per_sample.py)."""
    for order in (["t", "x"], ["x", "t"]):
        _not_separable([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                        helper.make_node("MatMul", order, ["y"])], {"x": ("N", 4)})


def test_lstm_whose_batch_is_axis_1_is_refused():
    """The LSTM's dim 0 is the sequence: the recurrence carries state from one step to the next."""
    hidden = 3
    inits = {"w": rand(1, 4 * hidden, 4, seed=1), "r": rand(1, 4 * hidden, hidden, seed=2)}
    reason = _not_separable([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden)],
                            {"x": ("N", 2, 4)}, inits)
    assert "Recurrence has no per-sample fact" in reason


def test_cnn_is_separable():
    inits = {"w": rand(8, 3, 3, 3, seed=1), "scale": rand(8, seed=2), "bias": rand(8, seed=3),
             "mean": rand(8, seed=4), "var": np.abs(rand(8, seed=5)) + 1, "fc": rand(10, 8, seed=6),
             "fb": rand(10, seed=7)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"]),
             helper.make_node("Relu", ["b"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    result = _separation(_model(nodes, {"x": ("N", 3, 8, 8)}, ["y"], inits))
    assert result.separable, result.reason
    assert result.rows == (1,)


def test_mlp_with_softmax_over_features_is_separable():
    inits = {"w": rand(4, 5, seed=1), "b": rand(5, seed=2)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    result = _separation(_model(nodes, {"x": ("N", 4)}, ["y"], inits))
    assert result.separable, result.reason


def test_attention_like_graph_is_separable():
    """Per-sample Q K^T, softmax over keys, then V: batch-broadcast MatMuls and a transpose keeping dim 0."""
    d = 4
    inits = {"wq": rand(d, d, seed=1), "wk": rand(d, d, seed=2), "wv": rand(d, d, seed=3),
             "gamma": rand(d, seed=4), "beta": rand(d, seed=5)}
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Add", ["o", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["y"], axis=-1)]
    result = _separation(_model(nodes, {"x": ("N", 5, d)}, ["y"], inits))
    assert result.separable, result.reason


def test_rows_per_sample_follow_a_reshape():
    """[N, 4] -> [2N, 2]: each sample is two consecutive rows of the output."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    result = _separation(_model(nodes, {"x": ("N", 4)}, ["y"], {"shape": np.array([-1, 2], np.int64)}))
    assert result.rows == (2,)


def test_an_embedding_lookup_is_separable():
    """Batched indices into one shared table (Gather axis 0)."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)], "test",
        [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["N", 3])],
        [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(rand(10, 4), "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    result = _separation(model)
    assert result.separable, result.reason


@pytest.mark.parametrize("small,large", [(1, 2), (4, 5)])
def test_the_two_batch_sizes_may_include_1(small, large):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    assert _separation(_model(nodes, {"x": ("N", 4)}, ["y"]), small, large).separable


def test_equal_batch_sizes_decide_nothing():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    assert not _separation(_model(nodes, {"x": ("N", 4)}, ["y"]), 2, 2).separable



def _mask_gather(reverse: bool) -> onnx.ModelProto:
    """An exporter's attention mask: x [N, 3] flattened and gathered back with indices computed
    from its shape, [[b * 3 + s]] (a constant at each batch size), or reversed over the whole
    batch (each sample then reads another's rows)."""
    ends = ["last", "minus1", "minus1"] if reverse else ["zero", "size", "one"]
    nodes = [helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Sub", ["size", "one"], ["last"]),
             helper.make_node("Range", ends, ["r"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Reshape", ["r", "shape"], ["idx"]),
             helper.make_node("Reshape", ["x", "flat"], ["f"]),
             helper.make_node("Gather", ["f", "idx"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "test", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                               (("zero", 0), ("one", 1), ("minus1", -1), ("flat", [-1]))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_gather_of_each_samples_own_flattened_rows_is_separable():
    result = _separation(_mask_gather(reverse=False))
    assert result.separable, result.reason
    assert result.rows == (1,)


def test_a_gather_across_samples_is_refused():
    assert not _separation(_mask_gather(reverse=True)).separable


def _expanded(values: list[float]) -> onnx.ModelProto:
    """x + a constant row expanded to x's batch (folded into a constant of the batch's size)."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Expand", ["row", "shape"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["y"])]
    return _model(nodes, {"x": ("N", 3)}, ["y"], {"row": np.array([values], np.float32)})


def test_a_constant_repeating_one_block_per_sample_is_separable():
    """Expand to Shape(x): the folded constant grows with the batch, one row a sample, each the same."""
    result = _separation(_expanded([1.0, 2.0, 3.0]))
    assert result.separable, result.reason


def test_a_constant_that_grows_with_the_batch_otherwise_is_refused():
    """A Range over the batch: each sample gets another value."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
             helper.make_node("Range", ["start", "n", "step"], ["r"]),
             helper.make_node("Cast", ["r"], ["f"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["f", "one"], ["col"]),
             helper.make_node("Add", ["x", "col"], ["y"])]
    reason = _not_separable(nodes, {"x": ("N", 3)}, {"zero": np.array(0, np.int64), "one": np.array([1], np.int64),
                                                      "start": np.array(0, np.int64), "step": np.array(1, np.int64)})
    assert "depends on the batch size" in reason
