"""This machine's float32 FMA peak, measured rather than looked up.

`hobbit bench` reports hobbit's GFLOP/s as a share of what the cores can do.
Clock speeds, turbo behaviour and the number of FMA pipes differ between CPUs
(and a virtual machine rarely says which it runs on), so the peak comes from a
JIT-compiled loop of independent vector FMAs for the host target: enough
accumulator chains to hide the FMA latency on every pipe, nothing else in the
loop body. Several threads run it at once for a multi-core peak (ctypes
releases the GIL during the call). Results are cached per process.

One long measurement is at the mercy of whatever else the machine runs: two runs on one
2-core machine once measured 117 and 63 GFLOP/s. So the peak is the best of many short
trials spread over under two seconds, each thread pinned to its own CPU for a trial and the
CPUs rotated between trials. Other work, an SMT sibling or a clock drop can only slow a
trial down, never speed it up, so the fastest trial is the closest to what the hardware
does; a trial shorter than a scheduler time slice often runs undisturbed even on a busy
machine; rotating the CPUs finds the idle one. The median of the trials is kept beside it:
far below the best, it says how busy the machine was."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from hobbit.target import Target, host_target
from hobbit.backend.machine import new_target_machine
from hobbit.errors import HobbitError

_NAME = "hobbit_fma_peak"
_FUNC_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
# Wall time one trial aims for: a few ms, under a busy Linux machine's time slice, and long
# next to the microseconds of starting the timers.
_CALL_SECONDS = 0.002
# Trials, and the pause after each: about 1.7 s in all, so that a burst of other work (the
# host can take a core for a few hundred ms) cannot cover every trial. With 40 trials over
# one second, one of four measurements on a 2-core machine at load average 7 found no quiet
# trial (44 GFLOP/s against 114 in the three others).
_TRIALS = 100
_PAUSE_SECONDS = 0.015


@dataclass(frozen=True)
class Peak:
    """float32 FMA throughput of some threads together, GFLOP/s: the best trial (the peak) and
    the median trial (how much of it this machine gave while measured)."""

    best: float
    median: float
    trials: int


def _chains(target: Target) -> int:
    """Independent accumulators: latency (~4) x pipes (2) with margin, leaving registers for a and b."""
    return max(8, min(16, target.vector_registers - 4))


def _build_ir(target: Target, lanes: int, chains: int) -> str:
    """void hobbit_fma_peak(i64 iters, float* io): io holds a, b (one vector each), gets the sum back."""
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, lanes)
    i64 = ir.IntType(64)
    module = ir.Module(name="fma_peak")
    module.triple = target.triple
    fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.v{lanes}f32")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, f32.as_pointer()]), name=_NAME)
    iters, io = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")

    b = ir.IRBuilder(entry)
    vptr = b.bitcast(io, vec.as_pointer())
    va = b.load(vptr, align=4)
    vb = b.load(b.gep(vptr, [ir.Constant(i64, 1)]), align=4)
    # Distinct starting values, so LLVM cannot merge chains that would otherwise be identical.
    starts = [b.fadd(va, ir.Constant(vec, [float(i)] * lanes)) for i in range(chains)]
    b.branch(loop)

    b = ir.IRBuilder(loop)
    counter = b.phi(i64)
    accs = [b.phi(vec) for _ in range(chains)]
    nexts = [b.call(fma, [acc, va, vb]) for acc in accs]
    step = b.add(counter, ir.Constant(i64, 1))
    b.cbranch(b.icmp_signed("<", step, iters), loop, done)
    counter.add_incoming(ir.Constant(i64, 0), entry)
    counter.add_incoming(step, loop)
    for acc, start, nxt in zip(accs, starts, nexts):
        acc.add_incoming(start, entry)
        acc.add_incoming(nxt, loop)

    b = ir.IRBuilder(done)
    total = nexts[0]
    for nxt in nexts[1:]:
        total = b.fadd(total, nxt)
    b.store(total, vptr, align=4)
    b.ret_void()
    return str(module)


class _Kernel:
    """The JIT-compiled FMA loop; flops_per_iter counts 2 per FMA lane."""

    def __init__(self, target: Target):
        lanes = target.lanes(4)
        chains = _chains(target)
        self.flops_per_iter = 2 * lanes * chains
        self.lanes = lanes
        mod = llvm.parse_assembly(_build_ir(target, lanes, chains))
        mod.verify()
        self._engine = llvm.create_mcjit_compiler(mod, new_target_machine(target, jit=True))
        self._engine.finalize_object()
        self._fn = _FUNC_TYPE(self._engine.get_function_address(_NAME))

    def call(self, iters: int) -> float:
        """Run `iters` loop iterations; returns the elapsed seconds."""
        # acc <- acc * 0.5 + 1 converges to 2: no overflow, no denormals.
        io = np.empty(2 * self.lanes, np.float32)
        io[: self.lanes], io[self.lanes:] = 0.5, 1.0
        t0 = time.perf_counter()
        self._fn(iters, io.ctypes.data)
        return time.perf_counter() - t0


@cache
def _kernel() -> _Kernel:
    return _Kernel(host_target())


def _calibrate(kernel: _Kernel) -> int:
    """Iterations that make one call last about _CALL_SECONDS."""
    iters = 10_000
    while True:
        seconds = kernel.call(iters)
        if seconds >= _CALL_SECONDS / 4 or iters >= 1 << 40:
            return max(1, int(iters * _CALL_SECONDS / max(seconds, 1e-9)))
        iters *= 4


def _cpus() -> list[int]:
    """The CPUs this process may run on, in order; [] where the OS cannot pin threads."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []


def _round(kernel: _Kernel, iters: int, threads: int, first_cpu: int = 0) -> float:
    """Wall seconds for `threads` concurrent calls started together, thread i pinned to the
    process's CPU number first_cpu + i (modulo their count)."""
    barrier = threading.Barrier(threads)
    spans: list[tuple[float, float]] = []
    cpus = _cpus()

    def worker(index: int) -> None:
        if cpus:
            os.sched_setaffinity(0, {cpus[(first_cpu + index) % len(cpus)]})  # this thread only
        barrier.wait()
        start = time.perf_counter()
        kernel.call(iters)
        spans.append((start, time.perf_counter()))

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return max(end for _, end in spans) - min(start for start, _ in spans)


@cache
def fma_peak(threads: int = 1) -> Peak:
    """Measured float32 FMA throughput of `threads` threads together: _TRIALS short trials
    spread over under two seconds, each on pinned threads, the CPUs rotated between trials."""
    if threads < 1:
        raise HobbitError(f"threads must be at least 1, got {threads}")
    kernel = _kernel()
    iters = _calibrate(kernel)
    rates = []
    for trial in range(_TRIALS):
        if trial:
            time.sleep(_PAUSE_SECONDS)
        rates.append(threads * iters * kernel.flops_per_iter / _round(kernel, iters, threads, trial) / 1e9)
    return Peak(max(rates), float(np.median(rates)), _TRIALS)


def fma_peak_gflops(threads: int = 1) -> float:
    """The float32 FMA peak of `threads` threads together, in GFLOP/s: fma_peak's best trial."""
    return fma_peak(threads).best
