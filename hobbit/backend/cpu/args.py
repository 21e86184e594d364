"""The CPU backend's kernel table, empty until hobbit.backend.cpu.table imports the
modules that register in it, and what a CPU kernel's emitter receives: what every
backend's does (hobbit.emit.args: the node, its pointers, a builder, the target), the
thread team and the node's plan (hobbit.plan.planners) where it has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I64
from hobbit.graph.ir import Value
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
    # For a node with run-time dims (hobbit.graph.extents): the entry point's dims vector.
    dims: ir.Value | None = None

    def extent(self, value: Value, axis: int) -> int | ir.Value:
        """The length of `value`'s dim `axis` in this inference: its static size, or for a
        run-time dim its Extent over the dims vector (an i64 the kernel computes at entry; the
        numerator of a strided length is never negative inside the bounds, so sdiv floors)."""
        extent = None if value.extents is None else value.extents[axis]
        if extent is None:
            return int(value.shape[axis])
        kb = self.kb
        total: int | ir.Value = extent.const
        for slot, coeff in extent.terms:
            total = kb.add(total, kb.mul(kb.b.load(kb.b.gep(self.dims, [kb.i64(slot)], source_etype=I64), typ=I64),
                                         coeff))
        return total if extent.div == 1 else kb.b.sdiv(total, kb.i64(extent.div))

    def extents(self, value: Value) -> tuple[int | ir.Value, ...]:
        """Every dim's length in this inference (see extent)."""
        return tuple(self.extent(value, axis) for axis in range(len(value.shape)))

    def thread_scratch(self, offset: int, per_thread: int, dtype: np.dtype) -> ir.Value:
        """This thread's slice of scratch: elements [offset + tid*per_thread, ... + per_thread)."""
        b = self.kb.b
        itemsize = np.dtype(dtype).itemsize
        start = b.add(self.kb.i64(offset * itemsize), b.mul(self.threads.tid, self.kb.i64(per_thread * itemsize)))
        return b.gep(self.scratch, [start], source_etype=ir.IntType(8))

    def width(self, dtype: np.dtype) -> int:
        """Vector lanes of the target for `dtype`."""
        return self.target.lanes(np.dtype(dtype).itemsize)
