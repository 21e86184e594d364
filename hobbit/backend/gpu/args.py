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

from hobbit.backend.gpu.simt import Simt
from hobbit.emit.args import EmitArgs
from hobbit.emit.table import KernelTable
from hobbit.target import GpuTarget

GPU = KernelTable("gpu")


@dataclass
class GpuArgs(EmitArgs):
    target: GpuTarget
    simt: Simt
    plan: Any  # the node's GPU plan (hobbit.plan.gpu.launch): grid, threads and the kernel's own choices

    def width(self, dtype: np.dtype) -> int:
        """Scalar code: a GPU thread is one lane (the warp is the vector)."""
        return 1
