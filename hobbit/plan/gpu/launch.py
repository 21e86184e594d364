"""GPU plans: for each kernel of a GPU model, its launch (grid, threads per block) and the
choices its emitter reads, computed once from (node, GpuTarget).

Memory planning keeps them (MemoryPlan.kernels) and codegen hands the same plan to the
emitter and records its launch, so the grid a kernel is written for and the grid it is
launched with are one decision. Each op kind's planner is registered beside its kernel's
plan rules, here or in the other modules of hobbit/plan/gpu; an op without a planner has
no GPU kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hobbit.graph.ir import Node
from hobbit.target import GpuTarget


@dataclass(frozen=True)
class GpuPlan:
    grid: tuple[int, int, int]
    threads: int  # per block, one dimension
    per_thread: int = 1  # elements (or outputs) each thread computes
    extra: dict[str, Any] = field(default_factory=dict)  # the kernel's own choices (tiles, splits)
    scratch_bytes: int = 0  # device scratch in the arena (none yet: every kernel works in registers/shared)
    min_blocks: int = 0  # blocks per SM its registers must allow (0: the back end's choice)

    def __hash__(self) -> int:
        return hash((self.grid, self.threads, self.per_thread, tuple(sorted(self.extra.items())), self.min_blocks))


GpuPlanner = Callable[[Node, GpuTarget], GpuPlan]
GPU_PLANNERS: dict[str, GpuPlanner] = {}


def gpu_planner(*ops: str) -> Callable[[GpuPlanner], GpuPlanner]:
    """Register `fn` as the GPU planner of `ops`."""
    def register(fn: GpuPlanner) -> GpuPlanner:
        for op in ops:
            GPU_PLANNERS[op] = fn
        return fn
    return register


def flat_plan(count: int, target: GpuTarget, per_thread: int = 4, threads: int = 256) -> GpuPlan:
    """`count` independent outputs, `per_thread` each, in blocks of `threads`.

    256 threads is 8 warps on NVIDIA (4 wavefronts on AMD): enough warps per block to hide
    memory latency with several blocks resident per SM. Few outputs take one element per
    thread, so that even a small tensor spreads over the SMs."""
    per_thread = per_thread if count >= target.sms * threads * per_thread else 1
    blocks = max(1, -(-count // (threads * per_thread)))
    return GpuPlan(_grid(blocks), threads, per_thread)


def _grid(blocks: int) -> tuple[int, int, int]:
    """Blocks as a grid: CUDA's y and z extents stop at 65535, x goes to 2**31 - 1."""
    return (blocks, 1, 1)


def elementwise_plan(node: Node, target: GpuTarget) -> GpuPlan:
    return flat_plan(int(np.prod(node.outputs[0].shape, dtype=np.int64)), target)


def gpu_plan(node: Node, target: GpuTarget, elementwise: bool) -> GpuPlan | None:
    """The node's GPU plan (element-wise ops, as the op registry says, share one planner);
    None for an op without one, which then has no GPU kernel (codegen reports it)."""
    planner = GPU_PLANNERS.get(node.op)
    if planner is not None:
        return planner(node, target)
    return elementwise_plan(node, target) if elementwise else None
