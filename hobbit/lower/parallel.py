"""Work sharing inside a kernel.

A kernel that wants threads asks `Threads.split(units)` for this thread's share
[lo, hi) of a loop; codegen then runs it inside one OpenMP parallel region
(libgomp's GOMP_parallel, a standard runtime) with the thread id and count as
the kernel's last two parameters. Kernels that never split run on the calling
thread. With one thread everything folds to plain constant bounds."""

from __future__ import annotations

from llvmlite import ir

from hobbit.lower.builder import I64, KernelBuilder


class Threads:
    def __init__(self, kb: KernelBuilder, tid: ir.Value, count: ir.Value, max_threads: int):
        self.kb = kb
        self.tid = tid
        self.count = count
        self.max_threads = max_threads
        self.used = False

    def split(self, units: int) -> tuple[int | ir.Value, int | ir.Value]:
        """This thread's contiguous share of `units` iterations (balanced to within one)."""
        if self.max_threads == 1 or units <= 1:
            return 0, units
        self.used = True
        b = self.kb.b
        total = ir.Constant(I64, units)
        lo = b.udiv(b.mul(self.tid, total), self.count)
        hi = b.udiv(b.mul(b.add(self.tid, ir.Constant(I64, 1)), total), self.count)
        return lo, hi

    def is_last(self) -> ir.Value:
        return self.kb.b.icmp_unsigned("==", self.kb.b.add(self.tid, ir.Constant(I64, 1)), self.count)

    def barrier(self) -> None:
        """All threads of the region wait here (e.g. between im2col and the GEMM reading it)."""
        if self.max_threads == 1:
            return
        self.kb.call_intrinsic("GOMP_barrier", ir.VoidType(), [])
