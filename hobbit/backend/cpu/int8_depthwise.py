"""Depthwise QConv (one input channel per group): vectors of output columns, each kernel
row's taps summed by vpdpbusd over sliding windows of input bytes where the target can
permute bytes, else each tap a byte load widened to int32 and multiplied by its weight.

A dot-product instruction sums neighbouring k, which a depthwise conv does not have (its
K is the 3x3 taps of one channel), so the GEMM kernel would run rows of one output
channel with 9 useful bytes per panel. But the taps of one kernel row read neighbouring
input columns: for output column j the row's taps kw = 0..3 read the bytes at
j*stride + kw*dilation - pad. One vpermb (AVX512-VBMI) of a 64-byte load of the input row
lays those four bytes into int32 lane j for 16 columns at once, and one vpdpbusd multiplies
them by the row's four weights (the fourth 0 for a 3-wide kernel) and adds them: a 3x3
kernel is three permutes and three dot products per 16 outputs, where one tap at a time
is nine widening loads and nine multiply-adds (MobileNetV2's int8 depthwise layers at
24-52 GOP/s, a third of its time, on a Zen 4).

Taps that fall in the padding read the input's zero point, as the offset (bias minus
x_zero times the weight sum; for QConvInteger the run-time zero point times it) expects:
rows are clamped into the plane and the loaded vector replaced by the zero point when the
row is outside, and columns outside are masked lanes whose value is the zero point. Output
columns are unrolled in vectors, so every column mask is a constant."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.int8_vector import I8, I32, U8, ConvEpilogue, dot_step
from hobbit.backend.cpu.args import KernelArgs
from hobbit.plan.int8 import DEPTHWISE_WINDOW as WINDOW, Int8ConvPlan, depthwise_row_taps
from hobbit.target import Target


def lower_qconv_depthwise(k: KernelArgs, plan: Int8ConvPlan) -> None:
    kb, node, s = k.kb, k.node, plan.shape
    x, w = k.inputs[:2]
    lanes = plan.dot.lanes
    flip = np.dtype(node.inputs[0].dtype) == np.int8
    epilogue = ConvEpilogue(kb, node, k.inputs, k.outputs[0])
    stored_zero = epilogue.fill()
    w_row, row_taps = plan.weight_row, depthwise_row_taps(s.kw)
    vi = ir.VectorType(I32, lanes)
    windows = -(-s.kw // WINDOW) if windowed(plan, k.target) else 0

    def planes(lo, hi) -> None:
        with kb.loop(lo, hi, name="plane") as plane:
            n, oc = kb.b.udiv(plane, kb.i64(s.oc)), kb.b.urem(plane, kb.i64(s.oc))
            c = kb.b.udiv(oc, kb.i64(s.ocg))
            x_plane = kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w)
            if windows:
                words = [[_window_weights(kb, w, kb.add(kb.mul(oc, w_row // WINDOW), (kh * row_taps) // WINDOW + q))
                          for q in range(windows)] for kh in range(s.kh)]

                def add_row(acc: ir.Value, row: _Row, v0: int, kh: int) -> ir.Value:
                    for q in range(windows):
                        acc = dot_step(kb, plan.dot, acc, _window(kb, s, x, row, v0, q, lanes, stored_zero, flip),
                                       words[kh][q])
                    return acc
            else:
                first = kb.mul(oc, w_row)
                taps = [[kb.b.sext(kb.load(w, plan.dot.weights, kb.add(first, kh * row_taps + kw)), I32)
                         for kw in range(s.kw)] for kh in range(s.kh)]
                weights = [[kb.splat(tap, lanes) for tap in row] for row in taps]

                def add_row(acc: ir.Value, row: _Row, v0: int, kh: int) -> ir.Value:
                    for kw in range(s.kw):
                        pixels = _tap(kb, s, x, row, v0, kw, lanes, stored_zero, flip)
                        acc = kb.b.add(acc, kb.b.mul(kb.b.zext(pixels, vi), weights[kh][kw]))
                    return acc
            with kb.loop(0, s.oh, name="oh") as oh:
                for v0 in range(0, s.ow, lanes):
                    acc = ir.Constant(vi, None)
                    for kh in range(s.kh):
                        acc = add_row(acc, _input_row(kb, s, x, x_plane, oh, kh), v0, kh)
                    valid = min(lanes, s.ow - v0)
                    mask = kb.prefix_mask(lanes, valid) if valid < lanes else None
                    epilogue.store(acc, oc, kb.add(kb.mul(kb.add(kb.mul(plane, s.oh), oh), s.ow), v0), mask)

    k.threads.shares(s.n * s.oc, planes)


VECTOR_BYTES = 64


def windowed(plan: Int8ConvPlan, target: Target) -> bool:
    """Whether the kernel rows run as byte windows (see the module docstring): vpdpbusd on
    16 lanes, vpermb, and one 64-byte load holding every byte of a window for 16 columns."""
    s = plan.shape
    span = (plan.dot.lanes - 1) * s.stride[1] + (WINDOW - 1) * s.dilation[1] + 1
    return plan.dot.name == "vpdpbusd" and plan.dot.lanes == 16 and "avx512vbmi" in target.enabled \
        and span <= VECTOR_BYTES


def _window_weights(kb: KernelBuilder, w: ir.Value, word: ir.Value) -> ir.Value:
    """The stored weights' 32-bit `word` (one kernel row's taps 4q .. 4q+3, 0 past its width:
    hobbit.plan.int8.depthwise_filters) in every lane, as vpdpbusd's bytes."""
    lanes = VECTOR_BYTES // WINDOW
    return kb.b.bitcast(kb.splat(kb.load(w, np.dtype(np.int32), word), lanes), ir.VectorType(I8, VECTOR_BYTES))


def _window(kb: KernelBuilder, s, x, row: _Row, v0: int, q: int, lanes: int, stored_zero: int | ir.Value,
            flip: bool) -> ir.Value:
    """The bytes of window q (taps 4q .. 4q+3) for output columns v0 .. v0 + lanes: byte t of
    int32 lane j is input column (v0+j)*stride + (4q+t)*dilation - pad, the zero point where that
    is in the padding (int8 flipped to uint8)."""
    b = kb.b
    sw, dil = s.stride[1], s.dilation[1]
    first = v0 * sw + q * WINDOW * dil - s.pad[1]  # input column of lane 0's first byte
    live = [0 <= first + i < s.w for i in range(VECTOR_BYTES)]
    fill = _bytes(kb, stored_zero, VECTOR_BYTES)
    vec = ir.VectorType(I8, VECTOR_BYTES)
    if any(live):
        mask = ir.Constant(ir.VectorType(ir.IntType(1), VECTOR_BYTES), [1 if on else 0 for on in live])
        loaded = b.select(mask, kb.vload(x, U8, kb.add(row.start, first), VECTOR_BYTES, mask, inbounds=False), fill)
    else:
        loaded = fill
    order = [j * sw + t * dil for j in range(lanes) for t in range(WINDOW)]
    window = b.shuffle_vector(loaded, ir.Constant(vec, None), ir.Constant(ir.VectorType(I32, VECTOR_BYTES), order))
    window = b.select(row.inside, window, fill)
    return b.xor(window, ir.Constant(vec, [0x80] * VECTOR_BYTES)) if flip else window


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
