"""The GEMM microkernel on an integer dot product: int8 operands, int32 accumulators.

vpdpbusd (VNNI) and vpmaddwd (AVX2) add to each int32 lane the dot product of `group`
consecutive k (hobbit.plan.int8.DotProduct says which instruction and why the sums are
exact). So, as the bf16 GEMM steps over k in pairs, this one steps over k in groups, and
both operands hold a group of k side by side, one group per 32-bit word:

* the vector operand B, per NR-column panel: [K/group, NR, group] in the dot's operand
  type. Weights come in that layout from the int8 pass (hobbit.plan.int8.packed_matrix:
  QMatMul); activations (rows of bytes: an im2col, or a pointwise conv's input) are packed
  into it one panel at a time, k past K zero (QConv).
* the broadcast operand A: one 32-bit word per (row, group of k). Weights, stored in the
  dot's weight type in panels of MR rows of [K/group, MR, group], K padded to the group
  (QConv: hobbit.plan.int8.panel_filters), are loaded as they are;
  activations, rows of K bytes (QMatMul), are widened to the operand type as they are read,
  the last group's missing k zero.

Activations are the unsigned operand: int8 ones are flipped to uint8 (x + 128, an xor)
where they are read, and the int8 pass folds the +128 into the epilogue's offset.

Everything here counts K in groups (the schedule's kc, the chunks, the k loops), and K is
one chunk: partial sums of int32 cannot go through C's bytes. The accumulators are int32;
the epilogue (requantization or the int32 result less the zero point's share) converts
them at the store, through hobbit.backend.cpu.gemm.Block. A panel may end on a narrower
vector (hobbit.plan.int8.narrow_lanes: a ymm vpdpbusd beside zmm ones)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.gemm import Block, Gemm, Index, MatA, MatB, MatC, _Ahead
from hobbit.backend.cpu.int8_vector import I8, I32, U8, dot_step
from hobbit.plan.gemm import GemmSchedule
from hobbit.plan.int8 import DotProduct

I16 = ir.IntType(16)
# epilogue(acc, m, n, at, mask) -> what C[m, n : n + lanes] holds, from its int32 sums;
# `at` is that element's index in C (where a fused residual of C's layout is read)
DotEpilogue = Callable[[ir.Value, Index, Index, Index, ir.Value | None], ir.Value]


class DotGemm(Gemm):
    """C = A @ B on `dot`, over k < K (elements). `activations` names the operand that holds
    them ("a" or "b"); `flip`: they are int8 (read as uint8). A is addressed in bytes:
    row m's group g at a.offset + (m // MR)*a.panel + (m % MR)*a.m + g*a.k. With activations
    in B, B is rows of bytes (B[k, n] at b.offset + k*b.k + n) packed panel by panel into
    `pack`; with weights in B, B is packed at compile time (strides in elements, per group).
    `narrow`: lane counts below dot.lanes that a panel's last vector may use."""

    prefetch_ahead = False  # B's panels are [K/group, NR, group], not the float [K, NR]

    def __init__(self, kb: KernelBuilder, s: GemmSchedule, dot: DotProduct, M: int, N: int, K: int,
                 a: MatA, b: MatB, c: MatC, dtype: np.dtype, epilogue: DotEpilogue,
                 pack: ir.Value | None, activations: str, flip: bool, narrow: tuple[int, ...] = ()):
        fmt = dot.format
        # vectors of dot.lanes int32 (the schedule's may be wider: vpmaddwd on AVX-512), one K chunk
        s = replace(s, nv=s.nr // dot.lanes, vw=dot.lanes, kc=fmt.steps(K))
        super().__init__(kb, s, M, N, K, a, b, c, fmt, epilogue, pack, None)
        self.dtype = np.dtype(dtype)  # C's: the epilogue converts the int32 sums at the store
        self.dot, self.k, self.activations, self.flip, self.narrow = dot, K, activations, flip, narrow
        self.b_dtype = dot.packed if activations == "b" else dot.weights
        self._narrow: dict[tuple[int, int], ir.Value] = {}

    def _lanes(self, nv: int, tail_lanes: int) -> list[int]:
        """Lanes of each accumulator vector of a panel: whole vectors, then for a ragged rest
        the narrowest of `narrow` that holds it."""
        lanes = self.s.vw
        last = min((n for n in self.narrow if n >= tail_lanes), default=lanes) if tail_lanes else lanes
        return [lanes] * (nv - 1) + [last]

    # -- packing the activations ---------------------------------------------------------

    def pack_panel(self, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index) -> MatB:
        """pack[(g*NR + n)*group + t] = B[g*group + t, panel p's column n] for the panel's
        columns; k past K and columns past the panel's width are zero."""
        kb, dot, s, b = self.kb, self.dot, self.s, self.b
        start = kb.add(b.offset, kb.mul(p, s.nr))
        width = (nv - 1) * s.vw + (tail_lanes or s.vw)
        whole = self.k // dot.group
        with kb.loop(0, whole, name="pk") as g:
            self._pack_group(start, width, nv, g, dot.group)
        if self.k % dot.group:
            self._pack_group(start, width, nv, whole, self.k % dot.group)
        return MatB(self.pack, 0, k=s.nr * dot.group, panel=0)

    def _pack_group(self, start: Index, width: int, nv: int, g: Index, present: int) -> None:
        kb, dot, nr, b = self.kb, self.dot, self.s.nr, self.b
        lanes = dot.lanes
        for j in range(nv):
            valid = min(lanes, width - j * lanes)
            mask = kb.prefix_mask(lanes, valid) if valid < lanes else None
            rows = []
            for t in range(dot.group):
                if t < present:
                    at = kb.add(kb.add(start, kb.mul(kb.add(kb.mul(g, dot.group), t), b.k)), j * lanes)
                    row = kb.vload(b.ptr, U8, at, lanes, mask)
                    if self.flip:
                        row = kb.b.xor(row, ir.Constant(row.type, [0x80] * lanes))
                else:
                    row = ir.Constant(ir.VectorType(I8, lanes), None)
                if dot.packed.itemsize == 2:
                    row = kb.b.zext(row, ir.VectorType(I16, lanes))
                rows.append(row)
            at = kb.mul(kb.add(kb.mul(g, nr), j * lanes), dot.group)
            kb.vstore(_interleave(kb, rows), self.pack, dot.packed, at)

    # -- the microkernel -----------------------------------------------------------------

    def micro(self, accs, mb: Index, mr: int, p: Index, nv: int, tail_lanes: int, k0: Index, k1: Index,
              first: bool, last: bool, b: MatB, ahead: _Ahead | None) -> None:
        """One MR x (nv vectors) block of C over the groups [k0, k1) (all of K)."""
        kb, s, a, dot = self.kb, self.s, self.a, self.dot
        lanes = self._lanes(nv, tail_lanes)
        accs = [[accs[i][j] if n == s.vw else self._narrow_acc(i, n) for j, n in enumerate(lanes)]
                for i in range(mr)]
        # Block works on the panel's own C, so its columns (and the epilogue's `at`) are the
        # constants j*vw: C's index then ends in a constant the store's address folds
        # (as the int8 kernels' own stores did before they shared this driver)
        c, n0 = self.c, kb.mul(p, s.nr)
        panel_c = MatC(c.ptr, kb.add(c.offset, kb.mul(n0, c.n)), c.m, c.n)
        block = Block(kb, s, mb, mr, 0, nv, tail_lanes, panel_c, self.dtype, self.acc_dtype, lanes)
        block.start(accs, first)
        a_base = kb.add(a.offset, kb.mul(mb, a.panel))
        b_base = kb.add(b.offset, kb.mul(p, s.nr if b.panel is None else b.panel))
        operand = [ir.VectorType(ir.IntType(8 * self.b_dtype.itemsize), n * dot.group) for n in lanes]

        def step(g: Index, present: int) -> None:
            b_row = kb.add(b_base, kb.mul(g, b.k))
            bv = [kb.vload(b.ptr, self.b_dtype, kb.add(b_row, j * s.vw * dot.group), n * dot.group)
                  for j, n in enumerate(lanes)]
            for i in range(mr):
                word = self._word(kb.add(kb.add(a_base, kb.mul(g, a.k)), i * a.m), present)
                for j, n in enumerate(lanes):
                    av = kb.b.bitcast(kb.splat(word, n), operand[j])
                    acc = kb.b.load(accs[i][j], typ=ir.VectorType(I32, n))
                    pair = (av, bv[j]) if self.activations == "a" else (bv[j], av)
                    kb.b.store(dot_step(kb, dot, acc, *pair), accs[i][j])

        # A's activation rows end at K: a ragged last group is read k by k
        whole = self.k // dot.group if self.activations == "a" else self.K
        with kb.loop(k0, kb.imin(k1, whole), name="kg") as g:
            step(g, dot.group)
        if whole < self.K:
            step(whole, self.k % dot.group)

        def convert(e, acc: ir.Value, m: Index, n: Index, mask: ir.Value | None) -> ir.Value:
            at = kb.add(kb.add(panel_c.offset, kb.mul(m, c.m)), kb.mul(n, c.n))
            return self.epilogue(acc, m, kb.add(n0, n), at, mask)

        block.finish(accs, last, convert if last else None)

    def _narrow_acc(self, i: int, lanes: int) -> ir.Value:
        """Row i's accumulator of a narrow last vector (one per row and width, for the whole GEMM)."""
        if (i, lanes) not in self._narrow:
            self._narrow[(i, lanes)] = self.kb.alloca(ir.VectorType(I32, lanes))
        return self._narrow[(i, lanes)]

    def _word(self, at: Index, present: int) -> ir.Value:
        """A's group at byte `at` as a 32-bit word in the dot product's operand layout:
        weights as stored; activations widened (bytes, or int16 pairs) and flipped, only the
        `present` k read (the rest zero)."""
        kb, b, dot = self.kb, self.kb.b, self.dot
        widen = self.activations == "a" and dot.packed.itemsize > 1
        if present == dot.group and not widen:
            word = b.load(b.gep(self.a.ptr, [kb.idx(at)], source_etype=I8), typ=I32)
            word.align = 1
            return b.xor(word, ir.Constant(I32, 0x80808080)) if self.flip and self.activations == "a" else word
        word = ir.Constant(I32, 0)
        lane_bits = 32 // dot.group
        for t in range(present):
            byte = kb.load(self.a.ptr, U8, kb.add(at, t))
            if self.flip:
                byte = b.xor(byte, ir.Constant(byte.type, 0x80))
            word = b.or_(word, b.shl(b.zext(byte, I32), ir.Constant(I32, t * lane_bits)))
        return word


def _interleave(kb: KernelBuilder, rows: list[ir.Value]) -> ir.Value:
    """[r0, r1, ...] of `lanes` elements each -> r0[0], r1[0], ..., r0[1], r1[1], ..."""
    lanes, count = rows[0].type.count, len(rows)
    while len(rows) > 1:  # concatenate pairwise: r0|r1, r2|r3, then (r0|r1)|(r2|r3)
        width = rows[0].type.count
        mask = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        rows = [kb.b.shuffle_vector(rows[i], rows[i + 1], mask) for i in range(0, len(rows), 2)]
    order = [t * lanes + lane for lane in range(lanes) for t in range(count)]
    whole = rows[0]
    return kb.b.shuffle_vector(whole, ir.Constant(whole.type, None), ir.Constant(ir.VectorType(I32, len(order)), order))
