"""bf16 MatMul / Gemm with constant weights (fully-connected layers: backend/cpu/matmul.py in
the BF16 format) against float64 numpy, over ragged N (partial NR panels), odd K (a
zero-padded last pair), several rows, batch dims and a K long enough for the float32 A to be converted in place
across the whole row, at one and two threads. The tolerances are those derived in
tests/backend/cpu/test_conv_bf16.py: (2U + U^2) * S + (K + 2) * 2^-24 * S against the exact
result, and (K + 2) * 2^-24 * S against the result on operands rounded to bf16 first."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from tests.helpers import make_model, needs_host_feature, rand
from tests.backend.cpu.test_conv_bf16 import EPS, U, bf16_bound, to_bf16

CASES = [
    # id, A's shape, K, N, Gemm (transB + bias) or MatMul
    ("fc-1x513x1000", (1, 513), 513, 1000, True),
    ("gemm-5rows", (5, 64), 64, 17, True),
    ("gemm-9rows-oddK", (9, 31), 31, 70, True),
    ("matmul-batched", (2, 3, 37), 37, 20, False),
    ("matmul-K2048", (1, 2048), 2048, 96, False),
]


def _model(a_shape, k, n, gemm):
    w = (rand(n, k, seed=1) / np.sqrt(k)).astype(np.float32)
    bias = rand(n, seed=2)
    if gemm:
        nodes = [helper.make_node("Gemm", ["a", "W", "B"], ["y"], transB=1)]
        inits = {"W": w, "B": bias}
    else:
        nodes = [helper.make_node("MatMul", ["a", "Wt"], ["y"])]
        inits = {"Wt": np.ascontiguousarray(w.T)}
        bias = np.zeros(n, np.float32)
    a = rand(*a_shape, seed=3)
    return make_model(nodes, {"a": a}, ["y"], inits), a, w, bias


@needs_host_feature("avx512bf16")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bf16_matmul_within_rounding_bound(case, threads):
    _, a_shape, k, n, gemm = case
    model, a, w, bias = _model(a_shape, k, n, gemm)
    graph = lower_to_llvm(model, threads=threads, precision="bf16", keep_ir=False).graph
    assert [node.attrs.get("precision") for node in graph.nodes if node.op == "MatMul"] == ["bf16"]
    got = hobbit.compile(model, threads=threads, precision="bf16", cache=False).run({"a": a})[0]
    a64, w64, b64 = a.astype(np.float64), w.astype(np.float64), bias.astype(np.float64)
    want = a64 @ w64.T + b64
    magnitudes = np.abs(a64) @ np.abs(w64.T) + np.abs(b64)
    assert got.shape == want.shape
    err = np.abs(got - want)
    assert np.all(err <= bf16_bound(magnitudes, k)), f"max excess {np.max(err / bf16_bound(magnitudes, k)):.3f}"
    rounded = to_bf16(a).astype(np.float64) @ to_bf16(w).astype(np.float64).T + b64
    assert np.all(np.abs(got - rounded) <= (k + 2) * EPS * magnitudes * (1 + 4 * U)), "operands not rounded to bf16"
