"""The CPU's one GEMM driver, and its register-blocked float microkernel, behind Conv,
Gemm, MatMul and Winograd's tile products, in every operand format.

C[M, N] = A[M, K] @ B[K, N], with N (C's contiguous dim) in vectors. An MR x NR
block of C lives in vector registers; each k step loads nv vectors of B,
broadcasts MR scalars of A and issues MR*nv vector FMAs. Shapes are static, so
every loop bound, ragged edge and mask is decided here at compile time; for a GEMM whose
M, N or K is a run-time extent (emit_gemm_runtime: a model's run-time dims,
hobbit.graph.extents) the panels and blocks keep the schedule chosen for the bound and
the trip counts, the ragged last panel and block (a variant per tail width, picked by a
switch) and the K chunks follow the extents, never reading or writing past them.

The operand Format (hobbit.plan.format) names the microkernel: a Gemm subclass registered
for its micro-instruction (`microkernel`) overrides the packing step and the k loop and
shares the K chunks, the thread split, the loops over blocks and the prefetches. The float
format's is Gemm itself; bf16's (vdpbf16ps) is in hobbit.backend.cpu.dpbf16. K is given in
elements; the driver counts it in the format's steps, as the schedule's kc does.

Operands are described by strides so one kernel serves row-major and packed
layouts: A[m, k] is at  a.offset + (m // MR)*a.panel + k*a.k + (m % MR)*a.m,
B[k, n] at b.offset + (n // NR)*b.panel + k*b.k + n % NR, C[m, n] at
c.offset + m*c.m + n*c.n. A B with `taps` is read in place from a padded input plane
(a direct convolution): k = g*T + t is at g*b.k + taps[t], T = len(taps)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.parallel import Threads
from hobbit.plan.format import Format
from hobbit.plan.gemm import GemmSchedule
from hobbit.emit.scalar import Emit
from hobbit.emit.transpose import columns, padded_rows, transposable

Index = int | ir.Value
# epilogue(e, value, m, n, mask) -> value to store at C[m, n : n + width]
EpilogueFn = Callable[[Emit, ir.Value, Index, Index, ir.Value | None], ir.Value]
# touch(m, n): prefetch what the epilogue will read for C[m, n : n + width]
TouchFn = Callable[[Index, Index], None]


@dataclass
class MatA:
    ptr: ir.Value
    offset: Index
    panel: int
    k: int
    m: int


@dataclass
class MatB:
    ptr: ir.Value
    offset: Index
    k: int
    # Elements between consecutive NR-column panels: NR for row-major B; K*NR for B
    # packed panel by panel at compile time (contiguous streams, e.g. FC weights).
    panel: int | None = None
    # Offsets of the rows of each group of consecutive k (the kernel taps of a direct conv:
    # k = (c, kh, kw) reads channel c's plane at kh*tap_row + taps[kw]); the k loop then runs
    # over groups (channels) and their tap_rows rows, the taps of a row unrolled. K chunks
    # must be whole groups. Why not every tap of a group unrolled: ResNet's 7x7 RGB stem made
    # a 39,000-instruction kernel, half of ResNet-18's IR and a third of its compile time.
    taps: tuple[int, ...] | None = None
    tap_rows: int = 1
    tap_row: int = 0

    @property
    def group(self) -> int:
        """The k of one group of taps."""
        return self.tap_rows * len(self.taps)


@dataclass
class MatC:
    ptr: ir.Value
    offset: Index
    m: int
    n: int = 1  # != 1 when C is stored transposed (vectors along N written with a stride)
    # Where partial sums of all but the last K chunk go when C itself is strided:
    # a contiguous [M, N] buffer, so only the final store pays for the stride.
    partial: "MatC | None" = None

    def between_chunks(self) -> "MatC":
        return self.partial or self


def row_major_a(ptr: ir.Value, offset: Index, lda: int, mr: int) -> MatA:
    return MatA(ptr, offset, panel=mr * lda, k=1, m=lda)


def _imbalance(work: list[int], threads: int) -> float:
    """Busiest thread's work over the mean when the units (of the given sizes) are dealt
    out in contiguous runs, as Threads.split does."""
    n = len(work)
    loads = [sum(work[t * n // threads:(t + 1) * n // threads]) for t in range(threads)]
    return max(loads) * threads / sum(work)


# Split by M, every thread streams all of a B packed at compile time (weights, from memory);
# split by N, each streams its share. So N is split unless that is over 10% less even:
# MobileNetV2's 160 -> 960 1x1 conv at 7x7 (15 panels: 8 against 7) ran 7% faster at 2 threads.
PACKED_B_SLACK = 1.1


# A GEMM of at least this many multiply-adds, in one K chunk and split by N, is shared by
# claimed runs of panels (Threads.runs) rather than a static split: a run packs its own
# panels. Split by M, every run would pack all of B again (ResNet-50's 1x1 convs at 14x14
# ran 20% slower at 2 threads), so M blocks stay statically split.
MIN_CLAIMED_MACS = 1 << 23


def emit_gemm(kb: KernelBuilder, s: GemmSchedule, M: int, N: int, K: int,
              a, b: MatB, c: MatC, fmt: Format, epilogue: EpilogueFn | None,
              threads: Threads, pack: ir.Value | None = None, touch: TouchFn | None = None) -> None:
    """C = A @ B (+ epilogue) on the microkernel of `fmt`, over K elements (fmt.steps(K)
    steps: s.kc counts steps); `a` is a MatA, or another A that microkernel reads
    (hobbit.backend.cpu.dpbf16.FloatRowsA). Threads share whichever of N panels / M blocks splits more evenly
    (N favoured for a packed B: see PACKED_B_SLACK). A large GEMM split by N in one K chunk
    is shared by claimed runs of panels, so a thread the host slows does not hold up the
    others; otherwise each thread keeps the same static slice of C across K chunks, so no
    sync is needed (shares are claimed whole, Threads.shares).

    With `pack` (this thread's buffer of hobbit.plan.gemm.pack_elems(s)), each K chunk of a B panel is
    first copied into one contiguous [kc, NR] block that every MR-row block then
    streams: a row-major B with long rows would otherwise touch a new page per k."""
    if b.taps is not None and s.kc % b.group:
        raise CodegenError(f"GEMM K chunks of {s.kc} split groups of {b.group} taps")
    kernel = MICROKERNELS.get(fmt.micro)
    if kernel is None:
        raise CodegenError(f"no CPU GEMM microkernel on {fmt.micro} (operand format {fmt.name})")
    share_gemm(kernel(kb, s, M, N, K, a, b, c, fmt, epilogue, pack, touch), threads)


def share_gemm(gemm: "Gemm", threads: Threads, bound: tuple[int, int, int] | None = None) -> None:
    """Run `gemm` on `threads` as emit_gemm describes. For a GEMM with run-time extents,
    `bound` gives the sizes (K in steps) the choice is made for; the units shared are then
    counted at run time (a conv's positions: hobbit.backend.cpu.conv)."""
    s, b = gemm.s, gemm.b
    M, N, K = (gemm.M, gemm.N, gemm.K) if bound is None else bound
    units_n, units_m = ceil_units(gemm.kb, gemm.N, s.nr), ceil_units(gemm.kb, gemm.M, s.mr)
    split_n = _split_n(s, M, N, b, threads.max_threads)
    n_chunks = -(-K // s.kc)
    if threads.max_threads == 1 or (M * N * K < 1 << 18 and not threads.used):  # too little work to share
        gemm.chunks((0, units_n), (0, units_m))
    elif split_n and n_chunks == 1 and M * N * K >= MIN_CLAIMED_MACS:
        threads.runs(units_n, lambda lo, hi: gemm.chunks((lo, hi), (0, units_m)))
    elif split_n:
        threads.shares(units_n, lambda lo, hi: gemm.chunks((lo, hi), (0, units_m)))
    else:
        threads.shares(units_m, lambda lo, hi: gemm.chunks((0, units_n), (lo, hi)))


def _split_n(s: GemmSchedule, M: int, N: int, b: MatB, threads: int) -> bool:
    """Whether threads share N panels rather than M blocks (see emit_gemm)."""
    n_panels, n_rem = divmod(N, s.nr)
    m_blocks, m_rem = divmod(M, s.mr)
    n_work = [s.nv] * n_panels + ([-(-n_rem // s.vw)] if n_rem else [])
    m_work = [s.mr] * m_blocks + ([m_rem] if m_rem else [])
    slack = PACKED_B_SLACK if b.panel is not None and b.panel > 0 else 1.0
    return _imbalance(n_work, threads) <= slack * _imbalance(m_work, threads)


def emit_gemm_runtime(kb: KernelBuilder, s: GemmSchedule, M: Index, N: Index, K: Index, a, b: MatB, c: MatC,
                      fmt: Format, epilogue: EpilogueFn | None, threads: Threads,
                      bound: tuple[int, int, int]) -> None:
    """emit_gemm where M, N or K may be run-time extents (i64 values), at most `bound` (the
    sizes the schedule was chosen for); nothing past an extent is read or written. Threads
    share what the bound's GEMM would share (see share_runtime)."""
    share_runtime(runtime_gemm(kb, s, M, N, K, a, b, c, fmt, epilogue, bound[2]), threads, bound)


def runtime_gemm(kb: KernelBuilder, s: GemmSchedule, M: Index, N: Index, K: Index, a, b: MatB, c: MatC,
                 fmt: Format, epilogue: EpilogueFn | None, k_bound: int, pack: ir.Value | None = None,
                 touch: TouchFn | None = None) -> "Gemm":
    """The Gemm of a GEMM with run-time extents (float formats: one k a step), B packed
    panel by panel into `pack` when given, as emit_gemm's."""
    if fmt.micro != "fma":
        raise CodegenError(f"run-time GEMM extents are supported on the float microkernel only, not {fmt.name}")
    gemm = MICROKERNELS["fma"](kb, s, M, N, K, a, b, c, fmt, epilogue, pack, touch)
    gemm.k_bound = k_bound
    return gemm


def share_runtime(gemm: "Gemm", threads: Threads, bound: tuple[int, int, int]) -> None:
    """Run a GEMM with run-time extents on `threads`, the split chosen as share_gemm chooses
    it for the bound: by N panels when N is static (a constant B then streams once, split
    among the threads, at every M: fully-connected layers), claimed as share_gemm claims
    them; else by shares of the run-time count of M blocks (claimed whole, as share_gemm's)."""
    kb, s, b = gemm.kb, gemm.s, gemm.b
    M, N, K = bound
    units_n, units_m = ceil_units(kb, gemm.N, s.nr), ceil_units(kb, gemm.M, s.mr)
    if threads.max_threads == 1 or (M * N * K < 1 << 18 and not threads.used):
        gemm.chunks((0, units_n), (0, units_m))
    elif isinstance(units_n, int) and _split_n(s, M, N, b, threads.max_threads):
        share = threads.runs if -(-K // s.kc) == 1 and M * N * K >= MIN_CLAIMED_MACS else threads.shares
        share(units_n, lambda lo, hi: gemm.chunks((lo, hi), (0, units_m)))
    else:
        threads.shares(units_m, lambda lo, hi: gemm.chunks((0, units_n), (lo, hi)))


# The Gemm class of each micro-instruction a Format names (Format.micro).
MICROKERNELS: dict[str, type["Gemm"]] = {}


def microkernel(micro: str) -> Callable[[type["Gemm"]], type["Gemm"]]:
    """Class decorator: the GEMM of the formats whose micro-instruction is `micro`."""
    def register(cls: type["Gemm"]) -> type["Gemm"]:
        MICROKERNELS[micro] = cls
        return cls
    return register


@microkernel("fma")
class Gemm:
    """One GEMM's code for a given range of N panels and M blocks. The packing step and the
    microkernel are methods, so a GEMM on other operand types (hobbit.backend.cpu.dpbf16,
    hobbit.backend.cpu.gemm_dot) overrides those two and shares the K chunks, loops and
    prefetches. self.K counts the format's steps; self.acc_dtype is the accumulators' type
    (the format's), self.dtype C's (the same, unless a subclass converts at the store, as the
    int8 GEMM does from int32); `prefetch_ahead` whether a B packed at compile time has its
    next panel fetched while this one runs (in the float layout [K, NR])."""

    prefetch_ahead = True
    # For a run-time K (emit_gemm_runtime): the most it can be, in steps (one K chunk when it fits).
    k_bound: int | None = None

    def __init__(self, kb: KernelBuilder, s: GemmSchedule, M: Index, N: Index, K: Index, a, b: MatB, c: MatC,
                 fmt: Format, epilogue: EpilogueFn | None, pack: ir.Value | None, touch: TouchFn | None):
        self.kb, self.s, self.M, self.N, self.fmt = kb, s, M, N, fmt
        self.K = fmt.steps(K) if isinstance(K, int) else K  # (a run-time K only in formats of one k a step)
        self.a, self.b, self.c, self.dtype, self.acc_dtype = a, b, c, fmt.accumulator, fmt.accumulator
        self.epilogue, self.pack, self.touch = epilogue, pack, touch

    def chunks(self, n_range: tuple[Index, Index], m_range: tuple[Index, Index]) -> None:
        """K in chunks: the first starts from zero, the last applies the epilogue, the
        ones between share one loop, so code size does not grow with K."""
        kb, s, K = self.kb, self.s, self.K
        acc_type = ir.VectorType(_elem(kb, self.acc_dtype), s.vw)
        accs = [[kb.alloca(acc_type) for _ in range(s.nv)] for _ in range(s.mr)]
        if not isinstance(K, int):
            self._runtime_chunks(accs, n_range, m_range)
            return
        n_chunks = -(-K // s.kc)
        if n_chunks == 1:
            self._nest(accs, n_range, m_range, 0, K, True, True)
            return
        self._nest(accs, n_range, m_range, 0, s.kc, True, False)
        if n_chunks > 2:
            with kb.loop(1, n_chunks - 1, name="kc") as ci:
                k0 = kb.mul(ci, s.kc)
                self._nest(accs, n_range, m_range, k0, kb.add(k0, s.kc), False, False)
        self._nest(accs, n_range, m_range, (n_chunks - 1) * s.kc, K, False, True)

    def _runtime_chunks(self, accs, n_range: tuple[Index, Index], m_range: tuple[Index, Index]) -> None:
        """chunks() for a run-time K: one chunk when K's bound fits one, else as many as K
        needs (one chunk, or the first, the ones between and the last, as chunks() does)."""
        kb, b, s, K = self.kb, self.kb.b, self.s, self.K
        if self.k_bound is not None and self.k_bound <= s.kc:
            self._nest(accs, n_range, m_range, 0, K, True, True)
            return
        n_chunks = b.udiv(b.add(K, kb.i64(s.kc - 1)), kb.i64(s.kc))
        with b.if_else(b.icmp_signed("<=", n_chunks, kb.i64(1))) as (one, many):
            with one:
                self._nest(accs, n_range, m_range, 0, K, True, True)
            with many:
                self._nest(accs, n_range, m_range, 0, s.kc, True, False)
                with kb.loop(1, b.sub(n_chunks, kb.i64(1)), name="kc") as ci:
                    k0 = kb.mul(ci, s.kc)
                    self._nest(accs, n_range, m_range, k0, kb.add(k0, s.kc), False, False)
                self._nest(accs, n_range, m_range, b.mul(b.sub(n_chunks, kb.i64(1)), kb.i64(s.kc)), K, False, True)

    def _nest(self, accs, n_range: tuple[Index, Index], m_range: tuple[Index, Index], k0: Index, k1: Index,
              first: bool, last: bool) -> None:
        kb, s, b, pack, dtype = self.kb, self.s, self.b, self.pack, self.dtype
        (n_lo, n_hi), (m_lo, m_hi) = n_range, m_range
        n_panels, n_rem = _whole(kb, self.N, s.nr)
        m_blocks, m_rem = _whole(kb, self.M, s.mr)
        # B packed at compile time (weights) comes from memory: while the MR-row blocks work
        # on one panel, fetch the next one, a slice per k step, so its first block does not
        # stall on it (ResNet-50's 7x7 convs, cold: 1.24 ms against 1.0 warm). A panel read
        # by one block only (a GEMV) is a plain stream the hardware prefetcher keeps up with;
        # prefetching it too gained nothing (VGG-16's first FC layer: 15.3 ms, 14.2-15.2 without).
        # With a run-time M the count of blocks is known at run time only (from row 0: a
        # split over N panels, or one thread), and so is the slice each block fetches.
        streamed = self.prefetch_ahead and b.panel is not None and b.panel > 0 and pack is None
        ahead_of = streamed and isinstance(m_lo, int) and isinstance(m_hi, int) and m_hi - m_lo > 1
        ahead_at_run_time = streamed and not isinstance(self.M, int) and isinstance(m_lo, int) and m_lo == 0

        def panel(p: Index, nv: int, tail_lanes: int) -> None:
            panel_b = self.pack_panel(p, nv, tail_lanes, k0, k1) if pack else b
            ahead = _Ahead.of_next_panel(kb, s, b, p, k0, k1, m_hi - m_lo, np.dtype(dtype).itemsize) \
                if ahead_of else None
            if ahead_at_run_time:
                ahead = _Ahead.of_next_panel_at_run_time(kb, s, b, p, k0, k1, m_hi, np.dtype(dtype).itemsize)

            def rows(mb: Index, mr: int) -> None:
                self.micro(accs, mb, mr, p, nv, tail_lanes, k0, k1, first, last, panel_b, ahead)

            with kb.loop(m_lo, kb.imin(m_hi, m_blocks), name="mb") as mb:
                rows(mb, s.mr)
            if not isinstance(m_rem, int):  # run-time M: the last rows on the variant of their count
                if s.mr > 1:
                    with _tail(kb, m_hi, m_blocks, m_rem):
                        _switch(kb, m_rem, {r: lambda r=r: rows(m_blocks, r) for r in range(1, s.mr)}, "mrem")
            elif m_rem:
                with kb.when_greater(m_hi, m_blocks) as live:
                    if live:
                        rows(m_blocks, m_rem)

        with kb.loop(n_lo, kb.imin(n_hi, n_panels), name="np") as p:
            panel(p, s.nv, 0)
        if not isinstance(n_rem, int):  # run-time N: the last columns on the variant of their vectors
            with _tail(kb, n_hi, n_panels, n_rem):
                vectors = kb.b.udiv(kb.b.sub(n_rem, kb.i64(1)), kb.i64(s.vw))
                _switch(kb, vectors, {j: lambda j=j: panel(n_panels, j + 1, kb.b.sub(n_rem, kb.i64(j * s.vw)))
                                      for j in range(s.nv)}, "nrem")
        elif n_rem:
            with kb.when_greater(n_hi, n_panels) as live:
                if live:
                    panel(n_panels, -(-n_rem // s.vw), n_rem % s.vw)

    def pack_panel(self, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index) -> MatB:
        return _pack_panel(self.kb, self.s, self.b, p, nv, tail_lanes, k0, k1, self.pack, self.dtype)

    def micro(self, accs, mb: Index, mr: int, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index,
              first: bool, last: bool, b: MatB, ahead: "_Ahead | None") -> None:
        _micro(self.kb, self.s, accs, mb, mr, p, nv, tail_lanes, k0, k1, first, last, self.a, b, self.c,
               self.dtype, self.epilogue if last else None, ahead, self.touch if last else None)


def _pack_panel(kb: KernelBuilder, s: GemmSchedule, b: MatB, p: Index, nv: int, tail_lanes: int,
                k0: Index, k1: Index, pack: ir.Value, dtype: np.dtype) -> MatB:
    """Copy B[k0:k1, panel p] into `pack` as [k1 - k0, NR] (ragged lanes zeroed); return it as a B."""
    base = kb.add(b.offset, kb.mul(p, s.nr if b.panel is None else b.panel))
    with kb.loop(k0, k1, name="pk") as k:
        src = kb.add(base, kb.mul(k, b.k))
        dst = kb.mul(kb.b.sub(k, kb.idx(k0)), s.nr)
        for j in range(nv):
            mask = _tail_mask(kb, s.vw, tail_lanes) if j == nv - 1 else None
            kb.vstore(kb.vload(b.ptr, dtype, kb.add(src, j * s.vw), s.vw, mask), pack, dtype, kb.add(dst, j * s.vw))
    return MatB(pack, kb.mul(k0, -s.nr), k=s.nr, panel=0)


@dataclass
class _Ahead:
    """Prefetches of the next B panel spread over this panel's micro blocks: block mb at
    step k fetches the `lines` cache lines from element base + (mb*(k1 - k0) + k - k0)*step.

    Steps are whole lines or a power-of-two fraction of one: a stride that wanders across
    line boundaries (22 floats for 3 blocks of 64 columns) made a Winograd layer slower."""
    ptr: ir.Value
    base: Index
    step: Index
    lines: int
    line: int
    k0: Index
    k_len: Index

    @staticmethod
    def of_next_panel(kb: KernelBuilder, s: GemmSchedule, b: MatB, p: Index, k0: Index, k1: Index,
                      blocks: int, itemsize: int) -> "_Ahead":
        line = max(1, 64 // itemsize)
        per_step = -(-s.nr // max(blocks, 1))  # elements of the next panel to fetch per k step
        lines = -(-per_step // line)
        step = lines * line if per_step > line else 1 << (per_step - 1).bit_length()
        base = kb.add(kb.add(b.offset, kb.mul(kb.add(p, 1), b.panel)), kb.mul(k0, s.nr))
        return _Ahead(b.ptr, base, step, lines, line, k0, kb.add(k1, kb.mul(k0, -1)))

    @staticmethod
    def of_next_panel_at_run_time(kb: KernelBuilder, s: GemmSchedule, b: MatB, p: Index, k0: Index, k1: Index,
                                  blocks: Index, itemsize: int) -> "_Ahead":
        """of_next_panel for a count of blocks known at run time: the step it would choose,
        computed at run time, and the lines per step two blocks need (the most any count
        that prefetches does; a count of one fetches in place, as a GEMV gains nothing)."""
        ib = kb.b
        line = max(1, 64 // itemsize)
        lines = -(-(-(-s.nr // 2)) // line)  # for two blocks: half a panel per k step
        blocks = kb.idx(blocks)
        per_step = ib.udiv(ib.add(kb.i64(s.nr - 1), blocks), _at_least_one(kb, blocks))
        ctlz = kb.call_intrinsic("llvm.ctlz.i64", ir.IntType(64),
                                 [ib.sub(per_step, kb.i64(1)), ir.Constant(ir.IntType(1), 0)])
        fraction = ib.shl(kb.i64(1), ib.sub(kb.i64(64), ctlz))  # per_step up to a power of two
        step = ib.select(ib.icmp_unsigned(">", per_step, kb.i64(line)), kb.i64(lines * line), fraction)
        step = ib.select(ib.icmp_signed(">", blocks, kb.i64(1)), step, kb.i64(0))
        base = kb.add(kb.add(b.offset, kb.mul(kb.add(p, 1), b.panel)), kb.mul(k0, s.nr))
        return _Ahead(b.ptr, base, step, lines, line, k0, kb.add(k1, kb.mul(k0, -1)))

    def fetch(self, kb: KernelBuilder, mb: Index, k: ir.Value, dtype: np.dtype) -> None:
        step_index = kb.add(kb.mul(mb, self.k_len), kb.add(k, kb.mul(self.k0, -1)))
        first = kb.add(self.base, kb.mul(step_index, self.step))
        for j in range(self.lines):
            kb.prefetch(self.ptr, dtype, kb.add(first, j * self.line))


def _micro(kb: KernelBuilder, s: GemmSchedule, accs, mb: Index, mr: int, p: Index, nv: int,
           tail_lanes: int, k0: Index, k1: Index, first: bool, last: bool,
           a: MatA, b: MatB, c: MatC, dtype: np.dtype, epilogue: EpilogueFn | None,
           ahead: _Ahead | None = None, touch: TouchFn | None = None) -> None:
    """One MR x (nv vectors) block of C, rows from block mb, columns from panel p, over k in [k0, k1)."""
    block = Block(kb, s, mb, mr, p, nv, tail_lanes, c, dtype)
    e, masks = block.e, block.masks
    block.start(accs, first)
    if touch is not None:
        for i in range(mr):
            for j in range(nv):
                touch(kb.add(block.m0, i), kb.add(block.n0, j * s.vw))
    a_base = kb.add(a.offset, kb.mul(mb, a.panel))
    b_base = kb.add(b.offset, kb.mul(p, s.nr if b.panel is None else b.panel))

    def step(a_row: Index, b_row: Index) -> None:
        bv = [kb.vload(b.ptr, dtype, kb.add(b_row, j * s.vw), s.vw, masks[j]) for j in range(nv)]
        for i in range(mr):
            av = kb.splat(kb.load(a.ptr, dtype, kb.add(a_row, i * a.m)), s.vw)
            for j in range(nv):
                acc = kb.b.load(accs[i][j], typ=bv[j].type)
                kb.b.store(e.fma(av, bv[j], acc), accs[i][j])

    if b.taps is None:
        with kb.loop(k0, k1, name="k") as k:
            if ahead is not None:
                ahead.fetch(kb, mb, k, dtype)
            step(kb.add(a_base, kb.mul(k, a.k)), kb.add(b_base, kb.mul(k, b.k)))
    else:
        group, row = b.group, len(b.taps)
        with kb.loop(kb.udiv(k0, group), kb.udiv(k1, group), name="kg") as g:
            with kb.loop(0, b.tap_rows, name="kr") as r:
                first = kb.add(kb.mul(g, group), kb.mul(r, row))
                row_base = kb.add(b_base, kb.add(kb.mul(g, b.k), kb.mul(r, b.tap_row)))
                for t, tap in enumerate(b.taps):
                    step(kb.add(a_base, kb.mul(kb.add(first, t), a.k)), kb.add(row_base, tap))

    block.finish(accs, last, epilogue)


class Block:
    """The accumulators' side of one MR x (nv vectors) block of C: where its rows and columns
    start, the masks of a ragged last vector, and the loads and stores of C around the k loop
    (shared by every microkernel, whatever its operand types).

    Accumulators are of `acc_dtype` (C's `dtype` unless given: the int8 GEMM sums in int32 and
    its epilogue converts them to C's bytes). Vector j starts at column j*vw and has lanes[j]
    lanes (vw unless given: the int8 GEMM may end a panel on a narrower vector)."""

    def __init__(self, kb: KernelBuilder, s: GemmSchedule, mb: Index, mr: int, p: Index, nv: int,
                 tail_lanes: int, c: MatC, dtype: np.dtype, acc_dtype: np.dtype | None = None,
                 lanes: list[int] | None = None):
        self.kb, self.s, self.mr, self.nv, self.c, self.dtype = kb, s, mr, nv, c, dtype
        self.acc_dtype = np.dtype(dtype if acc_dtype is None else acc_dtype)
        self.lanes = [s.vw] * nv if lanes is None else lanes
        self.e = Emit(kb, self.acc_dtype, s.vw)
        self.n0 = kb.mul(p, s.nr)
        self.masks = [_tail_mask(kb, self.lanes[j], tail_lanes) if j == nv - 1 else None for j in range(nv)]
        self.m0 = kb.mul(mb, s.mr)

    def c_index(self, cm: MatC, i: int, n: Index) -> Index:
        kb = self.kb
        return kb.add(kb.add(cm.offset, kb.affine([(self.m0, cm.m)], i * cm.m)), kb.mul(n, cm.n))

    def start(self, accs, first: bool) -> None:
        """Accumulators from zero (the first K chunk) or from the partial sums in C."""
        kb, s, dtype = self.kb, self.s, self.dtype
        src = self.c.between_chunks()
        for i in range(self.mr):
            for j in range(self.nv):
                n = kb.add(self.n0, j * s.vw)
                init = kb.const(self.acc_dtype, 0, self.lanes[j]) if first else \
                    kb.vload_strided(src.ptr, dtype, self.c_index(src, i, n), src.n, s.vw, self.masks[j])
                kb.b.store(init, accs[i][j])

    def finish(self, accs, last: bool, epilogue: EpilogueFn | None) -> None:
        """Accumulators to C (through the epilogue after the last K chunk). A C stored
        transposed (its rows contiguous, its columns strided) is written column by column
        after a transpose in registers (hobbit.emit.transpose) where the block allows."""
        kb, s, dtype = self.kb, self.s, self.dtype
        dst = self.c if last else self.c.between_chunks()
        by_columns = dst.n != 1 and dst.m == 1 and all(
            self._live_columns(j) is not None and transposable(self.mr, self.lanes[j]) for j in range(self.nv))
        if by_columns:
            for j in range(self.nv):
                n = kb.add(self.n0, j * s.vw)
                self._store_columns([self._result(accs, i, j, epilogue) for i in range(self.mr)], dst, n,
                                    self._live_columns(j))
            return
        for i in range(self.mr):
            for j in range(self.nv):
                n = kb.add(self.n0, j * s.vw)
                kb.vstore_strided(self._result(accs, i, j, epilogue), dst.ptr, dtype, self.c_index(dst, i, n), dst.n,
                                  self.masks[j])

    def _result(self, accs, i: int, j: int, epilogue: EpilogueFn | None) -> ir.Value:
        """Accumulator (i, j), through the epilogue if there is one."""
        kb = self.kb
        x = kb.b.load(accs[i][j], typ=ir.VectorType(_elem(kb, self.acc_dtype), self.lanes[j]))
        if epilogue is not None:
            x = epilogue(self.e, x, kb.add(self.m0, i), kb.add(self.n0, j * self.s.vw), self.masks[j])
        return x

    def _live_columns(self, j: int) -> int | None:
        """How many of vector j's lanes are in C (None: known only at run time)."""
        mask = self.masks[j]
        if mask is None:
            return self.lanes[j]
        if isinstance(mask, ir.Constant):
            return sum(int(c.constant) for c in mask.constant)
        return None

    def _store_columns(self, rows: list[ir.Value], dst: "MatC", n: Index, live: int) -> None:
        """Columns n .. n + live of the block's rows, each as one store of MR contiguous elements."""
        kb, dtype = self.kb, self.dtype
        p = padded_rows(self.mr)
        mask = None if p == self.mr else kb.prefix_mask(p, self.mr)
        for c, column in enumerate(columns(kb.b, rows, live)):
            at = self.c_index(dst, 0, kb.add(n, c))
            if p == 1:
                kb.store(kb.b.extract_element(column, ir.Constant(ir.IntType(32), 0)), dst.ptr, dtype, at)
            else:
                kb.vstore(column, dst.ptr, dtype, at, mask)


def _elem(kb: KernelBuilder, dtype: np.dtype) -> ir.Type:
    return kb.const(dtype, 0).type


def _tail_mask(kb: KernelBuilder, width: int, tail_lanes: Index) -> ir.Value | None:
    """The mask of a panel's last vector of `width` lanes, `tail_lanes` of them in C (0 or
    width: all; a run-time count, 1 .. width, for a run-time N)."""
    if not isinstance(tail_lanes, int):
        return kb.runtime_prefix_mask(width, tail_lanes)
    return kb.prefix_mask(width, tail_lanes) if tail_lanes and tail_lanes < width else None


def _whole(kb: KernelBuilder, extent: Index, size: int) -> tuple[Index, Index]:
    """divmod(extent, size), at run time for a run-time extent."""
    if isinstance(extent, int):
        return divmod(extent, size)
    whole = kb.b.udiv(extent, kb.i64(size))
    return whole, kb.b.sub(extent, kb.b.mul(whole, kb.i64(size)))


def _at_least_one(kb: KernelBuilder, value: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed(">", value, kb.i64(1)), value, kb.i64(1))


def ceil_units(kb: KernelBuilder, extent: Index, size: int) -> Index:
    """Units of `size` that cover `extent` (at run time for a run-time extent)."""
    if isinstance(extent, int):
        return -(-extent // size)
    return kb.b.udiv(kb.b.add(extent, kb.i64(size - 1)), kb.i64(size))


@contextmanager
def _tail(kb: KernelBuilder, hi: Index, whole: ir.Value, rem: ir.Value) -> Iterator[None]:
    """Emit the block where a range of units ending at `hi` holds the ragged last unit
    (index `whole`) and there is one (`rem` != 0), both known at run time."""
    b = kb.b
    with kb.if_then(b.and_(b.icmp_signed(">", kb.idx(hi), whole), b.icmp_unsigned("!=", rem, kb.i64(0)))):
        yield


def _switch(kb: KernelBuilder, value: ir.Value, cases: dict[int, Callable[[], None]], name: str) -> None:
    """cases[v]() where value == v (nothing for any other value)."""
    b = kb.b
    blocks = kb.blocks(name, *[str(v) for v in cases], "end")
    switch = b.switch(value, blocks[-1])
    for (v, body), block in zip(cases.items(), blocks):
        switch.add_case(kb.i64(v), block)
        b.position_at_end(block)
        body()
        b.branch(blocks[-1])
    b.position_at_end(blocks[-1])
