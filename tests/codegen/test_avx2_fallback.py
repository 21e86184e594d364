"""Code for a CPU without AVX-512: the same model lowered for an AVX2 target description
(256-bit vectors, 16 registers) uses only ymm registers and still computes the right
answer (AVX2 code runs on this AVX-512 host too)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from onnx import helper

from hobbit.codegen.llvm import emit_assembly
from hobbit.codegen.module import pack_weights
from hobbit.target import host_target
from hobbit.compiler import lower_to_llvm
from hobbit.runtime.jit import CompiledModel, TensorSpec
from tests.helpers import make_model, rand, run_ort


def _avx2_target():
    host = host_target()
    if "+avx2" not in host.features:
        pytest.skip("the host cannot run AVX2 code")
    features = ",".join("-" + f[1:] if f.startswith("+avx512") else f for f in host.features.split(","))
    return dataclasses.replace(host, features=features, vector_bits=256, vector_registers=16)


def test_avx2_target_uses_ymm_only_and_matches_onnxruntime():
    x = rand(1, 24, 20, 20)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv3x3"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "D"], ["d"], pads=[1, 1, 1, 1], group=32, strides=[2, 2], name="dw"),
             helper.make_node("Conv", ["d", "P"], ["y"], name="project")]
    inits = {"W": rand(32, 24, 3, 3, seed=1) * 0.2, "B": rand(32, seed=2), "D": rand(32, 1, 3, 3, seed=3),
             "P": rand(20, 32, 1, 1, seed=4)}
    model = make_model(nodes, {"x": x}, ["y"], inits)
    target = _avx2_target()
    report = lower_to_llvm(model, target, threads=1)
    asm = emit_assembly(report.optimized, target)
    assert re.search(r"vfmadd\d+ps\s[^\n]*%ymm", asm)
    assert "zmm" not in asm
    graph = report.graph
    compiled = CompiledModel(report.optimized, target, pack_weights(graph, report.plan), report.plan.arena_bytes,
                             [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs],
                             [TensorSpec("y", tuple(graph.outputs[0].shape), np.float32)], report)
    got = compiled.run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
