"""QConv: int8 convolution on the target's integer dot product (hobbit.plan.int8 says which
and why it is exact), with the requantization in the epilogue.

Threads take bands of output rows (Threads.bands, work stealing under load). For each band
a thread lowers the input rows by im2col into its own scratch (a 1x1 stride-1 conv reads
its input rows in place), then runs the band as a GEMM on the int8 GEMM driver
(hobbit.backend.cpu.gemm_dot): rows are the group's output channels (weights, one broadcast
32-bit word per group of k, stored in panels of MR channels: hobbit.plan.int8.panel_filters),
columns the band's positions, packed panel by panel of NR into the dot product's layout;
int32 accumulators. Where bands of rows would split the positions badly among several
threads (a 7x7 output: hobbit.plan.int8.split_of), the threads share one im2col of the
whole image and then one GEMM, which the driver splits (share_gemm: by output channels).
The epilogue adds the offset (bias and zero-point compensation), scales by the per-channel
multiplier in float32, rounds half to even, adds the output zero point, clamps (Relu/Clip
fold into the bounds) and stores bytes."""

from __future__ import annotations

import numpy as np

from hobbit.backend.cpu.conv import im2col
from hobbit.backend.cpu.gemm import Index, MatA, MatB, MatC, share_gemm
from hobbit.backend.cpu.gemm_dot import DotGemm
from hobbit.backend.cpu.int8_depthwise import lower_qconv_depthwise
from hobbit.backend.cpu.int8_vector import U8, ConvEpilogue
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.errors import CodegenError
from hobbit.plan.int8 import Int8ConvPlan


def lower_qconv(k: KernelArgs) -> None:
    plan: Int8ConvPlan = k.plan
    if plan.variant == "depthwise":
        lower_qconv_depthwise(k, plan)
        return
    kb, node, s = k.kb, k.node, plan.shape
    x, w = k.inputs[:2]
    x_dtype = np.dtype(node.inputs[0].dtype)
    positions = s.oh * s.ow
    image = plan.split == "image"
    col = (k.scratch if image else k.thread_scratch(0, plan.col, U8)) if plan.col else None
    pack = k.thread_scratch(plan.pack_offset, plan.pack, U8)
    alone = k.threads.alone()
    epilogue = ConvEpilogue(kb, node, k.inputs, k.outputs[0])
    fill = epilogue.fill()
    row = plan.weight_row * plan.dot.weights.itemsize  # bytes of one output channel's weights
    mr, word = plan.gemm.mr, plan.dot.group * plan.dot.weights.itemsize  # word: one group of k
    panels = bool(node.attrs.get("weight_panel", 0))  # in panels of MR rows (hobbit.plan.int8.panel_filters)
    if panels and node.attrs["weight_panel"] != mr:
        raise CodegenError(f"QConv '{node.name}': weights in panels of {node.attrs['weight_panel']} rows, "
                           f"the GEMM's blocks are {mr}")
    group_rows = -(-s.ocg // mr) * mr if panels else s.ocg  # stored rows per group of the conv

    def band(image, oh0, count: int, threads=alone) -> None:
        n, g = kb.b.udiv(image, kb.i64(s.group)), kb.b.urem(image, kb.i64(s.group))
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        if col is None:
            source, start, stride = x, kb.add(x_off, kb.mul(oh0, s.ow)), s.h * s.w
        else:
            im2col(kb, s, x, x_off, col, x_dtype, threads, oh0, count, fill=fill)
            threads.sync()
            source, start, stride = col, 0, count * s.ow
        oc0 = kb.mul(g, s.ocg)
        y_off = kb.add(kb.mul(n, s.oc * positions), kb.mul(oh0, s.ow))  # channel oc's row is at y_off + oc*P
        c = MatC(k.outputs[0], kb.add(y_off, kb.mul(oc0, positions)), m=positions)

        def requantize(acc, m: Index, n: Index, at: Index, mask):
            return epilogue.convert(acc, kb.add(oc0, m), at, mask)

        gemm = DotGemm(kb, plan.gemm, plan.dot, s.ocg, count * s.ow, plan.k,
                       MatA(w, kb.mul(g, group_rows * row), panel=mr * row, k=mr * word if panels else word,
                            m=word if panels else row), MatB(source, start, k=stride), c,
                       epilogue.dtype, requantize, pack, "b", x_dtype == np.int8, plan.narrow)
        if threads is alone:
            gemm.chunks((0, -(-count * s.ow // gemm.s.nr)), (0, -(-s.ocg // mr)))
        else:
            share_gemm(gemm, threads)

    if image:  # one image, one group (hobbit.plan.int8.split_of)
        band(kb.i64(0), 0, s.oh, k.threads)
    else:
        k.threads.bands(s.oh, plan.rows, band, images=s.n * s.group)


CPU.register("QConv", lower=lower_qconv)
CPU.register("QConvInteger", lower=lower_qconv)
