"""Work sharing inside a kernel.

A kernel that wants threads asks `Threads.split(units)` for this thread's share
[lo, hi) of a loop; codegen then runs it inside one OpenMP parallel region
(libgomp's GOMP_parallel, a standard runtime) with the thread id and count as
the kernel's last two parameters. Kernels that never split run on the calling
thread. With one thread everything folds to plain constant bounds.

`Threads.bands` (bands of rows of static heights) and `Threads.runs` (runs of a
loop) share work through atomic claim counters, a few zeroed cache lines per
kernel in the arena (`claim_bytes`): each thread first claims the pieces of its
own static share, in order, then the rest of the others', so on a quiet machine
every thread works on the same data as in the kernel before (it is in its own
cache) and when the host slows one core the other takes over its remaining work
instead of waiting at the barrier."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.lower.builder import I64, KernelBuilder

BandBody = Callable[[int | ir.Value, int | ir.Value, int], None]  # (image, first row, rows)
RunBody = Callable[[int | ir.Value, int | ir.Value], None]  # (first, end)


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


CLAIM_STRIDE = 64  # bytes between a kernel's claim counters: one cache line each
CLAIMED_LOOPS = 3  # claimed loops (bands or runs) a kernel may hold: a Winograd conv's three phases
RUNS_PER_THREAD = 8  # Threads.runs: a slowed thread's last run is small, claims stay few


def claim_bytes(threads: int) -> int:
    """Bytes of zeroed counters a kernel may use: one line per share of each claimed loop."""
    return CLAIM_STRIDE * threads * CLAIMED_LOOPS if threads > 1 else 0


class Threads:
    def __init__(self, kb: KernelBuilder, tid: ir.Value, count: ir.Value, max_threads: int,
                 claims: ir.Value | None = None):
        """`claims`: this kernel's claim_bytes(max_threads) of counters, zero at entry."""
        self.kb = kb
        self.tid = tid
        self.count = count
        self.max_threads = max_threads
        self.claims = claims
        self.used = False
        self._lines = 0  # claim counter lines handed out so far

    def alone(self) -> "Threads":
        """A team of this thread only: for work inside a job it has claimed."""
        return Threads(self.kb, self.kb.i64(0), self.kb.i64(1), 1)

    def _counters(self, lines: int) -> ir.Value:
        """The next `lines` claim counters of this kernel (one cache line each)."""
        if self.claims is None or self._lines + lines > self.max_threads * CLAIMED_LOOPS:
            raise CodegenError("a kernel asked Threads for more claim counters than claim_bytes gives")
        at = self.kb.b.gep(self.claims, [self.kb.i64(self._lines * CLAIM_STRIDE)], source_etype=ir.IntType(8))
        self._lines += lines
        return at

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

    def bands(self, total: int, max_band: int, body: BandBody, images: int = 1) -> None:
        """body(image, first_row, rows) over `total` rows of each of `images` images: the rows
        are cut into one share per thread (balanced to within one row), each share into
        near-equal bands of at most `max_band` rows, whose heights are static (kernels
        specialise on shapes and size their scratch by band_heights).

        Each thread claims the bands of its own share, in order, from that share's counter,
        then helps with the others' (work stealing): on a quiet machine every thread does
        its own share, but when the host slows one core the other takes over its remaining
        bands instead of waiting at the barrier (and if the runtime starts fewer threads
        than max_threads, the present ones do all the shares)."""
        kb, b = self.kb, self.kb.b
        if self.max_threads == 1:
            with kb.loop(0, images, name="image") as image:
                _share_in_bands(kb, 0, total, max_band, lambda first, rows: body(image, first, rows))
            return
        self.used = True

        def share(lo: ir.Value, hi: ir.Value, counter: ir.Value) -> None:
            for size in _share_sizes(total, self.max_threads):
                with kb.if_then(b.icmp_unsigned("==", b.sub(hi, lo), kb.i64(size))):
                    count, small, big = _cut(size, max_band)
                    self._claim(counter, kb.i64(images * count),
                                lambda unit, count=count, small=small, big=big:
                                self._band(unit, lo, count, small, big, body))

        self._each_share(total, share)

    def _band(self, unit: ir.Value, lo: ir.Value, count: int, small: int, big: int, body: BandBody) -> None:
        """Band unit % count of the share starting at row lo, in image unit // count: the
        first `big` bands of a share are one row taller than `small`."""
        kb, b = self.kb, self.kb.b
        image, band = b.udiv(unit, kb.i64(count)), b.urem(unit, kb.i64(count))
        if not big:  # all bands of one height
            body(image, b.add(lo, b.mul(band, kb.i64(small))), small)
            return
        with b.if_else(b.icmp_unsigned("<", band, kb.i64(big))) as (tall, short):
            with tall:
                body(image, b.add(lo, b.mul(band, kb.i64(small + 1))), small + 1)
            with short:
                first = b.add(lo, b.add(kb.i64(big * (small + 1)), b.mul(b.sub(band, kb.i64(big)), kb.i64(small))))
                body(image, first, small)

    def runs(self, units: int, body: RunBody, per_thread: int = RUNS_PER_THREAD) -> None:
        """body(first, end) over `units` iterations: one share per thread (as split), each
        cut into `per_thread` runs (fewer for small shares) that are claimed as in bands.
        No barrier at the end: callers add one where the next step reads the results.

        The counters are never reset, so a call inside a loop needs no barrier between
        passes: every thread counts its own passes (all run the same ones), pass p's runs of
        a share are tickets p*R .. (p+1)*R - 1 of its counter, and a claim (_claim) never
        moves a counter past the end of the claiming thread's pass. A thread leaves pass p
        only once all its tickets are taken, so threads in neighbouring passes never take
        each other's runs."""
        kb, b = self.kb, self.kb.b
        if self.max_threads == 1:
            body(0, units)
            return
        self.used = True
        count = max(1, min(per_thread, units // self.max_threads))
        passes = kb.local(kb.i64(0))
        first = b.load(passes, typ=I64)
        end = b.add(first, kb.i64(count))
        b.store(end, passes)

        def share(lo: ir.Value, hi: ir.Value, counter: ir.Value) -> None:
            size = b.sub(hi, lo)

            def run(ticket: ir.Value) -> None:
                r = b.sub(ticket, first)
                body(b.add(lo, b.udiv(b.mul(r, size), kb.i64(count))),
                     b.add(lo, b.udiv(b.mul(b.add(r, kb.i64(1)), size), kb.i64(count))))

            self._claim(counter, end, run)

        self._each_share(units, share)

    def _each_share(self, total: int, body: Callable[[ir.Value, ir.Value, ir.Value], None]) -> None:
        """body(lo, hi, counter) for every thread's share [lo, hi) of `total` (as split) and
        its claim counter (the next claimed loop's lines): this thread's own share first,
        then the others'."""
        kb, b = self.kb, self.kb.b
        most = self.max_threads
        claims = self._counters(most)
        with kb.loop(0, most, name="share") as j:
            v = b.urem(b.add(self.tid, kb.idx(j)), kb.i64(most))
            lo = b.udiv(b.mul(v, kb.i64(total)), kb.i64(most))
            hi = b.udiv(b.mul(b.add(v, kb.i64(1)), kb.i64(total)), kb.i64(most))
            body(lo, hi, b.gep(claims, [b.mul(v, kb.i64(CLAIM_STRIDE))], source_etype=ir.IntType(8)))

    def _claim(self, counter: ir.Value, end: ir.Value, body: Callable[[ir.Value], None]) -> None:
        """body(ticket) for every ticket this thread takes from `counter` while it is below
        `end`. A claim is a compare-and-swap, so the counter never moves past `end`."""
        kb, b = self.kb, self.kb.b
        head = kb.fn.append_basic_block("claim.next")
        claim = kb.fn.append_basic_block("claim.take")
        work = kb.fn.append_basic_block("claim.body")
        done = kb.fn.append_basic_block("claim.end")
        b.branch(head)
        b.position_at_end(head)
        ticket = b.load_atomic(counter, "monotonic", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("<", ticket, end), claim, done)
        b.position_at_end(claim)
        taken = b.extract_value(b.cmpxchg(counter, ticket, b.add(ticket, kb.i64(1)), "monotonic", "monotonic"), 1)
        b.cbranch(taken, work, head)
        b.position_at_end(work)
        body(ticket)
        b.branch(head)
        b.position_at_end(done)

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
