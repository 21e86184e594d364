"""2-D convolution in bf16 (hobbit.plan.conv_bf16: the variants), on the bf16 GEMM.

The same loops as the float32 conv (hobbit.backend.cpu.conv): the weights are the bf16 pass's
pairs, the input is converted to pairs where the GEMM packs it (or, for "KO" weights,
after the im2col, into the shared A), and bias and fused epilogue steps apply to the
float32 accumulators before the single store."""

from __future__ import annotations

from hobbit.emit.epilogue import Epilogue
from hobbit.backend.cpu.gemm import MatA, MatB, MatC
from hobbit.backend.cpu.gemm_bf16 import FLOAT32, WORD, emit_gemm_bf16, rows_to_pairs
from hobbit.backend.cpu.im2col import im2col
from hobbit.backend.cpu.args import KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.plan.conv_bf16 import ConvBf16Plan
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.gemm_bf16 import pairs


def lower_conv_bf16(k: KernelArgs, plan: ConvBf16Plan) -> None:
    {"gemm": _gemm_conv, "im2col": _blocked_im2col_conv}[plan.variant](k, plan)


def _gemm_conv(k: KernelArgs, plan: ConvBf16Plan) -> None:
    """Per image and group: one GEMM (after an im2col and a conversion to pairs with "KO"
    weights, whose GEMM runs rows along positions and vectors along output channels)."""
    kb, node, s, sched = k.kb, k.node, plan.shape, plan.gemm
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    kp = pairs(K)
    by_channel = plan.by_channel
    rows, cols = (P, s.ocg) if by_channel else (s.ocg, P)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    with kb.loop(0, s.n, name="n") as n, kb.loop(0, s.group, name="g") as g:
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        oc0 = kb.mul(g, s.ocg)
        y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        pack = None
        if by_channel:
            src, src_off = x, x_off
            if not s.pointwise:
                im2col(kb, s, x, x_off, k.scratch, FLOAT32, k.threads)
                k.threads.sync()
                src, src_off = k.scratch, 0
            words = kb.gep(k.scratch, WORD, plan.col)
            rows_to_pairs(kb, src, src_off, K, P, words, k.threads)
            k.threads.sync()
            a = MatA(words, 0, panel=sched.mr, k=P, m=1)
            b = MatB(w, 0, k=sched.nr, panel=kp * sched.nr)  # packed panels; KO implies one group
            partial = MatC(k.scratch, plan.col + plan.words, m=s.ocg) if kp > sched.kc else None
            c = MatC(k.outputs[0], y_off, m=1, n=P, partial=partial)
        else:
            a = MatA(w, kb.mul(oc0, kp), panel=sched.mr * kp, k=1, m=kp)
            b = MatB(x, x_off, k=P)
            c = MatC(k.outputs[0], y_off, m=P)
            pack = k.thread_scratch(0, plan.pack, FLOAT32)

        def epi(e: Emit, v, m, col, mask, n=n, oc0=oc0):
            if by_channel:
                oc, p = kb.add(oc0, col), m
                if bias is not None:
                    v = e.add(v, kb.vload(bias, FLOAT32, oc, e.width, mask))
                return epilogue.apply(e, v, [n, oc, p], mask, axis=1)
            oc, p = kb.add(oc0, m), col
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, FLOAT32, oc), e.width))
            return epilogue.apply(e, v, [n, oc, p], mask)

        def touch(m, col, n=n, oc0=oc0):
            epilogue.prefetch([n, kb.add(oc0, m), col])

        emit_gemm_bf16(kb, sched, rows, cols, K, a, b, c, epi, k.threads, pack, None if by_channel else touch)
        if by_channel and s.n * s.group > 1:
            k.threads.sync()  # the next image's conversion overwrites the pairs others may still read


def _blocked_im2col_conv(k: KernelArgs, plan: ConvBf16Plan) -> None:
    """im2col + bf16 GEMM over blocks of output rows, each thread in its own scratch (as the
    float32 conv); the GEMM's packing step converts the block's columns to pairs."""
    kb, node, s = k.kb, k.node, plan.shape
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    kp = pairs(K)
    col = k.thread_scratch(0, plan.col, FLOAT32)
    pack = k.thread_scratch(plan.col * plan.threads, plan.pack, FLOAT32)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    alone = k.threads.alone()

    def block(image, oh0, count: int) -> None:
        """Rows oh0 .. oh0 + count of image `image` = (batch item, group)."""
        n, g = kb.b.udiv(image, kb.i64(s.group)), kb.b.urem(image, kb.i64(s.group))
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        oc0 = kb.mul(g, s.ocg)
        y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        im2col(kb, s, x, x_off, col, FLOAT32, alone, oh0, count)
        sched = gemm_schedule(s.ocg, count * s.ow, kp, k.target)
        a = MatA(w, kb.mul(oc0, kp), panel=sched.mr * kp, k=1, m=kp)
        b = MatB(col, 0, k=count * s.ow)
        c = MatC(k.outputs[0], kb.add(y_off, kb.mul(oh0, s.ow)), m=P)

        def epi(e: Emit, v, m, col_index, mask):
            oc = kb.add(oc0, m)
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, FLOAT32, oc), e.width))
            return epilogue.apply(e, v, [n, oc, kb.add(kb.mul(oh0, s.ow), col_index)], mask)

        def touch(m, col_index):
            epilogue.prefetch([n, kb.add(oc0, m), kb.add(kb.mul(oh0, s.ow), col_index)])

        emit_gemm_bf16(kb, sched, s.ocg, count * s.ow, K, a, b, c, epi, alone, pack, touch)

    k.threads.bands(s.oh, plan.rows, block, images=s.n * s.group)
