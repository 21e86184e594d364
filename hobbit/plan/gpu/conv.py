"""The GPU plan of a Conv: depthwise convs (every channel its own group) get the depthwise
kernel's plan, every other Conv the implicit-GEMM tiles; the Conv kernel
(hobbit/backend/gpu/conv.py) reads the same `is_depthwise` to pick its emitter."""

from __future__ import annotations

from hobbit.graph.ir import Node
from hobbit.plan.gpu.launch import GpuPlan, gpu_planner
from hobbit.plan.gpu.depthwise import depthwise_plan, is_depthwise
from hobbit.plan.gpu.gemm import gemm_plan
from hobbit.target import GpuTarget


@gpu_planner("Conv")
def conv_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return depthwise_plan(node, target) if is_depthwise(node) else gemm_plan(node, target)
