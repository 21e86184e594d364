"""The GEMM microkernel of the BF16 format (hobbit.plan.format): vdpbf16ps (AVX512-BF16)
on bf16 operands with float32 accumulators, and the conversions of float32 activations
into its operand words.

vdpbf16ps multiplies 32 bf16 pairs and adds each pair's two products to one float32
lane: acc[n] += a[2i]*b[2i] + a[2i+1]*b[2i+1]. So the GEMM steps over k two at a
time, and both operands hold consecutive k side by side, one pair per 32-bit word:

* B (the vector operand): [K/2, NR, 2] per NR-column panel, word [kp, n] holding
  (B[2kp, n], B[2kp+1, n]). Weights come in that layout from the bf16 pass; a float32
  B (activations) is converted into it by the packing step, one K chunk of one panel
  at a time, as the float32 GEMM packs its B.
* A (the broadcast operand): words (A[m, 2kp], A[m, 2kp+1]), a MatA whose strides
  count words (weights from the bf16 pass, an im2col converted to pairs), or float32
  rows (FloatRowsA) whose pairs are converted as they are broadcast.

K is padded to even with a zero. Everything here counts K in pairs: the schedule's kc,
the chunks, the k loops; C, the accumulators and the epilogue are float32, as in the
float32 GEMM, whose driver (hobbit.backend.cpu.gemm.emit_gemm: K chunks, thread split,
prefetches) builds this microkernel for the format. Conversions round to nearest even
(vcvtneps2bf16)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.emit.builder import I32, KernelBuilder
from hobbit.backend.cpu.gemm import Block, EpilogueFn, Gemm, Index, MatA, MatB, MatC, TouchFn, _Ahead, microkernel
from hobbit.backend.cpu.parallel import Threads
from hobbit.plan.format import BF16, Format
from hobbit.plan.gemm import GemmSchedule

FLOAT32 = np.dtype(np.float32)
WORD = np.dtype(np.uint32)  # a bf16 pair, as loads and stores see it
LANES = 16  # float32 lanes of a 512-bit vector: the accumulators vdpbf16ps works on
DPBF16PS = "llvm.x86.avx512bf16.dpbf16ps.512"


class BFloatType(ir.Type):
    """LLVM's `bfloat`, which llvmlite does not model; only its vectors are built here."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")


BFLOAT = BFloatType()
PAIRS = ir.VectorType(BFLOAT, 2 * LANES)  # the operand type of vdpbf16ps
WORDS = ir.VectorType(I32, LANES)


@dataclass
class FloatRowsA:
    """A float32 A read in place: A[m, k] at offset + (m // MR)*panel + (m % MR)*m + k."""
    ptr: ir.Value
    offset: Index
    panel: int
    m: int


@microkernel(BF16.micro)
class DpBf16Gemm(Gemm):
    """C = A @ B (+ epilogue) over K (float32 elements) as K/2 pair steps (s.kc counts pairs).
    With `pack`, B is float32 rows (B[k, n] at b.offset + k*b.k + n), converted panel by
    panel into `pack` (one thread's hobbit.plan.gemm.pack_elems(s) words); without it, B is
    pairs whose strides count words. A is pairs (a MatA whose strides count words) or
    float32 rows (FloatRowsA)."""

    def __init__(self, kb: KernelBuilder, s: GemmSchedule, M: int, N: int, K: int, a: MatA | FloatRowsA,
                 b: MatB, c: MatC, fmt: Format, epilogue: EpilogueFn | None, pack: ir.Value | None,
                 touch: TouchFn | None):
        if s.vw != LANES:
            raise CodegenError(f"the bf16 GEMM needs {LANES}-lane float32 vectors (AVX-512); the schedule has {s.vw}")
        super().__init__(kb, s, M, N, K, a, b, c, fmt, epilogue, pack, touch)
        self.odd = K % 2 == 1  # the last pair's second k is padding

    def _ends_in_padding(self, k1: Index) -> bool:
        """Whether the pairs [.., k1) end with the padded one (only the static last chunk can)."""
        return self.odd and isinstance(k1, int) and k1 == self.K

    def pack_panel(self, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index) -> MatB:
        """Float32 B[2*k0 : 2*k1, panel p] -> pack as [k1 - k0, NR] words (ragged lanes zero)."""
        kb, s, b = self.kb, self.s, self.b
        base = kb.add(b.offset, kb.mul(p, s.nr))
        masks = [kb.prefix_mask(s.vw, tail_lanes) if tail_lanes and j == nv - 1 else None for j in range(nv)]

        def row_pair(kp: Index, last_real: bool) -> None:
            src = kb.add(base, kb.mul(kp, 2 * b.k))
            dst = kb.mul(kb.b.sub(kb.idx(kp), kb.idx(k0)), s.nr)
            for j in range(nv):
                lo = kb.vload(b.ptr, FLOAT32, kb.add(src, j * s.vw), s.vw, masks[j])
                hi = ir.Constant(lo.type, None) if last_real else \
                    kb.vload(b.ptr, FLOAT32, kb.add(src, b.k + j * s.vw), s.vw, masks[j])
                kb.vstore(to_words(kb, lo, hi), self.pack, WORD, kb.add(dst, j * s.vw))

        padded = self._ends_in_padding(k1)
        with kb.loop(k0, k1 - 1 if padded else k1, name="pk") as kp:
            row_pair(kp, False)
        if padded:
            row_pair(k1 - 1, True)
        return MatB(self.pack, kb.mul(k0, -s.nr), k=s.nr, panel=0)

    def micro(self, accs, mb: Index, mr: int, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index,
              first: bool, last: bool, b: MatB, ahead: _Ahead | None) -> None:
        """One MR x (nv vectors) block of C over the pairs [k0, k1)."""
        kb, s, a = self.kb, self.s, self.a
        block = Block(kb, s, mb, mr, p, nv, tail_lanes, self.c, FLOAT32)
        block.start(accs, first)
        if self.touch is not None and last:
            for i in range(mr):
                for j in range(nv):
                    self.touch(kb.add(block.m0, i), kb.add(block.n0, j * s.vw))
        a_base = kb.add(a.offset, kb.mul(mb, a.panel))
        b_base = kb.add(b.offset, kb.mul(p, s.nr if b.panel is None else b.panel))

        def step(kp: Index, last_real: bool) -> None:
            b_row = kb.add(b_base, kb.mul(kp, b.k))
            bv = [kb.b.bitcast(kb.vload(b.ptr, WORD, kb.add(b_row, j * s.vw), s.vw, block.masks[j]), PAIRS)
                  for j in range(nv)]
            for i in range(mr):
                av = kb.b.bitcast(kb.splat(self._a_pair(a_base, kp, i, last_real), s.vw), PAIRS)
                for j in range(nv):
                    acc = kb.b.load(accs[i][j], typ=ir.VectorType(ir.FloatType(), s.vw))
                    kb.b.store(kb.call_intrinsic(DPBF16PS, acc.type, [acc, av, bv[j]]), accs[i][j])

        padded = self._ends_in_padding(k1)
        with kb.loop(k0, k1 - 1 if padded else k1, name="k") as kp:
            if ahead is not None:
                ahead.fetch(kb, mb, kp, FLOAT32)
            step(kp, False)
        if padded:
            step(k1 - 1, True)
        block.finish(accs, last, self.epilogue if last else None)

    def _a_pair(self, a_base: Index, kp: Index, i: int, last_real: bool) -> ir.Value:
        """The word (A[m, 2kp], A[m, 2kp+1]) of row i of the block."""
        kb, a = self.kb, self.a
        if isinstance(a, MatA):
            return kb.load(a.ptr, WORD, kb.add(kb.add(a_base, kb.mul(kp, a.k)), i * a.m))
        at = kb.add(kb.add(a_base, kb.mul(kp, 2)), i * a.m)
        two = ir.VectorType(ir.FloatType(), 2)
        if last_real:
            x = kb.b.insert_element(ir.Constant(two, None), kb.load(a.ptr, FLOAT32, at), ir.Constant(I32, 0))
        else:
            x = kb.vload(a.ptr, FLOAT32, at, 2)
        return kb.b.bitcast(kb.b.fptrunc(x, ir.VectorType(BFLOAT, 2)), I32)


def to_words(kb: KernelBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two float32 vectors -> the words (lo[n], hi[n]) in bf16, rounded to nearest even."""
    n = lo.type.count
    narrow = ir.VectorType(BFLOAT, n)
    interleave = ir.Constant(ir.VectorType(I32, 2 * n), [i // 2 + (n if i % 2 else 0) for i in range(2 * n)])
    mixed = kb.b.shuffle_vector(kb.b.fptrunc(lo, narrow), kb.b.fptrunc(hi, narrow), interleave)
    return kb.b.bitcast(mixed, ir.VectorType(I32, n))


def rows_to_pairs(kb: KernelBuilder, src, src_off, K: int, P: int, dst, threads: Threads) -> None:
    """dst[j, p] = the pair (src[2j, p], src[2j + 1, p]) of float32 rows of P, for j < K/2
    (the second of the last pair zero when K is odd); threads share the pairs. On one thread dst
    may be src[src_off] itself: pair j overwrites only rows <= j, which have been read."""
    full, lanes = K // 2, 16

    def pair_row(j, padded: bool) -> None:
        lo_row = kb.add(src_off, kb.mul(j, 2 * P))
        for p0 in range(0, P, lanes):
            mask = kb.prefix_mask(lanes, P - p0) if P - p0 < lanes else None
            lo = kb.vload(src, FLOAT32, kb.add(lo_row, p0), lanes, mask)
            hi = ir.Constant(lo.type, None) if padded else kb.vload(src, FLOAT32, kb.add(lo_row, P + p0), lanes, mask)
            kb.vstore(to_words(kb, lo, hi), dst, WORD, kb.add(kb.mul(j, P), p0), mask)

    def share(lo, hi) -> None:
        with kb.loop(lo, kb.imin(hi, full), name="kp") as j:
            pair_row(j, False)
        if K % 2:
            with kb.when_greater(hi, full) as live:
                if live:
                    pair_row(full, True)

    threads.shares(BF16.steps(K), share)
