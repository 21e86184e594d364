"""Which ops have a plan, and the one call that makes it.

A kernel whose schedule sizes its scratch (or that chooses among variants, or an operand
format: hobbit.plan.format) has a planner here: a pure function of (node, target,
threads) that returns a frozen plan with at least `scratch_bytes`. Memory planning computes each node's plan
once and reserves its scratch; codegen hands that same plan to the emitter
(KernelArgs.plan), which lays the scratch out from it instead of deciding again.
Ops without a planner need no scratch and decide nothing ahead of emission."""

from __future__ import annotations

from typing import Any, Callable

from hobbit.graph.ir import Node
from hobbit.plan.conv import conv_plan
from hobbit.plan.expand_depthwise import expand_depthwise_plan
from hobbit.plan.int8 import int8_conv_plan
from hobbit.plan.linalg import det_plan
from hobbit.plan.matmul import matmul_plan
from hobbit.plan.nms import nms_plan
from hobbit.plan.rnn import recurrence_plan
from hobbit.plan.selection import compress_plan
from hobbit.plan.unique import unique_plan
from hobbit.plan.winograd import winograd_plan
from hobbit.plan.gpu.launch import gpu_plan
from hobbit.plan.gpu import conv, gemm, pool, reduce  # noqa: F401  (register their GPU planners)
from hobbit.target import GpuTarget, Target, is_gpu

Planner = Callable[[Node, Target, int], Any]
# What memory planning calls for each kernel: (node, target, threads, elementwise) -> plan or None.
KernelPlanner = Callable[[Node, Any, int, bool], Any]

PLANNERS: dict[str, Planner] = {
    "Conv": conv_plan,
    "ConvWinograd": winograd_plan,
    "MatMul": matmul_plan,
    "ExpandDepthwise": expand_depthwise_plan,
    "Recurrence": recurrence_plan,
    "Det": det_plan,
    "QConv": int8_conv_plan,
    "QConvInteger": int8_conv_plan,
    "BoundedCompress": compress_plan,
    "BoundedUnique": unique_plan,
    "BoundedNonMaxSuppression": nms_plan,
}


def cpu_plan(node: Node, target: Target, threads: int, elementwise: bool = False) -> Any:
    """The node's frozen plan on a CPU, or None for an op that has no planner (PLANNERS);
    `elementwise` is unused (no CPU planner needs it), taken for the one planner signature."""
    planner = PLANNERS.get(node.op)
    return planner(node, target, threads) if planner is not None else None


def gpu_kernel_plan(node: Node, target: GpuTarget, threads: int, elementwise: bool = False) -> Any:
    """The node's launch plan on a GPU (hobbit.plan.gpu.launch.gpu_plan): one thread of the
    host drives a GPU model, so `threads` says nothing here."""
    return gpu_plan(node, target, elementwise)


def kernel_plan(node: Node, target: Target | GpuTarget, threads: int, elementwise: bool = False) -> Any:
    """The node's frozen plan, or None for an op that has no planner. On a GPU every kernel
    has one (its launch: hobbit.plan.gpu.launch); `elementwise` is the op registry's word on
    the op, which the plan floor sits below. A backend names its own planner
    (hobbit.backend.base.Backend.planner); this picks one by the target."""
    return (gpu_kernel_plan if is_gpu(target) else cpu_plan)(node, target, threads, elementwise)
