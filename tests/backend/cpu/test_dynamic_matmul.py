"""MatMul with run-time dims (issue 28): single-op ONNX models with symbolic dims, compiled
once at the bound (dynamic_shapes) and run at many sizes inside it against onnxruntime.

The cases are a transformer's: a linear layer (activations [1, S, K] or [B, S, K] times a
constant weight, bias and activation fused), and attention's two batched products of
activations, Q K^T (M and N run-time, epilogue scale and mask) and P V (M and K run-time).
Sizes cover 1, every ragged last block of rows and panel width (odd sizes), whole panels
and the bound; each model must come back as a DynamicModel (a silent per-shape fallback
fails), at one and two threads."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.backend.cpu.matmul import matmul_dynamic
from hobbit.graph.extents import Extent
from hobbit.graph.ir import Node, TensorType, Value
from tests.helpers import assert_inside_extents, run_ort

RTOL = ATOL = 1e-4
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, database=None)
SEQ = Extent(((0, 1),), 0)


def _model(nodes, inputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "dynamic_matmul",
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, name) for name, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def linear(k: int, n: int, batch: int | str = 1, relu: bool = False) -> onnx.ModelProto:
    """y = x @ W + b (then Relu), x [batch, seq, k]: W and b constants, the bias fused."""
    rng = np.random.default_rng(k * 1000 + n)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["h" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["h"], ["y"]))
    return _model(nodes, [("x", [batch, "seq", k])],
                  [("w", (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)),
                   ("b", rng.standard_normal(n).astype(np.float32))])


def gemm(k: int, n: int) -> onnx.ModelProto:
    """ONNX Gemm (a MatMul and a fused Add once imported): x [seq, k] @ W^T + c, alpha 1, transB."""
    rng = np.random.default_rng(k + n)
    return _model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], [("x", ["seq", k])],
                  [("w", (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)),
                   ("c", rng.standard_normal(n).astype(np.float32))])


def scores(heads: int, d: int) -> onnx.ModelProto:
    """Attention scores: (q @ k^T) * scale + mask, q [1, H, S, d], k^T [1, H, d, S], mask [1, 1, 1, S]."""
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["y"])]
    return _model(nodes, [("q", [1, heads, "seq", d]), ("kt", [1, heads, d, "seq"]), ("mask", [1, 1, 1, "seq"])],
                  [("scale", np.array(1 / np.sqrt(d), np.float32))])


def context(heads: int, d: int, batch: int | str = 1) -> onnx.ModelProto:
    """Attention's weighted values: p @ v, p [B, H, S, S], v [B, H, S, d] (K run-time)."""
    return _model([helper.make_node("MatMul", ["p", "v"], ["y"])],
                  [("p", [batch, heads, "seq", "seq"]), ("v", [batch, heads, "seq", d])])


@functools.cache
def _compiled(builder, args: tuple, bounds: tuple, threads: int):
    model = builder(*args)
    compiled = hobbit.compile(model, threads=threads, dynamic_shapes=dict(bounds), cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return model, compiled


def _check(builder, args: tuple, bounds: dict, threads: int, feeds: dict[str, np.ndarray]) -> None:
    model, compiled = _compiled(builder, args, tuple(bounds.items()), threads)
    got = compiled.run(feeds)[0]
    want = run_ort(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def _linear_feeds(k: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seq).standard_normal((batch, seq, k)).astype(np.float32)}


# Sizes: 1, ragged last blocks of rows (odd sizes), whole blocks, and the bound.
LINEAR_SIZES = [1, 2, 5, 7, 13, 16, 31, 48, 64]


@pytest.mark.parametrize("threads", [1, 2])
# At two threads (on 16-lane vectors): (96, 80) and (40, 200) split M blocks, (70, 48) runs on
# one, (96, 128) shares N panels, (256, 512) shares them in claimed runs.
@pytest.mark.parametrize("k, n, relu", [(96, 80, False), (70, 48, True), (40, 200, False), (96, 128, False),
                                        (256, 512, True)])
def test_linear(k: int, n: int, relu: bool, threads: int) -> None:
    for seq in LINEAR_SIZES:
        _check(linear, (k, n, 1, relu), {"seq": (1, 64)}, threads, _linear_feeds(k, 1, seq))


@pytest.mark.parametrize("threads", [1, 2])
@given(seq=st.integers(1, 64))
@SETTINGS
def test_gemm(threads: int, seq: int) -> None:
    feeds = {"x": np.random.default_rng(seq).standard_normal((seq, 72)).astype(np.float32)}
    _check(gemm, (72, 136), {"seq": (1, 64)}, threads, feeds)


@pytest.mark.parametrize("threads", [1, 2])
@given(batch=st.integers(1, 8), seq=st.integers(1, 24))
@SETTINGS
def test_linear_batch_and_sequence(threads: int, batch: int, seq: int) -> None:
    """[B, S, K] @ W with both B and S run-time: rows of a batch are at the bound's stride."""
    _check(linear, (48, 72, "batch"), {"batch": (1, 8), "seq": (1, 24)}, threads, _linear_feeds(48, batch, seq))


def _scores_feeds(heads: int, d: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq)
    mask = np.where(rng.random((1, 1, 1, seq)) < 0.2, -1e4, 0).astype(np.float32)
    return {"q": rng.standard_normal((1, heads, seq, d)).astype(np.float32),
            "kt": rng.standard_normal((1, heads, d, seq)).astype(np.float32), "mask": mask}


# Every width of a ragged last panel (1 .. 4 vectors of 16 or of 8 lanes), whole panels, the bound.
SCORE_SIZES = [1, 3, 8, 9, 16, 17, 25, 33, 50, 63, 64, 65, 79, 80]


@pytest.mark.parametrize("threads", [1, 2])
def test_scores(threads: int) -> None:
    for seq in SCORE_SIZES:
        _check(scores, (3, 24), {"seq": (1, 80)}, threads, _scores_feeds(3, 24, seq))


def _context_feeds(heads: int, d: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq)
    return {"p": rng.random((batch, heads, seq, seq)).astype(np.float32),
            "v": rng.standard_normal((batch, heads, seq, d)).astype(np.float32)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("d", [24, 40])
def test_context(d: int, threads: int) -> None:
    for seq in SCORE_SIZES:
        _check(context, (3, d), {"seq": (1, 80)}, threads, _context_feeds(3, d, 1, seq))


@pytest.mark.parametrize("threads", [1, 2])
@given(batch=st.integers(1, 8), seq=st.integers(1, 40))
@SETTINGS
def test_context_batch_and_sequence(threads: int, batch: int, seq: int) -> None:
    """Run-time batch and sequence dims of two activations, heads static: (batch, head, M block)
    units shared among the threads."""
    _check(context, (2, 16, "batch"), {"batch": (1, 8), "seq": (1, 40)}, threads, _context_feeds(2, 16, batch, seq))


@pytest.mark.parametrize("threads", [1, 2])
def test_context_long_reduction(threads: int) -> None:
    """A bound past one K chunk (K = S is cut into chunks at the bound): one chunk, two, and
    sizes around the chunk boundary all stop the reduction at the extent."""
    for seq in [1, 300, 549, 550, 551, 1099, 1100]:
        _check(context, (1, 64), {"seq": (1, 1100)}, threads, _context_feeds(1, 64, 1, seq))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", ["scores", "context"])
def test_reads_and_writes_stay_inside_extents(case: str, threads: int) -> None:
    """Data past the extents of a bound-shaped buffer is garbage: NaN there must not leak into
    the result, and nothing past the extents is written."""
    builder, feeds_at = {"scores": (scores, _scores_feeds),
                         "context": (context, lambda h, d, s: _context_feeds(h, d, 1, s))}[case]
    model, compiled = _compiled(builder, (3, 24), (("seq", (1, 80)),), threads)
    build = compiled._current
    for seq in (1, 37, 80):
        feeds = feeds_at(3, 24, seq)
        assert_inside_extents(build, model, feeds, [seq], RTOL, ATOL)


def _node(a_shape, a_ext, b_shape, b_ext, precision: str | None = None) -> Node:
    a = Value("a", TensorType(np.dtype(np.float32), a_shape))
    b = Value("b", TensorType(np.dtype(np.float32), b_shape))
    a.extents, b.extents = a_ext, b_ext
    out = Value("y", TensorType(np.dtype(np.float32), a_shape[:-1] + b_shape[-1:]))
    out.extents = a_ext[:-1] + b_ext[-1:]
    return Node("MatMul", "mm", [a, b], [out], {"precision": precision} if precision else {})


def test_predicate() -> None:
    ok = _node((1, 2, 8, 4), (None, None, SEQ, None), (1, 2, 4, 8), (None, None, None, SEQ))
    assert matmul_dynamic(ok) is None
    bf16 = _node((1, 2, 8, 4), (None, None, SEQ, None), (1, 2, 4, 8), (None, None, None, SEQ), "bf16")
    assert "bf16" in matmul_dynamic(bf16)
    # a run-time batch dim of one operand against a static one of the other: a run-time broadcast
    broadcast = _node((2, 8, 4), (SEQ, None, None), (2, 4, 8), (None, None, None))
    broadcast.outputs[0].extents = (SEQ, None, None)
    assert "broadcasts" in matmul_dynamic(broadcast)
