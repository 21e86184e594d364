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

from hobbit.target import Target
from hobbit.graph.ir import Node
from hobbit.graph.registry import get_op
from hobbit.graph.shapes import conv_out_size
from hobbit.lower.builder import KernelBuilder
from hobbit.plan.conv import ConvShape, input_rows
from hobbit.lower.copy import emit_fill
from hobbit.lower.depthwise import (SLACK, DepthwiseRows, copy_row, emit_depthwise_rows, emit_rows_direct,
                                    reads_input, row_width)
from hobbit.lower.elementwise import Epilogue
from hobbit.lower.gemm import MatB, MatC, emit_gemm, pack_elems, row_major_a
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.parallel import Threads, band_heights
from hobbit.lower.scalar import Emit
from hobbit.plan.gemm import gemm_schedule


def shapes(node: Node) -> tuple[ConvShape, ConvShape]:
    """The expansion (1x1) and the depthwise conv of a fused node."""
    n, c_in, h, w = node.inputs[0].shape
    c_mid = node.inputs[1].shape[0]
    _, _, kh, kw = node.inputs[3].shape
    a = node.attrs
    oh = conv_out_size(h, kh, a["strides"][0], a["dilations"][0], a["pads"][0] + a["pads"][2])
    ow = conv_out_size(w, kw, a["strides"][1], a["dilations"][1], a["pads"][1] + a["pads"][3])
    expand = ConvShape(n, c_in, h, w, c_mid, 1, 1, h, w, 1, (1, 1), (1, 1), (0, 0, 0, 0))
    depthwise = ConvShape(n, c_mid, h, w, c_mid, kh, kw, oh, ow, c_mid, tuple(a["strides"]),
                          tuple(a["dilations"]), tuple(a["pads"]))
    return expand, depthwise


def projects(node: Node) -> bool:
    """Whether the node also runs the 1x1 projection conv that reads the depthwise output."""
    return len(node.inputs) > 5


def band_rows(d: ConvShape, target: Target) -> int:
    """Most output rows per band: the expanded rows of a band fill at most half of L2."""
    row_bytes = d.c * d.w * 4
    rows = 1
    while rows < d.oh and input_rows(d, rows + 1) * row_bytes <= target.l2_bytes // 2:
        rows += 1
    return rows


def _regions(node: Node, target: Target, threads: int) -> tuple[int, dict[str, int]]:
    """Band rows, and per-thread elements of each scratch region: expanded rows, padded
    plane, expansion GEMM packing, then (with a projection) depthwise rows and their packing."""
    e, d = shapes(node)
    band = min(band_rows(d, target), -(-d.oh // threads))  # each thread's share, at most
    rows = min(input_rows(d, band), d.h)
    plane = 0 if reads_input(d) else input_rows(d, band) * d.padded_hw[1] + SLACK
    sizes = {"mid": e.oc * rows * e.w, "plane": plane,
             "pack": pack_elems(gemm_schedule(e.oc, rows * e.w, e.c, target), e.oc)}
    if projects(node):
        c_out = node.inputs[5].shape[0]
        sizes["dw"] = d.c * band * d.ow
        sizes["pack_out"] = max(pack_elems(gemm_schedule(c_out, r * d.ow, d.c, target), c_out)
                                for r in band_heights(d.oh, band, threads))
    return band, sizes


def scratch_bytes(node: Node, target: Target, threads: int) -> int:
    _, sizes = _regions(node, target, threads)
    return threads * sum(sizes.values()) * np.dtype(node.inputs[0].dtype).itemsize


class _Steps:
    """Operand-free fused steps (an activation), applied like an Epilogue."""

    def __init__(self, steps: tuple):
        self.steps = steps

    def apply(self, e: Emit, x, index=None, mask=None, axis: int = -1):
        for step in self.steps:
            x = get_op(step.op).scalar(e, [x], step.attrs)
        return x


def lower_expand_depthwise(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    x, w1, b1, w2, b2 = k.inputs[:5]
    e, d = shapes(node)
    threads = k.threads.max_threads
    band, sizes = _regions(node, k.target, threads)
    regions, offset = {}, 0
    for name, size in sizes.items():
        regions[name] = k.thread_scratch(offset, size, dtype) if size else None
        offset += threads * size
    mid, plane = regions["mid"], regions["plane"]
    rows = sizes["mid"] // (e.oc * e.w)  # expanded rows held per band (<= H)
    lanes = k.width(dtype)
    zero = kb.const(dtype, 0)
    if plane is not None:
        emit_fill(kb, plane, dtype, 0, sizes["plane"], zero)  # the side columns stay zero for every band
    sched = gemm_schedule(e.oc, rows * e.w, e.c, k.target, np.dtype(dtype).itemsize)
    expand_steps = _Steps(node.attrs["inner"])
    alone = k.threads.alone()

    def process(n, oh0, count: int) -> None:
        ih0 = kb.add(kb.mul(oh0, d.stride[0]), -d.pad[0])
        start = _clamp(kb, ih0, 0, e.h - rows)

        def expand_epilogue(em: Emit, v, m, col, mask):
            return expand_steps.apply(em, em.add(v, kb.splat(kb.load(b1, dtype, m), em.width)))

        b = MatB(x, kb.add(kb.mul(n, e.c * e.h * e.w), kb.mul(start, e.w)), k=e.h * e.w)
        emit_gemm(kb, sched, e.oc, rows * e.w, e.c, row_major_a(w1, 0, e.c, sched.mr), b,
                  MatC(mid, 0, m=rows * e.w), dtype, expand_epilogue, alone, regions["pack"])
        width = row_width(d, lanes)
        if projects(node):
            target = DepthwiseRows(w2, b2, regions["dw"], _Steps(node.attrs["middle"]), dtype, width, count * d.ow)
        else:
            target = DepthwiseRows(w2, b2, k.outputs[0], Epilogue(kb, node, k.epilogue, (d.n, d.oc, d.oh * d.ow)),
                                   dtype, width)
        if plane is None:  # the taps read the expanded rows in place
            with kb.loop(0, d.c, name="c") as c:
                def row_at(ih, c=c):
                    return kb.add(kb.mul(c, rows * e.w), kb.mul(kb.add(ih, kb.mul(start, -1)), e.w))
                if projects(node):
                    emit_rows_direct(kb, d, target, mid, row_at, 0, c, oh0, count, store_row0=0)
                else:
                    emit_rows_direct(kb, d, target, mid, row_at, n, c, oh0, count)
        else:
            _rows_through_plane(kb, d, target, mid, plane, n, oh0, ih0, start, rows, count, projects(node), lanes)
        if projects(node):
            _project(k, d, regions, n, oh0, count, alone)

    k.threads.bands(d.oh, band, process, images=d.n)


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
    w3, b3 = k.inputs[5], k.inputs[6]
    c_out = node.inputs[5].shape[0]
    plane = d.oh * d.ow
    sched = gemm_schedule(c_out, count * d.ow, d.c, k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, (d.n, c_out, plane))
    first = kb.mul(oh0, d.ow)

    def project_epilogue(em: Emit, v, m, col, mask):
        v = em.add(v, kb.splat(kb.load(b3, dtype, m), em.width))
        return epilogue.apply(em, v, [n, m, kb.add(first, col)], mask)

    out = MatC(k.outputs[0], kb.add(kb.mul(n, c_out * plane), first), m=plane)
    emit_gemm(kb, sched, c_out, count * d.ow, d.c, row_major_a(w3, 0, d.c, sched.mr),
              MatB(regions["dw"], 0, k=count * d.ow), out, dtype, project_epilogue, alone, regions.get("pack_out"),
              lambda m, col: epilogue.prefetch([n, m, kb.add(first, col)]))


def _clamp(kb: KernelBuilder, v: ir.Value | int, lo: int, hi: int) -> ir.Value | int:
    """min(max(v, lo), hi) on indices."""
    v = kb.idx(v)
    b = kb.b
    v = b.select(b.icmp_signed("<", v, kb.i64(lo)), kb.i64(lo), v)
    return b.select(b.icmp_signed(">", v, kb.i64(hi)), kb.i64(hi), v)
