"""Work sharing inside a kernel.

A kernel that wants threads asks `Threads.split(units)` for this thread's share
[lo, hi) of a loop; codegen then runs it inside one OpenMP parallel region
(libgomp's GOMP_parallel, a standard runtime) with the thread id and count as
the kernel's last two parameters. Kernels that never split run on the calling
thread. With one thread everything folds to plain constant bounds."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hobbit.lower.builder import I64, KernelBuilder

BandBody = Callable[[int | ir.Value, int], None]


def band_heights(total: int, max_band: int, threads: int) -> list[int]:
    """The band heights Threads.bands hands out (all static), for sizing scratch and packing."""
    heights = set()
    for share in _share_sizes(total, threads):
        count, small, big = _cut(share, max_band)
        heights |= ({small + 1} if big else set()) | ({small} if count > big else set())
    return sorted(heights)


def _share_sizes(total: int, threads: int) -> list[int]:
    """The sizes of split's shares of `total` among `threads` (two at most, none empty)."""
    return sorted({total // threads, -(-total // threads)} - {0})


def _cut(share: int, max_band: int) -> tuple[int, int, int]:
    """(bands, height, taller): a share in bands of at most max_band rows, the first
    `taller` of them one row taller than `height`."""
    count = -(-share // max_band)
    small, big = divmod(share, count)
    return count, small, big


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

    def bands(self, total: int, max_band: int, body: BandBody) -> None:
        """Share `total` rows as split does, and hand each thread's share to
        body(first_row, rows) in near-equal bands of at most `max_band` rows.

        Heights are static (kernels specialise on shapes) and every thread's work differs
        by at most one row: cutting the whole range into equal bands first and dealing
        them out left one thread a band more, or a short last band less, than the other
        (14 tile rows in bands of 4: 8 rows against 6). Should the runtime start fewer
        threads than max_threads, thread t also takes shares t + count, t + 2*count..."""
        if self.max_threads == 1:
            _share_in_bands(self.kb, 0, total, max_band, body)
            return
        self.used = True
        kb, b = self.kb, self.kb.b
        most = self.max_threads
        shares = _share_sizes(total, most)
        with kb.loop(0, most, name="share") as v:
            with kb.if_then(b.icmp_unsigned("==", b.urem(v, self.count), self.tid)):
                lo = b.udiv(b.mul(v, kb.i64(total)), kb.i64(most))
                hi = b.udiv(b.mul(b.add(v, kb.i64(1)), kb.i64(total)), kb.i64(most))
                for share in shares:
                    with kb.if_then(b.icmp_unsigned("==", b.sub(hi, lo), kb.i64(share))):
                        _share_in_bands(kb, lo, share, max_band, body)

    def is_last(self) -> ir.Value:
        return self.kb.b.icmp_unsigned("==", self.kb.b.add(self.tid, ir.Constant(I64, 1)), self.count)

    def barrier(self) -> None:
        """All threads of the region wait here (e.g. between im2col and the GEMM reading it)."""
        if self.max_threads == 1:
            return
        self.kb.call_intrinsic("GOMP_barrier", ir.VoidType(), [])


def _share_in_bands(kb: KernelBuilder, first: int | ir.Value, share: int, max_band: int, body: BandBody) -> None:
    """body over rows first .. first + share in ceil(share / max_band) bands whose heights
    differ by at most one (the taller ones first)."""
    count, small, big = _cut(share, max_band)
    if big:
        with kb.loop(0, big, name="band") as i:
            body(kb.add(first, kb.mul(i, small + 1)), small + 1)
    if count > big:
        with kb.loop(0, count - big, name="band") as i:
            body(kb.add(first, kb.add(big * (small + 1), kb.mul(i, small))), small)
