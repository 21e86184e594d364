"""Shared test helpers: build small ONNX models and compare hobbit with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import hobbit

_NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
               np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
               np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float16): TensorProto.FLOAT16,
               np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}


def make_model(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
               initializers: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A model whose inputs take the shapes/dtypes of the example arrays; output shapes are inferred."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, _NP_TO_ONNX[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                       rtol: float = 1e-4, atol: float = 1e-5) -> list[np.ndarray]:
    """Compile with hobbit, run both, and compare every output (shape, dtype, values)."""
    expected = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, (g.shape, e.shape)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got


def rand(*shape: int, seed: int = 0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
