"""2-D convolution, lowered by shape:

* depthwise (groups == channels): a direct loop over a zero-padded copy of each
  plane, so the inner loop has no bounds checks and LLVM vectorises it;
* 1x1, stride 1, no padding: a GEMM straight on the input ([C, H*W] is B);
* everything else: im2col into scratch ([C*KH*KW, OH*OW], with padding decided
  statically per kernel tap), then the same GEMM.

Bias and fused epilogue steps are applied to the accumulators before the single
store, indexed in the view [N, OC, OH*OW]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.lower.builder import KernelBuilder
from hobbit.lower.elementwise import Epilogue
from hobbit.lower.gemm import MatB, MatC, emit_gemm, row_major_a
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.parallel import Threads
from hobbit.lower.scalar import Emit
from hobbit.lower.schedule import gemm_schedule


@dataclass(frozen=True)
class ConvShape:
    n: int
    c: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    oh: int
    ow: int
    group: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def ocg(self) -> int:
        return self.oc // self.group

    @property
    def depthwise(self) -> bool:
        return self.group == self.c and self.group > 1 and self.cg == 1

    @property
    def pointwise(self) -> bool:
        return (self.kh, self.kw, self.stride, self.pad) == (1, 1, (1, 1), (0, 0, 0, 0))

    @property
    def padded_hw(self) -> tuple[int, int]:
        return self.h + self.pad[0] + self.pad[2], self.w + self.pad[1] + self.pad[3]


def conv_shape(node: Node) -> ConvShape:
    x = node.inputs[0]
    n, c, h, wd = x.shape
    # A Winograd conv carries transformed weights; its attrs keep the original shape.
    oc, _, kh, kw = node.attrs.get("weight_shape") or node.inputs[1].shape
    _, _, oh, ow = node.outputs[0].shape
    a = node.attrs
    return ConvShape(n, c, h, wd, oc, kh, kw, oh, ow, a["group"], tuple(a["strides"]),
                     tuple(a["dilations"]), tuple(a["pads"]))


def conv_scratch_bytes(node: Node) -> int:
    from hobbit.lower.depthwise import depthwise_scratch_elems
    s = conv_shape(node)
    itemsize = np.dtype(node.inputs[0].dtype).itemsize
    if s.depthwise:
        return depthwise_scratch_elems(s) * itemsize
    if s.pointwise:
        return 0
    return s.cg * s.kh * s.kw * s.oh * s.ow * itemsize


def lower_conv(k: KernelArgs) -> None:
    from hobbit.lower.depthwise import lower_depthwise  # depthwise builds on this module
    s = conv_shape(k.node)
    if s.depthwise:
        lower_depthwise(k, s)
    else:
        _gemm_conv(k, s)


def _gemm_conv(k: KernelArgs, s: ConvShape) -> None:
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    y = k.outputs[0]
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    sched = gemm_schedule(s.ocg, P, K, k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    with kb.loop(0, s.n, name="n") as n, kb.loop(0, s.group, name="g") as g:
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        if s.pointwise:
            b = MatB(x, x_off, k=P)
        else:
            _im2col(kb, s, x, x_off, k.scratch, dtype, k.threads)
            k.threads.barrier()
            b = MatB(k.scratch, 0, k=P)
        oc0 = kb.mul(g, s.ocg)
        a = row_major_a(w, kb.mul(oc0, K), K, sched.mr)
        c = MatC(y, kb.mul(kb.add(kb.mul(n, s.oc), oc0), P), m=P)

        def epi(e: Emit, v, m, p, mask, n=n, oc0=oc0):
            oc = kb.add(oc0, m)
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, dtype, oc), e.width))
            return epilogue.apply(e, v, [n, oc, p], mask)

        emit_gemm(kb, sched, s.ocg, P, K, a, b, c, dtype, epi, k.threads)
        if not s.pointwise and s.n * s.group > 1:
            k.threads.barrier()  # the next im2col overwrites the scratch others may still read


def _valid_range(out_len: int, in_len: int, stride: int, offset: int) -> tuple[int, int]:
    """Output positions o in [lo, hi) whose input o*stride + offset lies in [0, in_len)."""
    lo = max(0, -(-(-offset) // stride)) if offset < 0 else 0
    hi = min(out_len, (in_len - 1 - offset) // stride + 1) if in_len - 1 - offset >= 0 else 0
    return lo, max(lo, hi)


def _im2col(kb: KernelBuilder, s: ConvShape, x, x_off, col, dtype, threads: Threads) -> None:
    """col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c, oh*sh + kh*dh - pt, ow*sw + kw*dw - pl] or 0."""
    zero = kb.const(dtype, 0)
    P = s.oh * s.ow
    c_lo, c_hi = threads.split(s.cg)
    with kb.loop(c_lo, c_hi, name="c") as c:
        x_c = kb.add(x_off, kb.mul(c, s.h * s.w))
        for kh in range(s.kh):
            for kw in range(s.kw):
                row = kb.mul(kb.add(kb.mul(c, s.kh * s.kw), kh * s.kw + kw), P)
                dy, dx = kh * s.dilation[0] - s.pad[0], kw * s.dilation[1] - s.pad[1]
                oh_lo, oh_hi = _valid_range(s.oh, s.h, s.stride[0], dy)
                ow_lo, ow_hi = _valid_range(s.ow, s.w, s.stride[1], dx)
                fill(kb, col, dtype, row, 0, oh_lo * s.ow, zero)
                fill(kb, col, dtype, row, oh_hi * s.ow, P, zero)
                if oh_lo >= oh_hi or ow_lo >= ow_hi:
                    fill(kb, col, dtype, row, oh_lo * s.ow, oh_hi * s.ow, zero)
                    continue
                with kb.loop(oh_lo, oh_hi, name="oh") as oh:
                    dst = kb.add(row, kb.mul(oh, s.ow))
                    src = kb.add(x_c, kb.add(kb.mul(oh, s.stride[0] * s.w), dy * s.w + dx))
                    fill(kb, col, dtype, dst, 0, ow_lo, zero)
                    with kb.loop(ow_lo, ow_hi, name="ow") as ow:
                        v = kb.load(x, dtype, kb.add(src, kb.mul(ow, s.stride[1])))
                        kb.store(v, col, dtype, kb.add(dst, ow))
                    fill(kb, col, dtype, dst, ow_hi, s.ow, zero)


def fill(kb: KernelBuilder, ptr, dtype, base, start: int, stop: int, value) -> None:
    if stop <= start:
        return
    with kb.loop(start, stop, name="z") as i:
        kb.store(value, ptr, dtype, kb.add(base, i))
