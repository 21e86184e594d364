"""Depthwise QConv (one input channel per group): vectors of output columns, each tap a
byte load widened to int32 and multiplied by the tap's weight.

A dot-product instruction sums neighbouring k, which a depthwise conv does not have (its
K is the 3x3 taps of one channel), so the GEMM kernel would run rows of one output
channel with 9 useful bytes per panel. Here every tap is one multiply-add per lane on
int32 lanes: as many instructions as the float kernel, a quarter of its memory traffic.

Taps that fall in the padding read the input's zero point, as the offset (bias minus
x_zero times the weight sum; for QConvInteger the run-time zero point times it) expects: rows are clamped into the plane and the loaded
vector replaced by the zero point when the row is outside, and columns outside are
masked lanes whose value is the zero point. Output columns are unrolled in vectors, so
every column mask is a constant."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.int8_vector import I8, I32, U8, ConvEpilogue
from hobbit.backend.cpu.args import KernelArgs
from hobbit.plan.int8 import Int8ConvPlan


def lower_qconv_depthwise(k: KernelArgs, plan: Int8ConvPlan) -> None:
    kb, node, s = k.kb, k.node, plan.shape
    x, w = k.inputs[:2]
    lanes = plan.dot.lanes
    flip = np.dtype(node.inputs[0].dtype) == np.int8
    epilogue = ConvEpilogue(kb, node, k.inputs, k.outputs[0])
    stored_zero = epilogue.fill()
    w_row = plan.weight_row
    vi = ir.VectorType(I32, lanes)

    def planes(lo, hi) -> None:
        with kb.loop(lo, hi, name="plane") as plane:
            n, oc = kb.b.udiv(plane, kb.i64(s.oc)), kb.b.urem(plane, kb.i64(s.oc))
            c = kb.b.udiv(oc, kb.i64(s.ocg))
            x_plane = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            taps = [kb.b.sext(kb.load(w, plan.dot.weights, kb.add(kb.mul(oc, w_row), t)), I32)
                    for t in range(s.kh * s.kw)]
            weights = [kb.splat(t, lanes) for t in taps]
            with kb.loop(0, s.oh, name="oh") as oh:
                for v0 in range(0, s.ow, lanes):
                    acc = ir.Constant(vi, None)
                    for kh in range(s.kh):
                        row = _input_row(kb, s, x, x_plane, oh, kh)
                        for kw in range(s.kw):
                            pixels = _tap(kb, s, x, row, v0, kw, lanes, stored_zero, flip)
                            acc = kb.b.add(acc, kb.b.mul(kb.b.zext(pixels, vi), weights[kh * s.kw + kw]))
                    valid = min(lanes, s.ow - v0)
                    mask = kb.prefix_mask(lanes, valid) if valid < lanes else None
                    epilogue.store(acc, oc, kb.add(kb.mul(kb.add(kb.mul(plane, s.oh), oh), s.ow), v0), mask)

    k.threads.shares(s.n * s.oc, planes)


class _Row:
    """An input row of a tap: its start in x (clamped into the plane) and whether it is real."""

    def __init__(self, start: ir.Value, inside: ir.Value):
        self.start, self.inside = start, inside


def _input_row(kb: KernelBuilder, s, x, x_plane, oh, kh: int) -> _Row:
    b = kb.b
    ih = b.sub(b.add(b.mul(kb.idx(oh), kb.i64(s.stride[0])), kb.i64(kh * s.dilation[0])), kb.i64(s.pad[0]))
    inside = b.and_(b.icmp_signed(">=", ih, kb.i64(0)), b.icmp_signed("<", ih, kb.i64(s.h)))
    clamped = b.select(inside, ih, kb.i64(0))
    return _Row(kb.add(x_plane, kb.mul(clamped, s.w)), inside)


def _tap(kb: KernelBuilder, s, x, row: _Row, v0: int, kw: int, lanes: int, stored_zero: int | ir.Value,
         flip: bool) -> ir.Value:
    """The bytes tap kw reads for output columns v0 .. v0 + lanes (int8 flipped to uint8),
    the zero point where the tap is in the padding."""
    b = kb.b
    sw = s.stride[1]
    first = v0 * sw + kw * s.dilation[1] - s.pad[1]  # input column of lane 0
    span = lanes * sw
    count = min(lanes, s.ow - v0)
    live = [0 <= first + i < s.w and i % sw == 0 and i // sw < count for i in range(span)]
    vec = ir.VectorType(I8, span)
    fill = _bytes(kb, stored_zero, span)
    if any(live):
        mask = ir.Constant(ir.VectorType(ir.IntType(1), span), [1 if on else 0 for on in live])
        loaded = kb.vload(x, U8, kb.add(row.start, first), span, mask, inbounds=False)
        loaded = b.select(mask, loaded, fill)
    else:
        loaded = fill
    if sw > 1:
        loaded = b.shuffle_vector(loaded, ir.Constant(vec, None),
                                  ir.Constant(ir.VectorType(I32, lanes), [i * sw for i in range(lanes)]))
    pixels = b.select(row.inside, loaded, _bytes(kb, stored_zero, lanes))
    return b.xor(pixels, ir.Constant(pixels.type, [0x80] * lanes)) if flip else pixels


def _bytes(kb: KernelBuilder, byte: int | ir.Value, count: int) -> ir.Value:
    """`count` copies of a byte known at compile time (QConv's zero point) or at run time
    (QConvInteger's)."""
    if isinstance(byte, ir.Value):
        return kb.splat(byte, count)
    return ir.Constant(ir.VectorType(I8, count), [byte] * count)
