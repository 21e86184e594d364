"""Sliding windows on the GPU (pools, depthwise convolution): which taps of a window fall
inside the input.

A thread's window starts at `start` (its output position times the stride, less the
leading pad) and has `k` taps `dilation` apart. Small windows are unrolled: each tap is a
compile-time constant, and whether it is inside the input is one unsigned compare (a
negative position reads as a huge one). A tap outside is loaded from a safe address (the
plane's first element) and replaced by the identity, so no thread branches around a
load. Big windows loop over their valid taps [lo, hi) instead, computed once per
window. Which a kernel does is its plan's choice (hobbit.plan.gpu.pool)."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hobbit.emit.builder import I64, KernelBuilder

def tap_position(kb: KernelBuilder, start: ir.Value, tap: int, dilation: int) -> ir.Value:
    return kb.b.add(start, kb.i64(tap * dilation))


def inside(kb: KernelBuilder, position: ir.Value, size: int) -> ir.Value:
    """0 <= position < size, as one unsigned compare."""
    return kb.b.icmp_unsigned("<", position, kb.i64(size))


def _clamp(kb: KernelBuilder, v: ir.Value, lo: int, hi: int) -> ir.Value:
    v = kb.b.select(kb.b.icmp_signed(">", v, kb.i64(lo)), v, kb.i64(lo))
    return kb.b.select(kb.b.icmp_signed("<", v, kb.i64(hi)), v, kb.i64(hi))


def taps_below(kb: KernelBuilder, start: ir.Value, limit: int, k: int, dilation: int) -> ir.Value:
    """How many of the window's taps lie before position `limit`:
    min(k, ceil(max(0, limit - start) / dilation))."""
    n = _clamp(kb, kb.b.sub(kb.i64(limit), start), 0, k * dilation)
    if dilation > 1:
        n = kb.b.udiv(kb.b.add(n, kb.i64(dilation - 1)), kb.i64(dilation))
    return n


def valid_taps(kb: KernelBuilder, start: ir.Value, size: int, k: int, dilation: int) -> tuple[ir.Value, ir.Value]:
    """[lo, hi): the taps of the window that read the input (lo >= hi when none does)."""
    return taps_below(kb, start, 0, k, dilation), taps_below(kb, start, size, k, dilation)


def fold(kb: KernelBuilder, start: ir.Value, stop: ir.Value, init: ir.Value,
         step: Callable[[ir.Value, ir.Value], ir.Value], name: str = "tap") -> ir.Value:
    """acc = init; for i in range(start, stop): acc = step(i, acc); the final acc.

    The accumulator is a loop phi, not a stack variable: a GPU kernel's stack lives in
    a private address space of its own on AMDGPU (5), which KernelBuilder's allocas
    are not in."""
    b = kb.b
    entry = b.block
    head, body, done = kb.blocks(name, "head", "body", "end")
    kb.enter(head)
    i = b.phi(I64, name=name)
    acc = b.phi(init.type, name=f"{name}.acc")
    i.add_incoming(start, entry)
    acc.add_incoming(init, entry)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    new = step(i, acc)
    i.add_incoming(b.add(i, kb.i64(1)), b.block)
    acc.add_incoming(new, b.block)
    b.branch(head)
    b.position_at_end(done)
    return acc
