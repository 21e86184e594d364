"""3x3 stride-1 convolution by Winograd F(2x2, 3x3).

Each 2x2 block of outputs ("tile") needs a 4x4 patch of input. Transformed,
the 9 multiply-adds per output become 16 per 4 outputs (2.25x fewer), done as
16 independent GEMMs  M[xi] (OC x T) = U[xi] (OC x C) @ V[xi] (C x T)  over the
T tiles, on the same microkernel as every other conv. Phases per image:

1. copy the input into a zero-padded plane per channel (no bounds checks after);
2. V = B^T d B for every channel and tile (split over channels across threads);
3. the 16 GEMMs;
4. Y = A^T m A per tile, bias and the fused epilogue, stored into NCHW.

The weights U = G g G^T are transformed at compile time (passes/winograd.py)."""

from __future__ import annotations

import numpy as np

from hobbit.lower.builder import KernelBuilder
from hobbit.lower.conv import ConvShape, conv_shape, fill
from hobbit.lower.elementwise import Epilogue
from hobbit.lower.gemm import MatB, MatC, emit_gemm, row_major_a
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.scalar import Emit
from hobbit.lower.schedule import gemm_schedule

# Transform matrices of F(2x2, 3x3).
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


def transform_weights(w: np.ndarray) -> np.ndarray:
    """[OC, C, 3, 3] -> U[16, OC, C] with U[i*4+j] = (G g G^T)[i, j]."""
    u = np.einsum("ik,ockl,jl->ijoc", G, w.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1])).astype(w.dtype)


def tiles(s: ConvShape) -> tuple[int, int]:
    return -(-s.oh // 2), -(-s.ow // 2)


def plane_hw(s: ConvShape) -> tuple[int, int]:
    """Padded plane big enough that every tile's 4x4 patch is in bounds."""
    th, tw = tiles(s)
    return 2 * th + 2, 2 * tw + 2


def scratch_layout(s: ConvShape) -> tuple[int, int, int]:
    """Element offsets of the padded planes, V and M in scratch, and the total."""
    th, tw = tiles(s)
    ph, pw = plane_hw(s)
    t = th * tw
    v_off = s.c * ph * pw
    m_off = v_off + 16 * s.c * t
    return v_off, m_off, m_off + 16 * s.oc * t


def lower_winograd(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    s = conv_shape(node)
    dtype = node.inputs[0].dtype
    x, u, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    th, tw = tiles(s)
    t = th * tw
    v_off, m_off, _ = scratch_layout(s)
    sched = gemm_schedule(s.oc, t, s.c, k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, s.oh * s.ow))
    with kb.loop(0, s.n, name="n") as n:
        _input_transform(kb, k, s, x, n, v_off, dtype)
        k.threads.barrier()
        with kb.loop(0, 16, name="xi") as xi:
            a = row_major_a(u, kb.mul(xi, s.oc * s.c), s.c, sched.mr)
            b = MatB(k.scratch, kb.add(v_off, kb.mul(xi, s.c * t)), k=t)
            c = MatC(k.scratch, kb.add(m_off, kb.mul(xi, s.oc * t)), m=t)
            emit_gemm(kb, sched, s.oc, t, s.c, a, b, c, dtype, None, k.threads)
        k.threads.barrier()
        _output_transform(kb, k, s, bias, n, m_off, dtype, epilogue)
        k.threads.barrier()


def _input_transform(kb: KernelBuilder, k: KernelArgs, s: ConvShape, x, n, v_off: int, dtype) -> None:
    th, tw = tiles(s)
    ph, pw = plane_hw(s)
    t = th * tw
    pad = k.scratch
    e = Emit(kb, dtype, 1)
    c_lo, c_hi = k.threads.split(s.c)
    with kb.loop(c_lo, c_hi, name="c") as c:
        plane = kb.mul(c, ph * pw)
        fill(kb, pad, dtype, plane, 0, ph * pw, kb.const(dtype, 0))
        src = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
        rows = min(s.h, ph - s.pad[0])
        cols = min(s.w, pw - s.pad[1])
        with kb.loop(0, rows, name="ih") as ih:
            dst = kb.add(plane, kb.mul(kb.add(ih, s.pad[0]), pw))
            with kb.loop(0, cols, name="iw") as iw:
                v = kb.load(x, dtype, kb.add(src, kb.add(kb.mul(ih, s.w), iw)))
                kb.store(v, pad, dtype, kb.add(dst, kb.add(iw, s.pad[1])))
        with kb.loop(0, th, name="th") as ti, kb.loop(0, tw, name="tw") as tj:
            base = kb.add(plane, kb.add(kb.mul(ti, 2 * pw), kb.mul(tj, 2)))
            d = [[kb.load(pad, dtype, kb.add(base, i * pw + j)) for j in range(4)] for i in range(4)]
            rows_t = [[_combine(e, BT[r], [d[i][j] for i in range(4)]) for j in range(4)] for r in range(4)]
            tile = kb.add(kb.mul(ti, tw), tj)
            for r in range(4):
                for col in range(4):
                    value = _combine(e, BT[col], rows_t[r])
                    offset = kb.add(v_off, kb.add(kb.mul(c, t), tile))
                    kb.store(value, pad, dtype, kb.add(offset, (r * 4 + col) * s.c * t))


def _output_transform(kb: KernelBuilder, k: KernelArgs, s: ConvShape, bias, n, m_off: int, dtype,
                      epilogue: Epilogue) -> None:
    th, tw = tiles(s)
    t = th * tw
    e = Emit(kb, dtype, 1)
    o_lo, o_hi = k.threads.split(s.oc)
    with kb.loop(o_lo, o_hi, name="oc") as oc:
        b0 = kb.load(bias, dtype, oc) if bias is not None else kb.const(dtype, 0)
        out_base = kb.mul(kb.add(kb.mul(n, s.oc), oc), s.oh * s.ow)

        def tile(ti, tj, out_rows: int, out_cols: int) -> None:
            index = kb.add(kb.add(m_off, kb.mul(oc, t)), kb.add(kb.mul(ti, tw), tj))
            m = [[kb.load(k.scratch, dtype, kb.add(index, (i * 4 + j) * s.oc * t)) for j in range(4)]
                 for i in range(4)]
            rows = [[_combine(e, AT[r], [m[i][j] for i in range(4)]) for j in range(4)] for r in range(2)]
            for r in range(out_rows):
                for col in range(out_cols):
                    y = e.add(_combine(e, AT[col], rows[r]), b0)
                    p = kb.add(kb.mul(kb.add(kb.mul(ti, 2), r), s.ow), kb.add(kb.mul(tj, 2), col))
                    y = epilogue.apply(e, y, [n, oc, p])
                    kb.store(y, k.outputs[0], dtype, kb.add(out_base, p))

        def tile_row(ti, out_rows: int) -> None:
            with kb.loop(0, s.ow // 2, name="tw") as tj:
                tile(ti, tj, out_rows, 2)
            if s.ow % 2:
                tile(ti, s.ow // 2, out_rows, 1)

        with kb.loop(0, s.oh // 2, name="th") as ti:
            tile_row(ti, 2)
        if s.oh % 2:
            tile_row(s.oh // 2, 1)


def _combine(e: Emit, coefs, values):
    """sum(coef * value) for coefficients in {0, ±1, ±0.5}, without multiplying by ±1."""
    acc = None
    for coef, v in zip(coefs, values):
        if coef == 0:
            continue
        term = v if abs(coef) == 1 else e.mul(v, e.c(abs(coef)))
        if acc is None:
            acc = term if coef > 0 else e.neg(term)
        else:
            acc = e.add(acc, term) if coef > 0 else e.sub(acc, term)
    return acc if acc is not None else e.c(0.0)
