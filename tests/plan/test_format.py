"""The GEMM operand Format (hobbit.plan.format): one description of a precision that every
GEMM client's plan carries, on both backends. Checked against numpy (the weights' word
layouts), against the instruction sets' facts (k per 32-bit word: 1 for fp32 and tf32, 2
for bf16 pairs (vdpbf16ps, mma m16n8k16 .bf16) and vpmaddwd's int16s, 4 for vpdpbusd's
bytes; int32 sums for the integer dot products), and through the plans that choose it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from hobbit.plan.format import BF16, FP32, Format, float_format, node_format
from hobbit.plan.gpu.gemm import gemm_plan
from hobbit.plan.gpu.mma import FORMATS, MmaFormat
from hobbit.plan.int8 import DotProduct
from hobbit.plan.planners import kernel_plan
from hobbit.passes import run_pipeline
from hobbit.target import GPUS, host_target
from tests.helpers import rand
from tests.passes import import_model

VNNI = DotProduct("vpdpbusd", 4, 16, np.dtype(np.uint8), np.dtype(np.int8))
PMADDWD = DotProduct("vpmaddwd", 2, 8, np.dtype(np.int16), np.dtype(np.int16))


@pytest.mark.parametrize("fmt, k, steps", [(FP32, 7, 7), (BF16, 7, 4), (BF16, 8, 4), (VNNI.format, 7, 2),
                                           (PMADDWD.format, 5, 3)])
def test_steps_count_k_in_operand_words(fmt: Format, k: int, steps: int) -> None:
    assert fmt.steps(k) == steps


def test_integer_dot_products_are_formats_with_int32_sums() -> None:
    for dot in (VNNI, PMADDWD):
        fmt = dot.format
        assert (fmt.micro, fmt.k_step, fmt.activations, fmt.weights, fmt.accumulator) == \
            (dot.name, dot.group, dot.packed, dot.weights, np.dtype(np.int32))
        assert fmt.k_step * fmt.activations.itemsize == 4  # one 32-bit word per group of k


def test_float_formats_follow_the_node_dtype() -> None:
    assert FP32.micro == "fma" and FP32.k_step == 1 and FP32.accumulator == np.float32
    fp64 = float_format(np.dtype(np.float64))
    assert fp64.name == "fp64" and fp64.accumulator == np.float64
    assert BF16.converts and not FP32.converts


@pytest.mark.parametrize("m, k", [(3, 5), (4, 8), (1, 1)])
def test_bf16_word_rows_hold_consecutive_k_side_by_side(m: int, k: int) -> None:
    a = rand(m, k, seed=k)
    words = BF16.word_rows(a)
    assert words.shape == (m, -(-k // 2), 2) and words.dtype == ml_dtypes.bfloat16
    padded = np.zeros((m, 2 * (-(-k // 2))), np.float32)
    padded[:, :k] = a.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(words.astype(np.float32).reshape(m, -1), padded)


def test_bf16_word_panels_interleave_pairs_within_each_panel() -> None:
    panels = rand(2, 5, 16, seed=3)  # [P, K, NR]
    words = BF16.word_panels(panels).astype(np.float32)
    assert words.shape == (2, 3, 16, 2)
    want = np.zeros((2, 6, 16), np.float32)
    want[:, :5] = panels.astype(ml_dtypes.bfloat16).astype(np.float32)
    for p in range(2):
        for j in range(3):
            np.testing.assert_array_equal(words[p, j, :, 0], want[p, 2 * j])
            np.testing.assert_array_equal(words[p, j, :, 1], want[p, 2 * j + 1])


def test_tensor_core_formats_are_operand_formats() -> None:
    """The PTX ISA's mma shapes: m16n8k8 .tf32 (one element a register) and m16n8k16 .bf16
    (two), both summing in float32."""
    tf32, bf16 = FORMATS["tf32"], FORMATS["bf16"]
    assert isinstance(tf32, MmaFormat) and isinstance(tf32, Format)
    assert (tf32.k, tf32.k_step, tf32.accumulator) == (8, 1, np.float32) and "m16n8k8" in tf32.micro
    assert (bf16.k, bf16.k_step, bf16.accumulator) == (16, 2, np.float32) and "m16n8k16" in bf16.micro


def _matmul(m: int, k: int, n: int, precision: str | None = None):
    graph = run_pipeline(import_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": rand(m, k)}, ["y"],
                                      {"w": rand(k, n, seed=1)}), [])
    node = next(n for n in graph.nodes if n.op == "MatMul")
    if precision:
        node.attrs["precision"] = precision
    return node


def test_the_plan_carries_the_format_the_node_runs_in() -> None:
    node = _matmul(4, 32, 48)
    assert node_format(node) == FP32
    assert kernel_plan(node, host_target(), 1).format == FP32
    node.attrs["precision"] = "bf16"
    assert node_format(node) == BF16


def test_the_gpu_gemm_plan_carries_fp32_for_simt_and_the_mma_format_for_tensor_cores() -> None:
    node = _matmul(128, 64, 128)
    assert gemm_plan(node, GPUS["sm_90"]).format == FP32
    node.attrs["tensor_cores"] = "tf32"
    assert gemm_plan(node, GPUS["sm_90"]).format is FORMATS["tf32"]
