"""What a kernel's emitter receives on every backend: its builder, the node, the target and
the node's pointers. Each backend's own args extend it with what only that backend has
(hobbit.backend.cpu.args.KernelArgs: scratch, the thread team, the plan, a body graph;
hobbit.backend.gpu.args.GpuArgs: the SIMT view of the block, the GPU plan) and say how many
vector lanes an element-wise loop uses (`width(dtype)`)."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.graph.ir import Node
from hobbit.target import GpuTarget, Target


@dataclass
class EmitArgs:
    kb: KernelBuilder
    node: Node
    target: Target | GpuTarget
    inputs: list[ir.Value | None]  # one pointer per node.inputs entry (None for absent optionals)
    outputs: list[ir.Value]
    epilogue: list[ir.Value | None]  # one pointer per epilogue step (None for unary steps)
