"""The GPU backend's kernel table and what a GPU kernel's emitter receives.

GPU is a table of its own, with no parent: an op without a GPU kernel is reported at
compile time for a GPU target (hobbit.backend.gpu.module.unsupported), never run on the
CPU inside a GPU model. Element-wise kernels take their scalar expressions from the table
every backend reads (hobbit/emit/scalar_ops.py): an expression is the same arithmetic on
either device; the loop around it is the GPU's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from hobbit.graph.ir import Node
from hobbit.backend.gpu.simt import Simt
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.table import KernelTable
from hobbit.target import GpuTarget

GPU = KernelTable("gpu")


@dataclass
class GpuArgs:
    kb: KernelBuilder
    simt: Simt
    node: Node
    target: GpuTarget
    inputs: list[ir.Value | None]  # one pointer per node.inputs entry (None for absent optionals)
    outputs: list[ir.Value]
    epilogue: list[ir.Value | None]  # one pointer per epilogue step (None for unary steps)
    plan: Any  # the node's GPU plan (hobbit.plan.gpu.launch): grid, threads and the kernel's own choices

    def width(self, dtype: np.dtype) -> int:
        """Scalar code: a GPU thread is one lane (the warp is the vector)."""
        return 1
