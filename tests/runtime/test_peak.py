"""The measured FMA peak: plausible numbers, the right vector instructions, cached per process.

Bounds are loose on purpose: the tests share the machine with other work, so
only "a real, finite throughput a CPU core could reach" is checked."""

from __future__ import annotations

import math

import llvmlite.binding as llvm
import pytest

from hobbit.target import host_target
from hobbit.codegen.machine import target_machine
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


def test_threads_must_be_positive():
    with pytest.raises(HobbitError, match="at least 1"):
        peak.fma_peak_gflops(0)
