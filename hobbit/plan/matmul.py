"""The plan of a MatMul node: its operand Format and its one GEMM schedule.

A MatMul needs no scratch, but its precision is decided here, once, like every GEMM
client's (hobbit.plan.format): float in the output's own type, or bf16 where the bf16
pass stored its constant B as pairs of k ([panels, K/2, NR, 2]); the schedule counts K in
the format's steps, and the emitter (hobbit.backend.cpu.matmul) reads both from this plan.
A node with run-time dims is planned at its bound shapes: its schedule (blocks, panels, K
chunks) is the bound's, and the emitter takes the trip counts from the extents."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.plan.format import Format, node_format
from hobbit.plan.gemm import GemmSchedule, gemm_schedule
from hobbit.target import Target


@dataclass(frozen=True)
class MatMulPlan:
    format: Format
    gemm: GemmSchedule  # for one [M, K] @ [K, N] of the batch (kc in the format's steps)
    scratch_bytes: int = 0


def matmul_plan(node: Node, target: Target, threads: int) -> MatMulPlan:
    dtype = node.outputs[0].dtype
    fmt = node_format(node, dtype)
    m, k = node.inputs[0].shape[-2:]
    n = node.outputs[0].shape[-1]
    return MatMulPlan(fmt, gemm_schedule(m, n, fmt.steps(k), target, np.dtype(dtype).itemsize))
