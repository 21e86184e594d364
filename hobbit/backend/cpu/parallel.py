"""Work sharing inside a kernel, and the thread runtime's interface.

A kernel that wants threads asks `Threads.split(units)` for this thread's share
[lo, hi) of a loop, or shares its work in claimed pieces (`bands`, `runs`,
`shares`). Codegen (hobbit.backend.cpu.team) runs every kernel as one step of a
team walk: the kernel's function is called once per virtual thread id
0 .. threads-1 (its last two parameters), each id claimed by whichever thread
of the team gets to it first, so a thread the host has descheduled never holds
back the others unless it is in the middle of a piece of work. With one thread
everything folds to plain constant bounds.

`Threads.bands` (bands of rows of static heights), `Threads.runs` (runs of a
loop) and `Threads.shares` (one run per thread) share work through atomic claim
counters, a few zeroed cache lines per kernel in the arena (`claim_bytes`, in
hobbit.plan.arena, where memory planning reads it):
each thread first claims the pieces of its own static share, in order, then the
rest of the others', so on a quiet machine every thread works on the same data
as in the kernel before (it is in its own cache) and when the host slows one
core the other takes over its remaining work. Every claimed loop also counts its
finished pieces, so `Threads.sync` waits for the work to be done, not for the
other threads to arrive: the ids are claimed, so a wait on work another id has
not yet claimed could wait for ever, and sync refuses to follow a static split.

The runtime (hobbit.runtime.pool) implements RUNTIME_ABI: the team start, the
step protocol codegen uses between kernels, and the bounded-spin-then-sleep
wait kernels use in sync."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.plan.arena import CLAIM_STRIDE, CLAIMED_LOOPS
from hobbit.plan.bands import cut, share_sizes

BandBody = Callable[[int | ir.Value, int | ir.Value, int], None]  # (image, first row, rows)
RunBody = Callable[[int | ir.Value, int | ir.Value], None]  # (first, end)

BOOL = ir.IntType(1)
VOID = ir.VoidType()

# The thread runtime's entry points (hobbit.runtime.pool defines them, generated code calls them):
RUNTIME_ABI: dict[str, tuple[ir.Type, tuple[ir.Type, ...]]] = {
    # (team function, its context, threads): run team(ctx, thread, job) on a team of up to
    # `threads` threads, the caller being thread 0; job 0 means the caller runs alone.
    "hobbit_team_run": (VOID, (PTR, PTR, I64)),
    "hobbit_team_enter": (BOOL, (I64,)),      # a worker takes a reference on job (false: job over)
    "hobbit_team_leave": (VOID, ()),          # ... and drops it
    "hobbit_team_step": (VOID, (I64, I64)),   # (job, steps): the first `steps` steps are done
    "hobbit_team_wait": (BOOL, (I64, I64)),   # wait for that (false: job over, for a late worker)
    "hobbit_wait_at_least": (VOID, (PTR, I64)),  # wait for an i64 counter to reach a value
    "hobbit_notify": (VOID, ()),              # wake the threads sleeping in a wait
}


def runtime_function(module: ir.Module, name: str) -> ir.Function:
    """The declaration of runtime entry point `name` in `module`."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    ret, args = RUNTIME_ABI[name]
    return ir.Function(module, ir.FunctionType(ret, list(args)), name=name)


RUNS_PER_THREAD = 8  # Threads.runs: a slowed thread's last run is small, claims stay few


@dataclass
class _Loop:
    """A claimed loop's counters: one line per share, then its count of finished pieces; and
    the count this thread has passed (a variable: a loop inside a loop passes it several times)."""

    shares: ir.Value
    done: ir.Value
    target: ir.Value


class Threads:
    def __init__(self, kb: KernelBuilder, tid: ir.Value, count: ir.Value, max_threads: int,
                 claims: ir.Value | None = None):
        """`claims`: this kernel's claimed-loop counters (claim_bytes(max_threads) past its
        step state), zero at entry."""
        self.kb = kb
        self.tid = tid
        self.count = count
        self.max_threads = max_threads
        self.claims = claims
        self.used = False
        self._lines = 0  # claim counter lines handed out so far
        self._loops: list[_Loop] = []
        self._static = False  # split() was used: its shares are done only when every id has run

    def alone(self) -> "Threads":
        """A team of this thread only: for work inside a job it has claimed."""
        return Threads(self.kb, self.kb.i64(0), self.kb.i64(1), 1)

    def _counters(self, lines: int) -> ir.Value:
        """The next `lines` claim counters of this kernel (one cache line each)."""
        if self.claims is None or self._lines + lines > (self.max_threads + 1) * CLAIMED_LOOPS:
            raise CodegenError("a kernel asked Threads for more claim counters than claim_bytes gives")
        at = self.kb.b.gep(self.claims, [self.kb.i64(self._lines * CLAIM_STRIDE)], source_etype=ir.IntType(8))
        self._lines += lines
        return at

    def split(self, units: int | ir.Value) -> tuple[int | ir.Value, int | ir.Value]:
        """This thread's contiguous share of `units` iterations (balanced to within one);
        `units` may be a run-time i64 (work per row of a bounded dim times its extent)."""
        if self.max_threads == 1 or (isinstance(units, int) and units <= 1):
            return 0, units
        self.used = True
        self._static = True
        b = self.kb.b
        total = ir.Constant(I64, units) if isinstance(units, int) else units
        lo = b.udiv(b.mul(self.tid, total), self.count)
        hi = b.udiv(b.mul(b.add(self.tid, ir.Constant(I64, 1)), total), self.count)
        return lo, hi

    def bands(self, total: int, max_band: int, body: BandBody, images: int = 1) -> None:
        """body(image, first_row, rows) over `total` rows of each of `images` images: the rows
        are cut into one share per thread (balanced to within one row), each share into
        near-equal bands of at most `max_band` rows, whose heights are static (kernels
        specialise on shapes and size their scratch by hobbit.plan.bands.band_heights).

        Each thread claims the bands of its own share, in order, from that share's counter,
        then helps with the others' (work stealing): on a quiet machine every thread does
        its own share, but when the host slows one core the other takes over its remaining
        bands (and if fewer threads than max_threads take part, the present ones do all the
        shares)."""
        kb, b = self.kb, self.kb.b
        if self.max_threads == 1:
            with kb.loop(0, images, name="image") as image:
                _share_in_bands(kb, 0, total, max_band, lambda first, rows: body(image, first, rows))
            return
        self.used = True
        most = self.max_threads
        pieces = images * sum(cut(hi - lo, max_band)[0] for lo, hi in _shares(total, most) if hi > lo)
        loop = self._loop(kb.i64(pieces))

        def share(lo: ir.Value, hi: ir.Value, counter: ir.Value) -> None:
            for size in share_sizes(total, most):
                with kb.if_then(b.icmp_unsigned("==", b.sub(hi, lo), kb.i64(size))):
                    count, small, big = cut(size, max_band)
                    self._claim(counter, kb.i64(images * count), loop,
                                lambda unit, count=count, small=small, big=big:
                                self._band(unit, lo, count, small, big, body))

        self._each_share(total, share, loop)

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

    def runs(self, units: int | ir.Value, body: RunBody, per_thread: int = RUNS_PER_THREAD) -> None:
        """body(first, end) over `units` iterations: one share per thread (as split), each
        cut into `per_thread` runs (fewer for small shares) that are claimed as in bands.
        No wait at the end: callers sync where the next step reads the results. `units` may
        be a run-time i64 (a GEMM's blocks of a run-time dim): every share is then cut into
        `per_thread` runs, the runs of a share smaller than that partly empty.

        The counters are never reset, so a call inside a loop needs no sync between
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
        count = max(1, min(per_thread, units // self.max_threads)) if isinstance(units, int) else per_thread
        passes = kb.local(kb.i64(0))
        first = b.load(passes, typ=I64)
        end = b.add(first, kb.i64(count))
        b.store(end, passes)
        loop = self._loop(b.mul(end, kb.i64(self.max_threads)))

        def share(lo: ir.Value, hi: ir.Value, counter: ir.Value) -> None:
            size = b.sub(hi, lo)

            def run(ticket: ir.Value) -> None:
                r = b.sub(ticket, first)
                body(b.add(lo, b.udiv(b.mul(r, size), kb.i64(count))),
                     b.add(lo, b.udiv(b.mul(b.add(r, kb.i64(1)), size), kb.i64(count))))

            self._claim(counter, end, loop, run)

        self._each_share(units, share, loop)

    def shares(self, units: int | ir.Value, body: RunBody) -> None:
        """body(lo, hi) over split's shares of `units`, each share claimed whole (own first):
        a static split that a sync may follow."""
        self.runs(units, body, per_thread=1)

    def _loop(self, pieces: ir.Value) -> _Loop:
        """A new claimed loop (the kernel's next counter lines) that has `pieces` pieces done
        once this thread's pass of it is over."""
        kb, b = self.kb, self.kb.b
        shares = self._counters(self.max_threads + 1)
        done = b.gep(shares, [kb.i64(self.max_threads * CLAIM_STRIDE)], source_etype=ir.IntType(8))
        target = kb.local(kb.i64(0))
        b.store(pieces, target)
        loop = _Loop(shares, done, target)
        self._loops.append(loop)
        return loop

    def _each_share(self, total: int | ir.Value, body: Callable[[ir.Value, ir.Value, ir.Value], None],
                    loop: _Loop) -> None:
        """body(lo, hi, counter) for every thread's share [lo, hi) of `total` (as split) and
        its claim counter in `loop`: this thread's own share first, then the others'."""
        kb, b = self.kb, self.kb.b
        most = self.max_threads
        with kb.loop(0, most, name="share") as j:
            v = b.urem(b.add(self.tid, kb.idx(j)), kb.i64(most))
            lo = b.udiv(b.mul(v, kb.idx(total)), kb.i64(most))
            hi = b.udiv(b.mul(b.add(v, kb.i64(1)), kb.idx(total)), kb.i64(most))
            body(lo, hi, b.gep(loop.shares, [b.mul(v, kb.i64(CLAIM_STRIDE))], source_etype=ir.IntType(8)))

    def _claim(self, counter: ir.Value, end: ir.Value, loop: _Loop, body: Callable[[ir.Value], None]) -> None:
        """body(ticket) for every ticket this thread takes from `counter` while it is below
        `end`. A claim is a compare-and-swap, so the counter never moves past `end`. After
        each piece the loop's done counter counts it; the piece that completes the pass
        wakes threads sleeping in sync."""
        kb, b = self.kb, self.kb.b
        head, claim, work, done = kb.blocks("claim", "next", "take", "body", "end")
        kb.enter(head)
        ticket = b.load_atomic(counter, "monotonic", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("<", ticket, end), claim, done)
        b.position_at_end(claim)
        taken = b.extract_value(b.cmpxchg(counter, ticket, b.add(ticket, kb.i64(1)), "monotonic", "monotonic"), 1)
        b.cbranch(taken, work, head)
        b.position_at_end(work)
        body(ticket)
        finished = b.add(b.atomic_rmw("add", loop.done, kb.i64(1), "seq_cst"), kb.i64(1))  # before notify's read
        with kb.if_then(b.icmp_unsigned("==", finished, b.load(loop.target, typ=I64))):
            b.call(runtime_function(b.module, "hobbit_notify"), [])
        b.branch(head)
        b.position_at_end(done)

    def is_last(self) -> ir.Value:
        return self.kb.b.icmp_unsigned("==", self.kb.b.add(self.tid, ir.Constant(I64, 1)), self.count)

    def sync(self) -> None:
        """Wait until every piece of this kernel's claimed loops so far is done (e.g. between
        im2col and the GEMM reading it): a completion wait, so a thread that holds no piece
        holds no one up. Only claimed work may come before it."""
        if self.max_threads == 1:
            return
        if self._static:
            raise CodegenError("Threads.sync after a static split: the other ids' shares may not have started")
        kb, b = self.kb, self.kb.b
        wait = runtime_function(b.module, "hobbit_wait_at_least")
        for loop in self._loops:
            target = b.load(loop.target, typ=I64)
            now = b.load_atomic(loop.done, "acquire", 8, typ=I64)
            with kb.if_then(b.icmp_unsigned("<", now, target)):
                b.call(wait, [loop.done, target])


def _shares(total: int, threads: int) -> list[tuple[int, int]]:
    """split's shares of `total`, for every thread id."""
    return [(v * total // threads, (v + 1) * total // threads) for v in range(threads)]


def _share_in_bands(kb: KernelBuilder, first: int | ir.Value, share: int, max_band: int, body: BandBody) -> None:
    """body over rows first .. first + share in ceil(share / max_band) bands whose heights
    differ by at most one (the taller ones first)."""
    count, small, big = cut(share, max_band)
    if big:
        with kb.loop(0, big, name="band") as i:
            body(kb.add(first, kb.mul(i, small + 1)), small + 1)
    if count > big:
        with kb.loop(0, count - big, name="band") as i:
            body(kb.add(first, kb.add(big * (small + 1), kb.mul(i, small))), small)
