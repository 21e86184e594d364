"""The RoiAlign kernel (hobbit/ops/roialign.py has the rules it follows).

Work is shared out in units of (roi, block of channels). A unit computes its roi's
geometry once; then, per bin and per sample, the sample's four neighbour positions and
weights once for all the block's channels, which accumulate in a small array on the
stack. Sample coordinates are computed without contraction, in onnxruntime's order:
the grid size is a ceil and the edge tests are comparisons, so a coordinate that
differed in its last bit could move a whole sample.

With bounded rois (input 3, their run-time count) the units are counted at run time,
so threads share the valid rois only. Batch indices are data: one outside [0, N) is
reported (hobbit.emit.status) and clamped, and every neighbour position is within
the map by construction, so the kernel never reads outside X."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.backend.cpu.index import clamp, load_index
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.emit.status import check_range

I64 = np.dtype(np.int64)
CHANNEL_BLOCK = 32  # channels sharing one sample's positions and weights


def _axis_sample(kb: KernelBuilder, e: Emit, coord: ir.Value, size: int) -> tuple[ir.Value, ...]:
    """One sample coordinate along an axis of `size` pixels: whether it is outside the map,
    its low and high neighbours, and their weights (1 - frac, frac)."""
    b = kb.b
    outside = b.or_(b.fcmp_ordered("<", coord, e.c(-1.0)), b.fcmp_ordered(">", coord, e.c(float(size))))
    coord = b.select(b.fcmp_ordered("<=", coord, e.c(0.0)), e.c(0.0), coord)
    low = e.convert(coord, I64)  # coord >= 0 (or NaN, which saturates to 0): truncation is floor
    edge = b.icmp_signed(">=", low, kb.i64(size - 1))
    high = b.select(edge, kb.i64(size - 1), b.add(low, kb.i64(1)))
    low = b.select(edge, kb.i64(size - 1), low)
    low_f = b.sitofp(low, coord.type)
    coord = b.select(edge, low_f, coord)
    frac = b.fsub(coord, low_f)
    return outside, low, high, b.fsub(e.c(1.0), frac), frac


def _roi_axes(kb: KernelBuilder, e: Emit, rois: ir.Value, roi: ir.Value, a: dict) -> list[tuple]:
    """(start, bin size, samples per bin) along y and x of roi `roi`."""
    b = kb.b
    offset = e.c(0.5 if a["half_pixel"] else 0.0)
    scale = e.c(a["spatial_scale"])
    corner = [b.fsub(b.fmul(kb.load(rois, e.dtype, kb.add(kb.mul(roi, 4), j)), scale), offset) for j in range(4)]
    axes = []
    for start, end, bins in ((corner[1], corner[3], a["output_height"]), (corner[0], corner[2], a["output_width"])):
        size = b.fsub(end, start)
        if not a["half_pixel"]:
            size = b.select(b.fcmp_ordered("<", size, e.c(1.0)), e.c(1.0), size)  # malformed rois are 1x1
        bin_size = b.fdiv(size, e.c(float(bins)))
        grid = kb.i64(a["sampling_ratio"]) if a["sampling_ratio"] > 0 else e.convert(e.ceil(bin_size), I64)
        axes.append((start, bin_size, grid))
    return axes


def lower_roialign(k: KernelArgs) -> None:
    kb, node, a = k.kb, k.node, k.node.attrs
    b = kb.b
    xv, _, indices = node.inputs[:3]
    dtype = np.dtype(xv.dtype)
    n, c, h, w = xv.shape
    r, _, oh, ow = node.outputs[0].shape
    if node.outputs[0].type.size == 0:
        return
    e = Emit(kb, dtype, 1)
    ty = llvm_type(dtype)
    count = r if k.inputs[3] is None else clamp(kb, kb.load(k.inputs[3], I64), 0, r)
    block = min(c, CHANNEL_BLOCK)
    blocks = -(-c // block)
    acc = b.bitcast(kb.alloca(ir.ArrayType(ty, block)), ty.as_pointer())
    average = a["mode"] == "avg"

    lo, hi = k.threads.split(kb.mul(count, blocks))
    with kb.loop(lo, hi, name="unit") as unit:
        roi = kb.udiv(unit, blocks)
        first_c = kb.mul(b.urem(unit, kb.i64(blocks)), block)
        last_c = kb.imin(kb.add(first_c, block), c)
        raw = load_index(kb, k.inputs[2], indices.dtype, roi)
        check_range(kb, raw, 0, n - 1, "index")
        image_c = kb.mul(clamp(kb, raw, 0, n - 1), c)
        (start_h, bin_h, grid_h), (start_w, bin_w, grid_w) = _roi_axes(kb, e, k.inputs[1], roi, a)
        grid_h_f, grid_w_f = b.sitofp(grid_h, ty), b.sitofp(grid_w, ty)
        samples = b.mul(grid_h, grid_w)
        samples_f = b.sitofp(b.select(b.icmp_signed("<", samples, kb.i64(1)), kb.i64(1), samples), ty)
        out_roi = kb.mul(roi, c * oh * ow)
        with kb.loop(0, oh, name="ph") as ph:
            y_bin = b.fadd(start_h, b.fmul(b.sitofp(ph, ty), bin_h))
            with kb.loop(0, ow, name="pw") as pw:
                x_bin = b.fadd(start_w, b.fmul(b.sitofp(pw, ty), bin_w))
                with kb.loop(first_c, last_c, name="zero") as ch:
                    kb.store(e.c(0.0), acc, dtype, b.sub(ch, first_c))
                with kb.loop(0, grid_h, name="iy") as iy:
                    y = b.fadd(y_bin, b.fdiv(b.fmul(b.fadd(b.sitofp(iy, ty), e.c(0.5)), bin_h), grid_h_f))
                    out_y, y_lo, y_hi, hy, ly = _axis_sample(kb, e, y, h)
                    with kb.loop(0, grid_w, name="ix") as ix:
                        x = b.fadd(x_bin, b.fdiv(b.fmul(b.fadd(b.sitofp(ix, ty), e.c(0.5)), bin_w), grid_w_f))
                        out_x, x_lo, x_hi, hx, lx = _axis_sample(kb, e, x, w)
                        inside = b.not_(b.or_(out_y, out_x))
                        taps = []
                        for row, wy in ((y_lo, hy), (y_hi, ly)):
                            for col, wx in ((x_lo, hx), (x_hi, lx)):
                                at = b.select(inside, b.add(b.mul(row, kb.i64(w)), col), kb.i64(0))
                                taps.append((at, b.select(inside, b.fmul(wy, wx), e.c(0.0))))
                        first = b.and_(b.icmp_signed("==", iy, kb.i64(0)), b.icmp_signed("==", ix, kb.i64(0)))
                        with kb.loop(first_c, last_c, name="c") as ch:
                            plane = kb.mul(kb.add(image_c, ch), h * w)
                            terms = [e.mul(wt, kb.load(k.inputs[0], dtype, kb.add(plane, at))) for at, wt in taps]
                            slot = b.sub(ch, first_c)
                            held = kb.load(acc, dtype, slot)
                            if average:
                                value = e.add(held, e.add(e.add(e.add(terms[0], terms[1]), terms[2]), terms[3]))
                            else:
                                best = e.max(e.max(e.max(terms[0], terms[1]), terms[2]), terms[3])
                                value = b.select(first, best, e.max(held, best))
                            kb.store(value, acc, dtype, slot)
                with kb.loop(first_c, last_c, name="out") as ch:
                    value = kb.load(acc, dtype, b.sub(ch, first_c))
                    if average:
                        value = e.div(value, samples_f)
                    at = kb.add(out_roi, kb.affine([(ch, oh * ow), (ph, ow), (pw, 1)]))
                    kb.store(value, k.outputs[0], dtype, at)


CPU.register("RoiAlign", lower=lower_roialign)
