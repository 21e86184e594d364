"""MatMul and Gemm across dtypes with runtime operands: float64 and integers with
broadcast batch dims and 1-D operands (numpy decides), and float16/bfloat16, which
are computed in float32 and rounded once (onnxruntime decides where it can)."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from tests.helpers import assert_matches_ort, make_model, rand

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _run(node, feeds, opset=13):
    model = make_model([node], {}, ["y"], opset=opset)
    model.graph.input.extend(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                             for n, a in feeds.items())
    return hobbit.compile(model).run(feeds)[0]


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 1, 3, 4), (5, 4, 2)), ((4,), (3, 4, 2)), ((2, 3, 4), (4,)),
                                             ((3, 4), (4, 5))])
def test_matmul_dtypes_and_broadcasting(dtype, a_shape, b_shape):
    gen = np.random.default_rng(0)
    feeds = {"a": (gen.standard_normal(a_shape) * 5).astype(dtype), "b": (gen.standard_normal(b_shape) * 5).astype(dtype)}
    got = _run(helper.make_node("MatMul", ["a", "b"], ["y"]), feeds)
    expected = np.matmul(feeds["a"], feeds["b"])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_matmul_float16_matches_onnxruntime():
    feeds = {"a": rand(2, 3, 16, dtype=np.float16), "b": rand(16, 5, seed=1, dtype=np.float16)}
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], feeds, ["y"], opset=13)
    assert_matches_ort(model, feeds, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BFLOAT16])
def test_gemm_half_is_computed_in_float32(dtype):
    feeds = {"a": rand(6, 4).astype(dtype), "b": rand(5, 6, seed=1).astype(dtype), "c": rand(5, seed=2).astype(dtype)}
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    got = _run(node, feeds)
    wide = {k: v.astype(np.float32) for k, v in feeds.items()}
    expected = (0.5 * wide["a"].T @ wide["b"].T + 2.0 * wide["c"]).astype(dtype)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_bfloat16_matmul_rounds_once():
    feeds = {"a": rand(3, 8).astype(BFLOAT16), "b": rand(8, 2, seed=1).astype(BFLOAT16)}
    got = _run(helper.make_node("MatMul", ["a", "b"], ["y"]), feeds)
    expected = (feeds["a"].astype(np.float32) @ feeds["b"].astype(np.float32)).astype(BFLOAT16)
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))
    assert TensorProto.BFLOAT16 == helper.np_dtype_to_tensor_dtype(got.dtype)
