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
from hobbit.lower.gemm import MatA, MatB, MatC, emit_gemm, row_major_a
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


def _col_elems(s: ConvShape) -> int:
    """im2col buffer size (none for pointwise convs, which read the input directly)."""
    return 0 if s.pointwise else s.cg * s.kh * s.kw * s.oh * s.ow


def conv_scratch_bytes(node: Node) -> int:
    from hobbit.lower.depthwise import depthwise_scratch_elems
    s = conv_shape(node)
    itemsize = np.dtype(node.inputs[0].dtype).itemsize
    if s.depthwise:
        return depthwise_scratch_elems(s) * itemsize
    partials = s.oh * s.ow * s.ocg if node.attrs.get("weight_layout") == "KO" else 0
    return (_col_elems(s) + partials) * itemsize


def lower_conv(k: KernelArgs) -> None:
    from hobbit.lower.depthwise import lower_depthwise  # depthwise builds on this module
    s = conv_shape(k.node)
    if s.depthwise:
        lower_depthwise(k, s)
    else:
        _gemm_conv(k, s)


def _gemm_conv(k: KernelArgs, s: ConvShape) -> None:
    """Per image and group: (im2col,) then one GEMM with bias and epilogue at the store.

    Normally rows are output channels and vectors run along the H*W positions. With
    weights in "KO" layout ([C*KH*KW, OC], chosen by the layout pass when H*W is a poor
    fit for the vector width, e.g. 7x7) the GEMM is transposed: rows are positions,
    vectors run along output channels and are stored with a stride of H*W."""
    kb, node = k.kb, k.node
    dtype = node.inputs[0].dtype
    x, w, bias = k.inputs[0], k.inputs[1], k.inputs[2] if len(k.inputs) > 2 else None
    K, P = s.cg * s.kh * s.kw, s.oh * s.ow
    by_channel = node.attrs.get("weight_layout") == "KO"
    rows, cols = (P, s.ocg) if by_channel else (s.ocg, P)
    sched = gemm_schedule(rows, cols, K, k.target, np.dtype(dtype).itemsize)
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, P))
    with kb.loop(0, s.n, name="n") as n, kb.loop(0, s.group, name="g") as g:
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        if s.pointwise:
            src, src_off = x, x_off
        else:
            _im2col(kb, s, x, x_off, k.scratch, dtype, k.threads)
            k.threads.barrier()
            src, src_off = k.scratch, 0
        oc0 = kb.mul(g, s.ocg)
        y_off = kb.mul(kb.add(kb.mul(n, s.oc), oc0), P)
        if by_channel:
            a = MatA(src, src_off, panel=sched.mr, k=P, m=1)
            b = MatB(w, oc0, k=s.oc)
            partial = MatC(k.scratch, _col_elems(s), m=s.ocg) if K > sched.kc else None
            c = MatC(k.outputs[0], y_off, m=1, n=P, partial=partial)
        else:
            a = row_major_a(w, kb.mul(oc0, K), K, sched.mr)
            b = MatB(src, src_off, k=P)
            c = MatC(k.outputs[0], y_off, m=P)

        def epi(e: Emit, v, m, col, mask, n=n, oc0=oc0):
            if by_channel:
                oc, p = kb.add(oc0, col), m
                if bias is not None:
                    v = e.add(v, kb.vload(bias, dtype, oc, e.width, mask))
                return epilogue.apply(e, v, [n, oc, p], mask, axis=1)
            oc, p = kb.add(oc0, m), col
            if bias is not None:
                v = e.add(v, kb.splat(kb.load(bias, dtype, oc), e.width))
            return epilogue.apply(e, v, [n, oc, p], mask)

        emit_gemm(kb, sched, rows, cols, K, a, b, c, dtype, epi, k.threads)
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
