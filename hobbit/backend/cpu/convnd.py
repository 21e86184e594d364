"""The ConvND kernel: a direct loop nest in gather form.

Each thread takes whole (image, output channel) planes. For every output
position the kernel sums input channel x kernel tap products; each spatial dim
of a tap checks its input position against the image at its own loop level, so
a tap that falls in the padding (or, for a transposed convolution, between
strided input positions) skips the loops below it and nothing outside X or W
is ever read. float16 accumulates in float32."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder, llvm_type
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.emit.scalar import Emit


def _input_position(kb: KernelBuilder, a: dict, d: int, o: ir.Value, tap: ir.Value,
                    size: int) -> tuple[ir.Value, ir.Value]:
    """(input index, whether it is a real input element) for output index o and tap index `tap` of dim d."""
    b = kb.b
    stride, dilation, pad = a["strides"][d], a["dilations"][d], a["pads"][d]
    if not a["transposed"]:
        pos = kb.add(kb.add(kb.mul(o, stride), -pad), kb.mul(tap, dilation))
        return pos, b.icmp_unsigned("<", kb.idx(pos), kb.i64(size))
    t = kb.b.sub(kb.idx(kb.add(o, pad)), kb.idx(kb.mul(tap, dilation)))
    if stride == 1:
        return t, b.icmp_unsigned("<", t, kb.i64(size))
    q = b.sdiv(t, kb.i64(stride))
    exact = b.icmp_signed("==", b.sub(t, b.mul(q, kb.i64(stride))), kb.i64(0))
    return q, b.and_(exact, b.icmp_unsigned("<", q, kb.i64(size)))


def lower_convnd(k: KernelArgs) -> None:
    kb, node, a = k.kb, k.node, k.node.attrs
    b = kb.b
    xv, wv, yv = node.inputs[0], node.inputs[1], node.outputs[0]
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    dtype = np.dtype(xv.dtype)
    cd = compute_dtype(dtype)
    e = Emit(kb, cd, 1)
    rank = len(xv.shape) - 2
    n, c = xv.shape[:2]
    oc = yv.shape[1]
    in_sizes, out_sizes, kernel = tuple(xv.shape[2:]), tuple(yv.shape[2:]), tuple(wv.shape[2:])
    g = a["group"]
    cg, ocg = c // g, oc // g
    in_plane, out_plane, ksize = (int(np.prod(s, dtype=np.int64)) for s in (in_sizes, out_sizes, kernel))
    x_str, y_str, w_str = contiguous_strides(in_sizes), contiguous_strides(out_sizes), contiguous_strides(kernel)
    # Elements between consecutive input channels in W, for a fixed output channel.
    w_ic_stride = ocg * ksize if a["transposed"] else ksize
    acc = kb.alloca(llvm_type(cd))

    lo, hi = k.threads.split(n * oc)
    with kb.loop(lo, hi, name="plane") as plane:
        image = b.udiv(plane, kb.i64(oc))
        channel = b.urem(plane, kb.i64(oc))
        group = b.udiv(channel, kb.i64(ocg))
        x_base = kb.add(kb.mul(image, c * in_plane), kb.mul(group, cg * in_plane))
        if a["transposed"]:
            w_base = kb.add(kb.mul(group, cg * ocg * ksize), kb.mul(b.urem(channel, kb.i64(ocg)), ksize))
        else:
            w_base = kb.mul(channel, cg * ksize)
        start = widen(b, kb.load(bias, dtype, channel), dtype) if bias is not None else e.c(0.0)

        def taps(d: int, outs: list[ir.Value], x_off, w_off) -> None:
            if d == rank:
                xval = widen(b, kb.load(k.inputs[0], dtype, x_off), dtype)
                wval = widen(b, kb.load(k.inputs[1], dtype, w_off), dtype)
                b.store(e.fma(xval, wval, b.load(acc)), acc)
                return
            with kb.loop(0, kernel[d], name=f"k{d}") as t:
                pos, ok = _input_position(kb, a, d, outs[d], t, in_sizes[d])
                with kb.if_then(ok):
                    taps(d + 1, outs, kb.add(x_off, kb.mul(pos, x_str[d])), kb.add(w_off, kb.mul(t, w_str[d])))

        def outputs(d: int, outs: list[ir.Value]) -> None:
            if d < rank:
                with kb.loop(0, out_sizes[d], name=f"o{d}") as o:
                    outputs(d + 1, outs + [o])
                return
            b.store(start, acc)
            with kb.loop(0, cg, name="ic") as ic:
                taps(0, outs, kb.add(x_base, kb.mul(ic, in_plane)), kb.add(w_base, kb.mul(ic, w_ic_stride)))
            at = kb.add(kb.mul(plane, out_plane), kb.affine(list(zip(outs, y_str))))
            kb.store(narrow(b, b.load(acc), dtype), k.outputs[0], dtype, at)

        outputs(0, [])


CPU.register("ConvND", lower=lower_convnd)
