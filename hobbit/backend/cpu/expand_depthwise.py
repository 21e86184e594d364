"""A 1x1 expansion conv and the depthwise conv that reads it (and optionally the 1x1
projection conv that reads the depthwise output), as one kernel.

In MobileNet-style blocks the 1x1 conv widens the channels (16 -> 96 at
112x112 in MobileNetV2) and a depthwise conv reads the wide tensor once: as two
kernels, megabytes go to memory and come straight back. Here each thread works
on bands of depthwise output rows: it computes the expansion (GEMM, bias and
its fused activation) for just the input rows the band needs into an L2-sized
buffer, then runs the depthwise rows channel by channel from that buffer
through a small padded plane. With a projection, the band's depthwise rows go
to a second buffer and one more GEMM writes the block's output rows, so neither
wide tensor of a MobileNet inverted-residual block leaves the caches. Rows
shared by neighbouring bands are computed twice; the band height keeps that
share small."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.plan.conv import ConvShape, input_rows
from hobbit.backend.cpu.copy import emit_fill
from hobbit.backend.cpu.depthwise import DepthwiseRows, copy_row, emit_depthwise_rows, emit_rows_direct, row_width
from hobbit.emit.epilogue import Epilogue, scalar_expr
from hobbit.backend.cpu.gemm import MatB, MatC, emit_gemm, row_major_a
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.scalar import Emit
from hobbit.plan.expand_depthwise import ExpandDepthwisePlan
from hobbit.plan.format import Format
from hobbit.plan.gemm import gemm_schedule


class _Steps:
    """Operand-free fused steps (an activation), applied like an Epilogue."""

    def __init__(self, steps: tuple):
        self.steps = steps

    def apply(self, e: Emit, x, index=None, mask=None, axis: int = -1):
        for step in self.steps:
            x = scalar_expr(step.op)(e, [x], step.attrs)
        return x


def lower_expand_depthwise(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    x, w1, b1, w2, b2 = k.inputs[:5]
    plan: ExpandDepthwisePlan = k.plan
    e, d, rows = plan.expand, plan.depthwise, plan.rows
    regions, offset = {}, 0
    for name, size in plan.regions:
        regions[name] = k.thread_scratch(offset, size, dtype) if size else None
        offset += plan.threads * size
    mid, plane = regions["mid"], regions["plane"]
    lanes = k.width(dtype)
    zero = kb.const(dtype, 0)
    if plane is not None:
        emit_fill(kb, plane, dtype, 0, plan.plane, zero)  # the side columns stay zero for every band
    fmt = plan.format
    sched = gemm_schedule(e.oc, rows * e.w, fmt.steps(e.c), k.target, np.dtype(dtype).itemsize)
    expand_steps = _Steps(node.attrs["inner"])
    alone = k.threads.alone()

    def process(n, oh0, count: int) -> None:
        ih0 = kb.add(kb.mul(oh0, d.stride[0]), -d.pad[0])
        start = _clamp(kb, ih0, 0, e.h - rows)

        def expand_epilogue(em: Emit, v, m, col, mask):
            return expand_steps.apply(em, em.add(v, kb.splat(kb.load(b1, dtype, m), em.width)))

        b = MatB(x, kb.add(kb.mul(n, e.c * e.h * e.w), kb.mul(start, e.w)), k=e.h * e.w)
        emit_gemm(kb, sched, e.oc, rows * e.w, e.c, row_major_a(w1, 0, fmt.steps(e.c), sched.mr), b,
                  MatC(mid, 0, m=rows * e.w), fmt, expand_epilogue, alone, regions["pack"])
        width = row_width(d, lanes)
        if plan.projects:
            target = DepthwiseRows(w2, b2, regions["dw"], _Steps(node.attrs["middle"]), dtype, width, count * d.ow)
        else:
            target = DepthwiseRows(w2, b2, k.outputs[0], Epilogue(kb, node, k.epilogue, (d.n, d.oc, d.oh * d.ow)),
                                   dtype, width)
        if plane is None:  # the taps read the expanded rows in place
            with kb.loop(0, d.c, name="c") as c:
                def row_at(ih, c=c):
                    return kb.add(kb.mul(c, rows * e.w), kb.mul(kb.add(ih, kb.mul(start, -1)), e.w))
                if plan.projects:
                    emit_rows_direct(kb, d, target, mid, row_at, 0, c, oh0, count, store_row0=0)
                else:
                    emit_rows_direct(kb, d, target, mid, row_at, n, c, oh0, count)
        else:
            _rows_through_plane(kb, d, target, mid, plane, n, oh0, ih0, start, rows, count, plan.projects, lanes)
        if plan.projects:
            _project(k, d, regions, n, oh0, count, alone)

    k.threads.bands(d.oh, plan.band, process, images=d.n)


def _rows_through_plane(kb: KernelBuilder, d: ConvShape, target: DepthwiseRows, mid, plane, n, oh0, ih0, start,
                        rows: int, count: int, projects: bool, lanes: int) -> None:
    """The band's depthwise rows via a zero-padded plane, one channel at a time (strides
    the taps cannot read in place)."""
    dtype = target.dtype
    zero = kb.const(dtype, 0)
    _, wp = d.padded_hw
    used = input_rows(d, count)
    # Plane rows j hold input row ih0 + j: those outside the image are zero.
    j_lo = _clamp(kb, kb.mul(ih0, -1), 0, used)
    j_hi = _clamp(kb, kb.add(d.h, kb.mul(ih0, -1)), 0, used)
    with kb.loop(0, j_lo, name="top") as j:
        emit_fill(kb, plane, dtype, 0, wp, zero, base=kb.mul(j, wp))
    with kb.loop(j_hi, used, name="bottom") as j:
        emit_fill(kb, plane, dtype, 0, wp, zero, base=kb.mul(j, wp))
    with kb.loop(0, d.c, name="c") as c:
        with kb.loop(j_lo, j_hi, name="j") as j:
            src = kb.add(kb.mul(c, rows * d.w), kb.mul(kb.add(kb.add(ih0, j), kb.mul(start, -1)), d.w))
            copy_row(kb, d, mid, src, plane, j, dtype, lanes)
        if projects:
            emit_depthwise_rows(kb, d, target, plane, 0, c, 0, count)
        else:
            emit_depthwise_rows(kb, d, target, plane, n, c, oh0, count)


def _project(k: KernelArgs, d: ConvShape, regions: dict, n, oh0, count: int, alone: Threads) -> None:
    """The projection GEMM of one band: [C_out, C_mid] @ the band's depthwise rows, with its
    bias and the node's epilogue (e.g. the residual Add), stored into the output rows."""
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    fmt: Format = k.plan.format
    w3, b3 = k.inputs[5], k.inputs[6]
    c_out = node.inputs[5].shape[0]
    plane = d.oh * d.ow
    sched = gemm_schedule(c_out, count * d.ow, fmt.steps(d.c), k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, (d.n, c_out, plane))
    first = kb.mul(oh0, d.ow)

    def project_epilogue(em: Emit, v, m, col, mask):
        v = em.add(v, kb.splat(kb.load(b3, dtype, m), em.width))
        return epilogue.apply(em, v, [n, m, kb.add(first, col)], mask)

    out = MatC(k.outputs[0], kb.add(kb.mul(n, c_out * plane), first), m=plane)
    emit_gemm(kb, sched, c_out, count * d.ow, d.c, row_major_a(w3, 0, fmt.steps(d.c), sched.mr),
              MatB(regions["dw"], 0, k=count * d.ow), out, fmt, project_epilogue, alone,
              regions["pack_out"],
              lambda m, col: epilogue.prefetch([n, m, kb.add(first, col)]))


def _clamp(kb: KernelBuilder, v: ir.Value | int, lo: int, hi: int) -> ir.Value | int:
    """min(max(v, lo), hi) on indices."""
    v = kb.idx(v)
    b = kb.b
    v = b.select(b.icmp_signed("<", v, kb.i64(lo)), kb.i64(lo), v)
    return b.select(b.icmp_signed(">", v, kb.i64(hi)), kb.i64(hi), v)


CPU.register("ExpandDepthwise", lower=lower_expand_depthwise)
