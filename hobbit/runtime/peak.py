"""This machine's peak of each GEMM micro-instruction, measured rather than looked up: float32
FMA, and where the CPU has them vdpbf16ps (bf16 pairs, AVX512-BF16) and vpdpbusd (int8
quads, AVX512-VNNI), the micro-instructions of hobbit.plan.format's Formats.

`hobbit bench` reports hobbit's GFLOP/s as a share of what the cores can do; a bf16 or int8
kernel's share is of its own instruction's peak (2 flops per multiply-add in every case).
Clock speeds, turbo behaviour and the number of FMA pipes differ between CPUs
(and a virtual machine rarely says which it runs on), so the peak comes from a
JIT-compiled loop of independent vector instructions (FMAs, or dot products) for the host
target: enough accumulator chains to hide the latency on every pipe, nothing else in the
loop body. Several threads run it at once for a multi-core peak (ctypes
releases the GIL during the call). Results are cached per process and instruction.

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
from hobbit.backend.cpu.dpbf16 import DPBF16PS, LANES, PAIRS
from hobbit.backend.machine import new_target_machine
from hobbit.errors import HobbitError
from hobbit.plan.format import BF16, FP32

_NAME = "hobbit_peak"
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
    """Throughput of one instruction on some threads together, GFLOP/s (GOP/s for integers): the
    best trial (the peak) and the median trial (how much of it this machine gave while measured)."""

    best: float
    median: float
    trials: int


@dataclass(frozen=True)
class Instruction:
    """A GEMM micro-instruction whose peak can be measured: the CPU feature it needs (None:
    every vector target), the LLVM intrinsic, the accumulator's element and its operands'
    vector (None: the accumulator's), and the flops one instruction does per accumulator lane
    (2 per multiply-add)."""

    name: str
    feature: str | None
    intrinsic: str
    flops_per_lane: int


FMA = FP32.micro
INSTRUCTIONS = {
    FMA: Instruction(FMA, None, "llvm.fma", 2),
    BF16.micro: Instruction(BF16.micro, "avx512bf16", DPBF16PS, 4),  # 2 bf16 pairs per float32 lane
    "vpdpbusd": Instruction("vpdpbusd", "avx512vnni", "llvm.x86.avx512.vpdpbusd.512", 8),  # 4 byte pairs per i32
}
# What each instruction's peak is the peak of, for the reports.
PRECISION_OF = {FMA: "fp32", BF16.micro: "bf16", "vpdpbusd": "int8"}


def _chains(target: Target) -> int:
    """Independent accumulators: latency (~4) x pipes (2) with margin, leaving registers for a and b."""
    return max(8, min(16, target.vector_registers - 4))


def missing(instruction: str, target: Target | None = None) -> str | None:
    """Why the peak of `instruction` cannot be measured on `target` (default: this host), or None."""
    target = target or host_target()
    what = INSTRUCTIONS[instruction]
    if what.feature is None:
        return None
    if what.feature not in target.enabled or target.vector_bits != 512:
        return f"{target.cpu} has no 512-bit {instruction} ({what.feature})"
    return None


def _types(instruction: str, lanes: int) -> tuple[ir.VectorType, ir.Type]:
    """(accumulator vector, operand vector) of `instruction` at `lanes` accumulator lanes."""
    if instruction == FMA:
        vec = ir.VectorType(ir.FloatType(), lanes)
        return vec, vec
    if instruction == BF16.micro:
        return ir.VectorType(ir.FloatType(), LANES), PAIRS
    words = ir.VectorType(ir.IntType(32), LANES)
    return words, words


def _build_ir(target: Target, lanes: int, chains: int, instruction: str = FMA) -> str:
    """void hobbit_peak(i64 iters, float* io): io holds the accumulators' start and the two
    operands (one vector each), gets the sum of the chains back in its first vector."""
    acc_type, operand = _types(instruction, lanes)
    floating = isinstance(acc_type.element, ir.FloatType)
    i64 = ir.IntType(64)
    module = ir.Module(name="peak")
    module.triple = target.triple
    name = INSTRUCTIONS[instruction].intrinsic + (f".v{lanes}f32" if instruction == FMA else "")
    step = ir.Function(module, ir.FunctionType(acc_type, [acc_type, operand, operand]), name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, ir.FloatType().as_pointer()]), name=_NAME)
    iters, io = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")

    b = ir.IRBuilder(entry)
    acc_ptr = b.bitcast(io, acc_type.as_pointer())
    operands = b.bitcast(b.gep(io, [ir.Constant(i64, lanes)]), operand.as_pointer())
    va = b.load(operands, align=4)
    vb = b.load(b.gep(operands, [ir.Constant(i64, 1)]), align=4)
    start = b.load(acc_ptr, align=4)
    # Distinct starting values, so LLVM cannot merge chains that would otherwise be identical.
    add = b.fadd if floating else b.add
    starts = [add(start, ir.Constant(acc_type, [float(i) if floating else i] * acc_type.count))
              for i in range(chains)]
    b.branch(loop)

    b = ir.IRBuilder(loop)
    counter = b.phi(i64)
    accs = [b.phi(acc_type) for _ in range(chains)]
    nexts = [b.call(step, [acc, va, vb]) for acc in accs]
    count = b.add(counter, ir.Constant(i64, 1))
    b.cbranch(b.icmp_signed("<", count, iters), loop, done)
    counter.add_incoming(ir.Constant(i64, 0), entry)
    counter.add_incoming(count, loop)
    for acc, first, nxt in zip(accs, starts, nexts):
        acc.add_incoming(first, entry)
        acc.add_incoming(nxt, loop)

    b = ir.IRBuilder(done)
    total = nexts[0]
    for nxt in nexts[1:]:
        total = (b.fadd if floating else b.add)(total, nxt)
    b.store(total, acc_ptr, align=4)
    b.ret_void()
    return str(module)


class _Kernel:
    """The JIT-compiled loop of one instruction; flops_per_iter counts 2 per multiply-add."""

    def __init__(self, target: Target, instruction: str = FMA):
        lanes = target.lanes(4)
        chains = _chains(target)
        self.flops_per_iter = INSTRUCTIONS[instruction].flops_per_lane * lanes * chains
        self.lanes = lanes
        self.instruction = instruction
        mod = llvm.parse_assembly(_build_ir(target, lanes, chains, instruction))
        mod.verify()
        self._engine = llvm.create_mcjit_compiler(mod, new_target_machine(target, jit=True))
        self._engine.finalize_object()
        self._fn = _FUNC_TYPE(self._engine.get_function_address(_NAME))

    def call(self, iters: int) -> float:
        """Run `iters` loop iterations; returns the elapsed seconds."""
        # FMA: acc <- acc * 0.5 + 1 converges to 2: no overflow, no denormals. The dot products
        # multiply zeros: the accumulators keep their start (integers wrap, floats stay normal).
        io = np.zeros(3 * self.lanes, np.float32)
        if self.instruction == FMA:
            io[self.lanes: 2 * self.lanes], io[2 * self.lanes:] = 0.5, 1.0
        t0 = time.perf_counter()
        self._fn(iters, io.ctypes.data)
        return time.perf_counter() - t0


@cache
def _kernel(instruction: str = FMA) -> _Kernel:
    return _Kernel(host_target(), instruction)


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
def instruction_peak(instruction: str, threads: int = 1) -> Peak | None:
    """Measured throughput of `instruction` (INSTRUCTIONS) on `threads` threads together, or None
    where this host lacks it (missing() says why): _TRIALS short trials spread over under two
    seconds, each on pinned threads, the CPUs rotated between trials."""
    if threads < 1:
        raise HobbitError(f"threads must be at least 1, got {threads}")
    if instruction not in INSTRUCTIONS:
        raise HobbitError(f"no peak for {instruction!r}; known: {', '.join(INSTRUCTIONS)}")
    if missing(instruction) is not None:
        return None
    kernel = _kernel(instruction)
    iters = _calibrate(kernel)
    rates = []
    for trial in range(_TRIALS):
        if trial:
            time.sleep(_PAUSE_SECONDS)
        rates.append(threads * iters * kernel.flops_per_iter / _round(kernel, iters, threads, trial) / 1e9)
    return Peak(max(rates), float(np.median(rates)), _TRIALS)


@cache
def fma_peak(threads: int = 1) -> Peak:
    """Measured float32 FMA throughput of `threads` threads together (instruction_peak)."""
    return instruction_peak.__wrapped__(FMA, threads)


def fma_peak_gflops(threads: int = 1) -> float:
    """The float32 FMA peak of `threads` threads together, in GFLOP/s: fma_peak's best trial."""
    return fma_peak(threads).best
