"""Zero-sized dims flow through every op with onnxruntime's shapes and values: an empty
batch, an empty inner dim, an empty index list. Where onnxruntime refuses a case (an
ambiguous Reshape -1, ArgMax over an empty axis, GroupNorm's reshape), hobbit must refuse
it too, with a HobbitError rather than an answer; where ONNX leaves the value undefined
(ReduceMean over nothing: onnxruntime 0, numpy NaN) only the shape is compared."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

import hobbit
from hobbit.errors import HobbitError
from tests.helpers import make_model, run_ort

_N = helper.make_node
_RNG = np.random.default_rng(0)
UNDEFINED_VALUES = {"ReduceMean-0"}


def _f(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


X = _f(0, 3, 8, 8)


def _case(name, nodes, feeds, outputs, inits=None, opset=17):
    return pytest.param(nodes, feeds, outputs, inits or {}, opset, id=name)


CASES = [
    _case("Relu", [_N("Relu", ["x"], ["y"])], {"x": X}, ["y"]),
    _case("Add-bcast", [_N("Add", ["x", "b"], ["y"])], {"x": X}, ["y"], {"b": _f(3, 1, 1)}),
    _case("Conv", [_N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], {"x": X}, ["y"], {"w": _f(4, 3, 3, 3)}),
    _case("Conv-dw", [_N("Conv", ["x", "w"], ["y"], group=3)], {"x": X}, ["y"], {"w": _f(3, 1, 3, 3)}),
    _case("Conv-1x1", [_N("Conv", ["x", "w", "b"], ["y"])], {"x": X}, ["y"], {"w": _f(8, 3, 1, 1), "b": _f(8)}),
    _case("ConvTranspose", [_N("ConvTranspose", ["x", "w"], ["y"])], {"x": X}, ["y"], {"w": _f(3, 2, 3, 3)}),
    _case("MaxPool", [_N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"x": X}, ["y"]),
    _case("AveragePool", [_N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {"x": X}, ["y"]),
    _case("GlobalAveragePool", [_N("GlobalAveragePool", ["x"], ["y"])], {"x": X}, ["y"]),
    _case("Flatten", [_N("Flatten", ["x"], ["y"])], {"x": X}, ["y"]),
    _case("Reshape0-1", [_N("Reshape", ["x", "s"], ["y"])], {"x": X}, ["y"], {"s": _i64(0, -1)}),
    _case("Reshape-1C", [_N("Reshape", ["x", "s"], ["y"])], {"x": X}, ["y"], {"s": _i64(-1, 192)}),
    _case("Gemm", [_N("Gemm", ["a", "w", "b"], ["y"], transB=1)],
          {"a": _f(0, 16)}, ["y"], {"w": _f(10, 16), "b": _f(10)}),
    _case("MatMul", [_N("MatMul", ["a", "w"], ["y"])], {"a": _f(0, 16)}, ["y"], {"w": _f(16, 10)}),
    _case("MatMul-K0", [_N("MatMul", ["a", "w"], ["y"])], {"a": _f(4, 0)}, ["y"], {"w": _f(0, 10)}),
    _case("BatchMatMul", [_N("MatMul", ["a", "b"], ["y"])], {"a": _f(0, 4, 5), "b": _f(0, 5, 6)}, ["y"]),
    _case("Softmax", [_N("Softmax", ["a"], ["y"], axis=-1)], {"a": _f(0, 16)}, ["y"]),
    _case("Softmax-axis0", [_N("Softmax", ["a"], ["y"], axis=0)], {"a": _f(0, 16)}, ["y"]),
    _case("Concat0", [_N("Concat", ["a", "b"], ["y"], axis=0)], {"a": _f(0, 4), "b": _f(2, 4)}, ["y"]),
    _case("Concat1", [_N("Concat", ["a", "b"], ["y"], axis=1)], {"a": _f(0, 4), "b": _f(0, 2)}, ["y"]),
    _case("Transpose", [_N("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], {"x": X}, ["y"]),
    _case("ReduceMean-1", [_N("ReduceMean", ["x"], ["y"], axes=[2, 3])], {"x": X}, ["y"]),
    _case("ReduceSum-0", [_N("ReduceSum", ["a", "ax"], ["y"], keepdims=0)], {"a": _f(0, 4)}, ["y"], {"ax": _i64(0)}),
    _case("ReduceMax-0", [_N("ReduceMax", ["a"], ["y"], axes=[0])], {"a": _f(0, 4)}, ["y"]),
    _case("BatchNorm", [_N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
          {"x": X}, ["y"], {"s": _f(3), "b": _f(3), "m": _f(3), "v": np.ones(3, np.float32)}),
    _case("LayerNorm", [_N("LayerNormalization", ["a", "s", "b"], ["y"], axis=-1)],
          {"a": _f(0, 16)}, ["y"], {"s": _f(16), "b": _f(16)}),
    _case("InstanceNorm", [_N("InstanceNormalization", ["x", "s", "b"], ["y"])],
          {"x": X}, ["y"], {"s": _f(3), "b": _f(3)}),
    _case("Slice", [_N("Slice", ["x", "s", "e", "a"], ["y"])],
          {"x": X}, ["y"], {"s": _i64(1), "e": _i64(5), "a": _i64(2)}),
    _case("Gather-data0", [_N("Gather", ["a", "i"], ["y"], axis=1)], {"a": _f(0, 4), "i": _i64(1, 2)}, ["y"]),
    _case("Gather-idx0", [_N("Gather", ["a", "i"], ["y"])], {"a": _f(5, 4), "i": np.zeros((0, ), np.int64)}, ["y"]),
    _case("Split", [_N("Split", ["a", "s"], ["y", "z"], axis=1)],
          {"a": _f(0, 4)}, ["y", "z"], {"s": _i64(1, 3)}, opset=13),
    _case("Pad", [_N("Pad", ["x", "p"], ["y"])], {"x": X}, ["y"], {"p": _i64(0, 0, 1, 1, 0, 0, 1, 1)}),
    _case("Resize", [_N("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
          {"x": X}, ["y"], {"sc": np.array([1, 1, 2, 2], np.float32)}, opset=13),
    _case("Squeeze", [_N("Squeeze", ["a", "ax"], ["y"])], {"a": _f(0, 1, 4)}, ["y"], {"ax": _i64(1)}, opset=13),
    _case("Unsqueeze", [_N("Unsqueeze", ["a", "ax"], ["y"])], {"a": _f(0, 4)}, ["y"], {"ax": _i64(1)}, opset=13),
    _case("Expand", [_N("Expand", ["a", "s"], ["y"])], {"a": _f(0, 1)}, ["y"], {"s": _i64(0, 4)}),
    _case("Tile", [_N("Tile", ["a", "r"], ["y"])], {"a": _f(0, 2)}, ["y"], {"r": _i64(3, 2)}),
    _case("Where", [_N("Where", ["c", "a", "b"], ["y"])],
          {"c": np.zeros((0, 4), bool), "a": _f(0, 4)}, ["y"], {"b": _f(4)}),
    _case("Cast", [_N("Cast", ["a"], ["y"], to=T.INT32)], {"a": _f(0, 4)}, ["y"]),
    _case("TopK", [_N("TopK", ["a", "k"], ["v", "i"])], {"a": _f(0, 8)}, ["v", "i"], {"k": _i64(3)}),
    _case("ArgMax", [_N("ArgMax", ["a"], ["y"], axis=1)], {"a": _f(0, 8)}, ["y"]),
    _case("CumSum", [_N("CumSum", ["a", "ax"], ["y"])], {"a": _f(0, 8)}, ["y"], {"ax": _i64(1)}),
    _case("LRN", [_N("LRN", ["x"], ["y"], size=3)], {"x": X}, ["y"]),
    _case("DepthToSpace", [_N("DepthToSpace", ["a"], ["y"], blocksize=2)], {"a": _f(0, 4, 2, 2)}, ["y"]),
    _case("Einsum", [_N("Einsum", ["a", "b"], ["y"], equation="ij, jk->ik")], {"a": _f(0, 4)}, ["y"], {"b": _f(4, 3)}),
    _case("GatherElements", [_N("GatherElements", ["a", "i"], ["y"], axis=1)],
          {"a": _f(0, 4), "i": np.zeros((0, 2), np.int64)}, ["y"]),
    _case("ScatterND", [_N("ScatterND", ["a", "i", "u"], ["y"])],
          {"a": _f(4, 3), "i": np.zeros((0, 1), np.int64), "u": _f(0, 3)}, ["y"]),
    _case("Shape", [_N("Shape", ["x"], ["y"])], {"x": X}, ["y"]),
    _case("Size", [_N("Size", ["x"], ["y"])], {"x": X}, ["y"]),
    _case("Mul-0dim-mid", [_N("Mul", ["a", "b"], ["y"])], {"a": _f(3, 0, 4), "b": _f(1, 0, 1)}, ["y"]),
    _case("Sum-all0", [_N("ReduceSum", ["a"], ["y"], keepdims=0)], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("Conv-chain", [_N("Conv", ["x", "w"], ["c"]), _N("Relu", ["c"], ["r"]),
                         _N("GlobalAveragePool", ["r"], ["g"]), _N("Flatten", ["g"], ["y"])],
          {"x": X}, ["y"], {"w": _f(4, 3, 3, 3)}),
    _case("MaxPool-idx", [_N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], {"x": X}, ["y"]),
    _case("Resize-sizes", [_N("Resize", ["x", "", "", "sz"], ["y"], mode="linear")],
          {"x": X}, ["y"], {"sz": _i64(0, 3, 4, 4)}, opset=13),
    _case("Upsample", [_N("Upsample", ["x", "sc"], ["y"])],
          {"x": X}, ["y"], {"sc": np.array([1, 1, 2, 2], np.float32)}, opset=9),
    _case("SpaceToDepth", [_N("SpaceToDepth", ["x"], ["y"], blocksize=2)], {"x": X}, ["y"]),
    _case("GroupNorm", [_N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
          {"x": X}, ["y"], {"s": _f(3), "b": _f(3)}, opset=21),
    _case("ReduceL2-all", [_N("ReduceL2", ["a"], ["y"])], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("ReduceMean-0", [_N("ReduceMean", ["a"], ["y"], axes=[0])], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("ReduceProd-0", [_N("ReduceProd", ["a"], ["y"], axes=[0])], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("ReduceMin-0", [_N("ReduceMin", ["a"], ["y"], axes=[0])], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("ArgMax-0", [_N("ArgMax", ["a"], ["y"], axis=0)], {"a": _f(0, 4)}, ["y"], opset=13),
    _case("Sort-TopK0", [_N("TopK", ["a", "k"], ["v", "i"])], {"a": _f(3, 0)}, ["v", "i"], {"k": _i64(0)}),
    _case("OneHot", [_N("OneHot", ["i", "d", "v"], ["y"])],
          {"i": np.zeros((0, ), np.int64)}, ["y"], {"d": _i64(3), "v": np.array([0, 1], np.float32)}),
    _case("Conv-group-bn", [_N("Conv", ["x", "w"], ["c"], group=3),
                            _N("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
          {"x": X}, ["y"], {"w": _f(3, 1, 3, 3), "s": _f(3), "b": _f(3), "m": _f(3), "v": np.ones(3, np.float32)}),
    _case("MatMul-int", [_N("MatMulInteger", ["a", "b"], ["y"])],
          {"a": np.zeros((0, 4), np.uint8)}, ["y"], {"b": np.ones((4, 3), np.int8)}),
    _case("Range0", [_N("Range", ["s", "l", "d"], ["y"])],
          {}, ["y"], {"s": np.array(0, np.float32), "l": np.array(0, np.float32), "d": np.array(1, np.float32)}),
    _case("ConstantOfShape0", [_N("ConstantOfShape", ["s"], ["y"])], {}, ["y"], {"s": _i64(0, 3)}),
    _case("Mod", [_N("Mod", ["a", "b"], ["y"], fmod=1)], {"a": _f(0, 4)}, ["y"], {"b": _f(4)}),
    _case("Trilu", [_N("Trilu", ["a"], ["y"])], {"a": _f(0, 4, 4)}, ["y"], opset=14),
    _case("Attention-like", [_N("MatMul", ["q", "kt"], ["s"]), _N("Softmax", ["s"], ["p"], axis=-1),
                             _N("MatMul", ["p", "v"], ["y"])],
          {"q": _f(0, 2, 5, 4), "kt": _f(0, 2, 4, 5), "v": _f(0, 2, 5, 4)}, ["y"]),
]


@pytest.mark.parametrize("nodes,feeds,outputs,inits,opset", CASES)
def test_zero_sized_dims_match_onnxruntime(request, nodes, feeds, outputs, inits, opset) -> None:
    model = make_model(nodes, feeds, outputs, inits, opset)
    try:
        want = run_ort(model, feeds)
    except (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.RuntimeException):
        with pytest.raises(HobbitError):
            hobbit.compile(model, cache=False).run(feeds)
        return
    got = hobbit.compile(model, cache=False).run(feeds)
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        if request.node.callspec.id not in UNDEFINED_VALUES:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_symbolic_batch_zero_through_a_cnn() -> None:
    """The issue's repro: a symbolic-batch CNN given an empty batch answers (0, classes)."""
    nodes = [_N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), _N("Relu", ["c"], ["r"]),
             _N("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), _N("Flatten", ["p"], ["f"]),
             _N("Gemm", ["f", "g"], ["y"], transB=1)]
    model = make_model(nodes, {"x": _f(1, 3, 8, 8)}, ["y"], {"w": _f(4, 3, 3, 3), "g": _f(10, 64)})
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    compiled = hobbit.compile(model, cache=False)
    for batch in (0, 2):
        x = _f(batch, 3, 8, 8)
        got, = compiled.run({"x": x})
        want, = run_ort(model, {"x": x})
        assert got.shape == want.shape == (batch, 10)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
