"""Depthwise convolution (groups == channels), vectorised along output rows.

Per channel: the input plane is copied into the middle of a zero-padded plane
(one per thread, reused by every channel so it stays in cache; its border is
zeroed once per call), so every tap of every output vector is an in-bounds
load with no branches. An output row is computed in vectors along `ow`: each
tap is one vector load (stride 1), two loads and an even-lane shuffle
(stride 2), or a gather, times a broadcast weight. The vector width shrinks for
narrow late-stage rows (7 or 14 wide) so fewer lanes are wasted. Channels are
shared among threads; bias and the fused epilogue are applied before the store."""

from __future__ import annotations

from llvmlite import ir

from hobbit.lower.builder import I32, KernelBuilder
from hobbit.lower.conv import ConvShape
from hobbit.lower.copy import emit_fill, emit_plane_copy
from hobbit.lower.elementwise import Epilogue
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.scalar import Emit

SLACK = 64  # elements past the last plane that a strided tail vector may read


def plane_elems(s: ConvShape) -> int:
    hp, wp = s.padded_hw
    return hp * wp + SLACK


def depthwise_scratch_elems(s: ConvShape, threads: int) -> int:
    """One padded plane per thread, reused for every channel so it stays in cache."""
    return threads * plane_elems(s)


def row_width(s: ConvShape, lanes: int) -> int:
    """Vector width for rows of s.ow outputs: the target's, or the power of two that covers ow."""
    width = lanes
    while width // 2 >= max(s.ow, 4):
        width //= 2
    return width


def lower_depthwise(k: KernelArgs, s: ConvShape) -> None:
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    hp, wp = s.padded_hw
    mult = s.oc // s.c
    width = row_width(s, k.width(dtype))
    e = Emit(kb, dtype, width)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, s.oh * s.ow))
    pad = k.thread_scratch(0, plane_elems(s), dtype)
    _zero_borders(kb, s, pad, dtype)
    c_lo, c_hi = k.threads.split(s.c)
    with kb.loop(0, s.n, name="n") as n, kb.loop(c_lo, c_hi, name="c") as c:
        emit_plane_copy(kb, x, kb.mul(kb.add(kb.mul(n, s.c), c), s.h * s.w), s.w, pad, wp,
                        s.pad[0], s.pad[1], s.h, s.w, dtype)
        with kb.loop(0, mult, name="mult") as j:
            oc = kb.add(kb.mul(c, mult), j)
            taps = [kb.splat(kb.load(w, dtype, kb.add(kb.mul(oc, s.kh * s.kw), t)), width)
                    for t in range(s.kh * s.kw)]
            b0 = kb.splat(kb.load(bias, dtype, oc), width) if bias is not None else e.c(0.0)
            out_base = kb.mul(kb.add(kb.mul(n, s.oc), oc), s.oh * s.ow)
            with kb.loop(0, s.oh, name="oh") as oh:
                row = kb.mul(oh, s.stride[0] * wp)

                def vector(ow0, mask):
                    acc = b0
                    for kh in range(s.kh):
                        for kw in range(s.kw):
                            start = kb.add(row, kb.add(kb.mul(ow0, s.stride[1]),
                                                       kh * s.dilation[0] * wp + kw * s.dilation[1]))
                            v = _strided_vload(kb, pad, dtype, start, s.stride[1], width, mask)
                            acc = e.fma(taps[kh * s.kw + kw], v, acc)
                    p = kb.add(kb.mul(oh, s.ow), ow0)
                    acc = epilogue.apply(e, acc, [n, oc, p], mask)
                    kb.vstore(acc, k.outputs[0], dtype, kb.add(out_base, p), mask)

                full = s.ow - s.ow % width
                if full:
                    with kb.loop(0, full, width, name="ow") as ow0:
                        vector(ow0, None)
                if s.ow % width:
                    vector(full, kb.prefix_mask(width, s.ow % width))


def _zero_borders(kb: KernelBuilder, s: ConvShape, pad, dtype) -> None:
    """Zero the padding ring of this thread's plane once; channels only overwrite the inside."""
    hp, wp = s.padded_hw
    zero = kb.const(dtype, 0)
    top, left = s.pad[0], s.pad[1]
    emit_fill(kb, pad, dtype, 0, top * wp, zero)
    emit_fill(kb, pad, dtype, (top + s.h) * wp, hp * wp + SLACK, zero)
    with kb.loop(0, s.h, name="ih") as ih:
        row = kb.mul(kb.add(ih, top), wp)
        emit_fill(kb, pad, dtype, 0, left, zero, base=row)
        emit_fill(kb, pad, dtype, left + s.w, wp, zero, base=row)


def _strided_vload(kb: KernelBuilder, ptr, dtype, start, stride: int, width: int, mask) -> ir.Value:
    """`width` elements at start, start+stride, ...; lanes outside `mask` are don't-care."""
    if stride == 1:
        return kb.vload(ptr, dtype, start, width, mask)
    if stride == 2:
        lo = kb.vload(ptr, dtype, start, width)
        hi = kb.vload(ptr, dtype, kb.add(start, width), width)
        even = ir.Constant(ir.VectorType(I32, width), [2 * i for i in range(width)])
        return kb.b.shuffle_vector(lo, hi, even)
    vec = ir.Constant(ir.VectorType(kb.const(dtype, 0).type, width), None)
    for i in range(width):
        vec = kb.b.insert_element(vec, kb.load(ptr, dtype, kb.add(start, i * stride)), ir.Constant(I32, i))
    return vec

