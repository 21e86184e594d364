"""The measured FMA peak: plausible numbers, the right vector instructions, cached per process,
the best of short trials on pinned threads.

Bounds are loose on purpose: the tests share the machine with other work, so
only "a real, finite throughput a CPU core could reach" is checked."""

from __future__ import annotations

import math
import os
import threading
import time

import llvmlite.binding as llvm
import pytest

from hobbit.target import host_target, parse_target
from hobbit.backend.machine import target_machine
from hobbit.errors import HobbitError
from hobbit.runtime import peak


def test_peak_is_plausible_and_cached():
    one = peak.fma_peak_gflops(1)
    # A core does at most 2 FMA pipes x 16 lanes x 2 flops per cycle; 6 GHz bounds the clock.
    assert math.isfinite(one) and 1.0 < one < 2 * 16 * 2 * 6.0
    two = peak.fma_peak_gflops(2)
    assert math.isfinite(two) and 1.0 < two < 2 * (2 * 16 * 2 * 6.0)
    assert peak.fma_peak_gflops(1) == one


def test_loop_uses_vector_fmas_at_the_target_width():
    target = host_target()
    lanes = target.lanes(4)
    text = peak._build_ir(target, lanes, peak._chains(target))
    assert f"llvm.fma.v{lanes}f32" in text
    asm = target_machine(target).emit_assembly(llvm.parse_assembly(text))
    fmas = [line for line in asm.splitlines() if "vfmadd" in line or "vfmla" in line or "fmla" in line]
    assert len(fmas) >= peak._chains(target)
    if target.vector_bits == 512:
        assert all("zmm" in line for line in fmas)


@pytest.mark.parametrize("instruction, mnemonic", [("vdpbf16ps", "vdpbf16ps"), ("vpdpbusd", "vpdpbusd")])
def test_dot_product_peaks_run_their_instruction_where_the_host_has_it(instruction, mnemonic):
    """vdpbf16ps (bf16) and vpdpbusd (int8): one zmm instruction per chain in the loop, and a peak
    above the FMA's per lane where measured (4 and 8 flops per lane against 2); None without the feature."""
    target = host_target()
    why = peak.missing(instruction)
    if why is not None:
        assert instruction in why and peak.instruction_peak(instruction) is None
        pytest.skip(why)
    text = peak._build_ir(target, target.lanes(4), peak._chains(target), instruction)
    asm = target_machine(target).emit_assembly(llvm.parse_assembly(text))
    steps = [line for line in asm.splitlines() if mnemonic in line]
    assert len(steps) >= peak._chains(target) and all("zmm" in line for line in steps)
    found = peak.instruction_peak(instruction, 1)
    flops_per_lane = peak.INSTRUCTIONS[instruction].flops_per_lane
    # A core issues at most 2 such instructions per cycle at up to 6 GHz.
    assert 1.0 < found.best < 2 * 16 * flops_per_lane * 6.0 and found.median <= found.best


def test_a_missing_feature_is_named_not_measured():
    bare = parse_target("x86_64-unknown-linux-gnu:x86-64-v3")
    assert "avx512bf16" in peak.missing("vdpbf16ps", bare) and "avx512vnni" in peak.missing("vpdpbusd", bare)
    assert peak.missing("fma", bare) is None


def test_threads_must_be_positive():
    with pytest.raises(HobbitError, match="at least 1"):
        peak.fma_peak_gflops(0)


class _SlowKernel:
    """Stands in for the FMA loop: each call sleeps (2 ms in one trial of four, 6 ms in the others, as
    other work would slow it) and records the CPUs its thread may run on."""

    flops_per_iter = 1000

    def __init__(self, threads: int):
        self.threads = threads
        self.calls: list[set[int]] = []
        self.lock = threading.Lock()

    def call(self, iters: int) -> float:
        with self.lock:
            self.calls.append(os.sched_getaffinity(0))
            trial = (len(self.calls) - 1) // self.threads
        time.sleep(0.002 if trial % 4 == 1 else 0.006)
        return 0.0


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
@pytest.mark.parametrize("threads", [1, 2])
def test_peak_is_the_best_of_many_short_trials_on_pinned_rotating_cpus(monkeypatch, threads):
    """Other work only slows a trial down: the peak is the fastest trial, the median is kept
    beside it; each thread runs pinned to one CPU, its own within a trial, rotated between trials."""
    kernel = _SlowKernel(threads)
    monkeypatch.setattr(peak, "_kernel", lambda instruction=peak.FMA: kernel)
    monkeypatch.setattr(peak, "_calibrate", lambda k: 10**6)
    monkeypatch.setattr(peak, "_PAUSE_SECONDS", 0.0)
    found = peak.fma_peak.__wrapped__(threads)
    assert found.trials == peak._TRIALS == len(kernel.calls) // threads
    fastest = threads * 10**6 * 1000 / 0.002 / 1e9  # GFLOP/s of a 2 ms trial
    assert found.median < 0.5 * found.best and found.best <= fastest
    cpus = sorted(os.sched_getaffinity(0))
    assert all(len(allowed) == 1 for allowed in kernel.calls)
    assert {cpu for allowed in kernel.calls for cpu in allowed} == set(cpus)
    if threads == 2 and len(cpus) > 1:
        assert all(a != b for a, b in zip(kernel.calls[::2], kernel.calls[1::2]))
    assert os.sched_getaffinity(0) == set(cpus)  # the caller's own thread was never pinned
