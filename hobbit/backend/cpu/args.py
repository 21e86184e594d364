"""The CPU backend's kernel table, empty until hobbit.backend.cpu.table imports the
modules that register in it, and what a CPU kernel's emitter receives: what every
backend's does (hobbit.emit.args: the node, its pointers, a builder, the target), the
thread team and the node's plan (hobbit.plan.planners) where it has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from hobbit.target import Target
from hobbit.emit.args import EmitArgs
from hobbit.emit.table import KernelTable
from hobbit.backend.cpu.parallel import Threads

CPU = KernelTable("cpu")


@dataclass
class KernelArgs(EmitArgs):
    target: Target
    scratch: ir.Value | None
    threads: Threads
    plan: Any = None  # the frozen plan (hobbit.plan.planners) memory planning sized the scratch by
    # For an op with a body graph (BoundedLoop): subgraph(builder, tables) emits the calls of
    # the body's kernels, given its (inputs, outputs, weights, arena) pointers as the entry
    # point has them. Codegen provides it: a lowering cannot call kernels itself.
    subgraph: Callable[[ir.IRBuilder, tuple], None] | None = None

    def thread_scratch(self, offset: int, per_thread: int, dtype: np.dtype) -> ir.Value:
        """This thread's slice of scratch: elements [offset + tid*per_thread, ... + per_thread)."""
        b = self.kb.b
        itemsize = np.dtype(dtype).itemsize
        start = b.add(self.kb.i64(offset * itemsize), b.mul(self.threads.tid, self.kb.i64(per_thread * itemsize)))
        return b.gep(self.scratch, [start], source_etype=ir.IntType(8))

    def width(self, dtype: np.dtype) -> int:
        """Vector lanes of the target for `dtype`."""
        return self.target.lanes(np.dtype(dtype).itemsize)
