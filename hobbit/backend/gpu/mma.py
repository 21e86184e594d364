"""Conv and MatMul on tensor cores (precision "tf32" or "bf16"; tiles from
hobbit/plan/gpu/mma.py): the GEMM kernel's operands, staging and K loop (hobbit.backend.gpu.gemm)
with mma.sync for the multiply and float32 accumulators.

Warp w of the block owns rows (w // WN) * WM .. + WM and columns (w % WN) * WN .. + WN of
the tile as MT x NT mma tiles of 16 x 8. Per k-step of the instruction (8 for TF32, 16 for
bf16) in the staged BK, each thread loads its fragments from the shared tiles in the
layout the PTX ISA gives (g = lane / 4, t = lane % 4; a MmaFormat lists each fragment
element's offset), then issues one mma per tile:

- m16n8k8 .tf32: A's a0..a3 are (row, k) = (g, t), (g+8, t), (g, t+4), (g+8, t+4); B's
  b0, b1 are (k, column) = (t, g), (t+4, g); one element per 32-bit register.
- m16n8k16 .bf16: A's a0..a7 are (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1), then the same
  at k + 8; B's b0..b3 are (2t, g), (2t+1, g), (2t+8, g), (2t+9, g); two elements per
  register, the lower-numbered in the low half.
- Both: the accumulators c0..c3 are (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).

Operands are rounded to the format when they are staged into shared memory (kept as
float32 there), so a fragment is the float32's bits (TF32) or its upper halves, packed.

The host emulation has no warp whose registers the instruction could gather: there the
mma is a phase of its own, after every thread's fragment loads, in which each thread
computes its c0..c3 from the fragments the lanes of its warp loaded, found through the
same layout. So the emulation checks the fragment loads as the hardware would consume
them, not a re-derivation of the product from shared memory."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.backend.gpu.gemm import F32, Operands, Shapes, begin, fma, k_steps, store_inside
from hobbit.backend.gpu.args import GpuArgs
from hobbit.backend.gpu.simt import Private
from hobbit.emit.builder import I32, KernelBuilder, llvm_type
from hobbit.plan.gpu.gemm import GemmDims
from hobbit.plan.gpu.mma import WARP, MmaFormat, MmaTile

C_SLOTS = ((0, 0), (0, 1), (8, 0), (8, 1))  # c0..c3: (row, column) from (g, 2t)


def _special(kb: KernelBuilder, bits: ir.Value) -> ir.Value:
    """Infinity or NaN: kept as they are by the roundings below."""
    exponent = kb.b.and_(bits, ir.Constant(I32, 0x7F800000))
    return kb.b.icmp_unsigned("==", exponent, ir.Constant(I32, 0x7F800000))


def round_tf32(kb: KernelBuilder, x: ir.Value) -> ir.Value:
    """x to TF32's 10 mantissa bits, to nearest with ties away from zero (cvt.rna.tf32.f32),
    kept as a float32 whose 13 low bits are zero."""
    b = kb.b
    bits = b.bitcast(x, I32)
    rounded = b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, -0x2000))
    return b.bitcast(b.select(_special(kb, bits), bits, rounded), llvm_type(F32))


def round_bf16(kb: KernelBuilder, x: ir.Value) -> ir.Value:
    """x to bf16's 7 mantissa bits, to nearest with ties to even (cvt.rn.bf16.f32), kept as
    a float32 whose 16 low bits are zero."""
    b = kb.b
    bits = b.bitcast(x, I32)
    odd = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.and_(b.add(bits, b.add(ir.Constant(I32, 0x7FFF), odd)), ir.Constant(I32, -0x10000))
    return b.bitcast(b.select(_special(kb, bits), bits, rounded), llvm_type(F32))


# The rounding applied to operands of each MmaFormat (by name) when they are staged.
ROUNDING: dict[str, Callable[[KernelBuilder, ir.Value], ir.Value]] = {"tf32": round_tf32, "bf16": round_bf16}


def _lane(kb: KernelBuilder, t: MmaTile, tid: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value]:
    """(first thread of the warp, g, t, the warp's first row and first column in the tile)."""
    b = kb.b
    warp, lane = b.udiv(tid, kb.i64(WARP)), b.urem(tid, kb.i64(WARP))
    row0 = kb.mul(b.udiv(warp, kb.i64(t.wn)), t.warp_m)
    col0 = kb.mul(b.urem(warp, kb.i64(t.wn)), t.warp_n)
    return kb.mul(warp, WARP), b.udiv(lane, kb.i64(4)), b.urem(lane, kb.i64(4)), row0, col0


def _load_fragments(kb: KernelBuilder, s: Shapes, fmt: MmaFormat, frags: tuple[Private, Private], k0: int,
                    tid: ir.Value) -> None:
    """This thread's A and B fragments of k-step k0 .. k0 + fmt.k, element by element."""
    t = s.t
    frag_a, frag_b = frags
    _, g, tq, row0, col0 = _lane(kb, t, tid)
    for mi in range(t.mt):
        for i, (dr, dk) in enumerate(fmt.a):
            row = kb.affine([(row0, 1), (g, 1)], mi * 16 + dr)
            offset = kb.affine([(row, s.a_m), (tq, fmt.step)], k0 + dk)
            frag_a.store(kb.load(s.a_tile, F32, offset), mi * len(fmt.a) + i)
    for ni in range(t.nt):
        for i, dk in enumerate(fmt.b):
            column = kb.affine([(col0, 1), (g, 1)], ni * 8)
            offset = kb.affine([(tq, fmt.step * s.ldb), (column, 1)], (k0 + dk) * s.ldb)
            frag_b.store(kb.load(s.b_tile, F32, offset), ni * len(fmt.b) + i)


def _registers(kb: KernelBuilder, fmt: MmaFormat, frag: Private, first: int, count: int) -> list[ir.Value]:
    """Elements first .. first + count of a fragment as the instruction's 32-bit registers:
    a TF32 element's bits, or two bf16 halves (the first element low)."""
    b = kb.b
    bits = [b.bitcast(frag.load(first + i), I32) for i in range(count)]
    if fmt.k_step == 1:
        return bits
    high = ir.Constant(I32, -0x10000)
    return [b.or_(b.lshr(bits[i], ir.Constant(I32, 16)), b.and_(bits[i + 1], high)) for i in range(0, count, 2)]


def _mma(kb: KernelBuilder, t: MmaTile, fmt: MmaFormat, acc: Private, frags: tuple[Private, Private]) -> None:
    """acc += A B per mma tile: the instruction, on the warp's fragments."""
    frag_a, frag_b = frags
    result = ir.LiteralStructType([llvm_type(F32)] * 4)
    na, nb = len(fmt.a), len(fmt.b)
    for mi in range(t.mt):
        for ni in range(t.nt):
            q0 = (mi * t.nt + ni) * 4
            operands = (_registers(kb, fmt, frag_a, mi * na, na) + _registers(kb, fmt, frag_b, ni * nb, nb)
                        + [acc.load(q0 + r) for r in range(4)])
            d = kb.call_intrinsic(fmt.micro, result, operands)
            for r in range(4):
                acc.store(kb.b.extract_value(d, r), q0 + r)


def _mma_emulated(kb: KernelBuilder, t: MmaTile, fmt: MmaFormat, acc: Private, frags: tuple[Private, Private],
                  tid: ir.Value) -> None:
    """The host's mma: this thread's c0..c3 of each tile from its warp's fragments. A's
    (g + dr, k) is in the fragment of lane g*4 + t' (MmaFormat.source), B's (k, c) in lane c*4 + t'."""
    frag_a, frag_b = frags
    first, g, tq, _, _ = _lane(kb, t, tid)
    na, nb = len(fmt.a), len(fmt.b)
    for mi in range(t.mt):
        for ni in range(t.nt):
            for r, (dr, dc) in enumerate(C_SLOTS):
                q = (mi * t.nt + ni) * 4 + r
                x = acc.load(q)
                for kk in range(fmt.k):
                    ta, ia = fmt.source(fmt.a, kk, dr)
                    tb, ib = fmt.source(fmt.b, kk)
                    a = frag_a.load_of(kb.affine([(first, 1), (g, 4)], ta), mi * na + ia)
                    b = frag_b.load_of(kb.affine([(first, 1), (tq, 8)], dc * 4 + tb), ni * nb + ib)
                    x = fma(kb, a, b, x)
                acc.store(x, q)


def emit_mma_gemm(k: GpuArgs, t: MmaTile, fmt: MmaFormat, dims: GemmDims, ops: Operands) -> None:
    kb, simt = k.kb, k.simt
    if t.threads != simt.threads or simt.threads % t.bn or k.target.warp != WARP:
        raise CodegenError(f"tensor-core tile {t} does not match a block of {simt.threads} threads "
                           f"in warps of {k.target.warp}")
    s = Shapes(t, dims, simt.shared(F32, t.bm * t.lda, "a"), simt.shared(F32, t.bk * t.ldb, "b"),
               kb.mul(simt.block(1), t.bm), kb.mul(simt.block(0), t.bn), a_m=t.lda, a_k=1, ldb=t.ldb,
               to_shared=ROUNDING[fmt.name])
    acc = simt.private(F32, t.accumulators)
    frags = (simt.private(F32, t.mt * len(fmt.a)), simt.private(F32, t.nt * len(fmt.b)))
    cols, staged = begin(k, s, ops, acc)

    def multiply() -> None:
        steps = t.bk // fmt.k
        for step in range(steps):
            with simt.phase(sync=False) as tid:
                _load_fragments(kb, s, fmt, frags, step * fmt.k, tid)
            with simt.phase(sync=step == steps - 1) as tid:
                if simt.flavour == "host":
                    _mma_emulated(kb, t, fmt, acc, frags, tid)
                else:
                    _mma(kb, t, fmt, acc, frags)

    k_steps(k, s, ops, cols, staged, multiply)

    with simt.phase(sync=False) as tid:
        _, g, tq, row0, col0 = _lane(kb, t, tid)
        for mi in range(t.mt):
            for ni in range(t.nt):
                for r, (dr, dc) in enumerate(C_SLOTS):
                    m = kb.affine([(s.m0, 1), (row0, 1), (g, 1)], mi * 16 + dr)
                    n = kb.affine([(s.n0, 1), (col0, 1), (tq, 2)], ni * 8 + dc)
                    store_inside(kb, s, ops, m, n, acc.load((mi * t.nt + ni) * 4 + r))
