"""Per-kernel timing built into the entry point (compile(..., profile=True)).

Each kernel call is bracketed by clock_gettime(CLOCK_MONOTONIC) and the elapsed
nanoseconds are added to its slot of the global array `hobbit_profile`, which
the runtime reads back. The measurement is in the generated code, so no Python
runs between kernels and the timings sum to the inference time."""

from __future__ import annotations

from llvmlite import ir

from hobbit.backend.cpu.symbols import PROFILE_GLOBAL
from hobbit.emit.builder import I64, PTR

_CLOCK_MONOTONIC = 1


class KernelTimer:
    def __init__(self, module: ir.Module, builder: ir.IRBuilder, kernels: int):
        self.b = builder
        self.counters = ir.GlobalVariable(module, ir.ArrayType(I64, kernels), name=PROFILE_GLOBAL)
        self.counters.initializer = ir.Constant(ir.ArrayType(I64, kernels), None)
        i32 = ir.IntType(32)
        self.clock = ir.Function(module, ir.FunctionType(i32, [i32, PTR]), name="clock_gettime")
        self.timespec = builder.alloca(I64, size=2, name="timespec")

    def now(self) -> ir.Value:
        b = self.b
        b.call(self.clock, [ir.Constant(ir.IntType(32), _CLOCK_MONOTONIC), self.timespec])
        sec = b.load(self.timespec, typ=I64)
        nsec = b.load(b.gep(self.timespec, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    def add(self, index: int, start: ir.Value) -> None:
        b = self.b
        base = b.bitcast(self.counters, ir.PointerType(I64))
        slot = b.gep(base, [ir.Constant(I64, index)], source_etype=I64)
        b.store(b.add(b.load(slot, typ=I64), b.sub(self.now(), start)), slot)
