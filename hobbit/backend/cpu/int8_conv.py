"""QConv: int8 convolution on the target's integer dot product (hobbit.plan.int8 says which
and why it is exact), with the requantization in the epilogue.

Threads take bands of output rows (Threads.bands, work stealing under load). For each band
a thread lowers the input rows by im2col into its own scratch (a 1x1 stride-1 conv reads
its input rows in place), then, panel by panel of NR positions, packs the panel's columns
into the dot product's layout ([K/group, NR, group]: each 32-bit lane holds `group`
consecutive k of one position) and runs every MR-row block of output channels over it:
per group of k, nv vector loads of the panel, one broadcast 32-bit load of weights per
row, MR*nv dot-product instructions into int32 accumulators. The epilogue adds the offset
(bias and zero-point compensation), scales by the per-channel multiplier in float32,
rounds half to even, adds the output zero point, clamps (Relu/Clip fold into the bounds)
and stores bytes."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.conv import im2col
from hobbit.backend.cpu.int8_depthwise import lower_qconv_depthwise
from hobbit.backend.cpu.int8_vector import I8, I32, U8, ConvEpilogue, dot_step
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.plan.int8 import Int8ConvPlan, padded_k

I16 = ir.IntType(16)


def lower_qconv(k: KernelArgs) -> None:
    plan: Int8ConvPlan = k.plan
    if plan.variant == "depthwise":
        lower_qconv_depthwise(k, plan)
        return
    kb, node, s = k.kb, k.node, plan.shape
    x, w = k.inputs[:2]
    x_dtype = np.dtype(node.inputs[0].dtype)
    positions = s.oh * s.ow
    col = k.thread_scratch(0, plan.col, U8) if plan.col else None
    pack = k.thread_scratch(plan.col * plan.threads, plan.pack, U8)
    alone = k.threads.alone()
    epilogue = ConvEpilogue(kb, node, k.inputs, k.outputs[0])
    fill = epilogue.fill()
    kernel = _Kernel(kb, plan, w, epilogue, pack, x_dtype == np.int8)

    def band(image, oh0, count: int) -> None:
        n, g = kb.b.udiv(image, kb.i64(s.group)), kb.b.urem(image, kb.i64(s.group))
        x_off = kb.mul(kb.add(kb.mul(n, s.c), kb.mul(g, s.cg)), s.h * s.w)
        if col is None:
            source, start, stride = x, kb.add(x_off, kb.mul(oh0, s.ow)), s.h * s.w
        else:
            im2col(kb, s, x, x_off, col, x_dtype, alone, oh0, count, fill=fill)
            source, start, stride = col, 0, count * s.ow
        y_off = kb.add(kb.mul(n, s.oc * positions), kb.mul(oh0, s.ow))  # channel oc's row is at y_off + oc*P
        kernel.band(source, start, stride, count * s.ow, kb.mul(g, s.ocg), y_off)

    k.threads.bands(s.oh, plan.rows, band, images=s.n * s.group)


class _Kernel:
    """The packing, microkernel and epilogue of one QConv."""

    def __init__(self, kb: KernelBuilder, plan: Int8ConvPlan, w, epilogue: ConvEpilogue, pack, flip: bool):
        self.kb, self.plan, self.dot = kb, plan, plan.dot
        self.w, self.epilogue, self.pack, self.flip = w, epilogue, pack, flip
        self.kp = padded_k(plan.k, plan.dot.group)
        self.positions = plan.shape.oh * plan.shape.ow

    def band(self, source, start, stride: int, width: int, oc0, y_off) -> None:
        """Output positions [0, width) of a band: B rows at source[start + k*stride + column]."""
        kb, nr = self.kb, self.plan.gemm.nr
        full, rest = divmod(width, nr)
        with kb.loop(0, full, name="panel") as p:
            self._panel(source, kb.add(start, kb.mul(p, nr)), stride, nr, oc0, kb.add(y_off, kb.mul(p, nr)))
        if rest:
            self._panel(source, kb.add(start, full * nr), stride, rest, oc0, kb.add(y_off, full * nr))

    def _panel(self, source, start, stride: int, width: int, oc0, y_off) -> None:
        kb, s, gemm = self.kb, self.plan.shape, self.plan.gemm
        lanes = self.plan.vector_lanes(width)
        self._pack(source, start, stride, width, len(lanes))
        blocks, rest = divmod(s.ocg, gemm.mr)
        with kb.loop(0, blocks, name="mb") as mb:
            self._micro(kb.add(oc0, kb.mul(mb, gemm.mr)), gemm.mr, lanes, width, y_off)
        if rest:
            self._micro(kb.add(oc0, blocks * gemm.mr), rest, lanes, width, y_off)

    # -- packing -------------------------------------------------------------------------

    def _pack(self, source, start, stride: int, width: int, nv: int) -> None:
        """pack[(g*NR + n)*group + t] = B[g*group + t, n] for the panel's `width` columns;
        k past K and columns past `width` are zero (int8 activations flipped to uint8)."""
        kb, dot, k = self.kb, self.dot, self.plan.k
        whole = k // dot.group
        with kb.loop(0, whole, name="pk") as g:
            self._pack_group(source, start, stride, width, nv, g, dot.group)
        if k % dot.group:
            self._pack_group(source, start, stride, width, nv, whole, k % dot.group)

    def _pack_group(self, source, start, stride: int, width: int, nv: int, g, present: int) -> None:
        kb, dot, nr = self.kb, self.dot, self.plan.gemm.nr
        lanes = dot.lanes
        for j in range(nv):
            valid = min(lanes, width - j * lanes)
            mask = kb.prefix_mask(lanes, valid) if valid < lanes else None
            rows = []
            for t in range(dot.group):
                if t < present:
                    at = kb.add(kb.add(start, kb.mul(kb.add(kb.mul(g, dot.group), t), stride)), j * lanes)
                    row = kb.vload(source, U8, at, lanes, mask)
                    if self.flip:
                        row = kb.b.xor(row, ir.Constant(row.type, [0x80] * lanes))
                else:
                    row = ir.Constant(ir.VectorType(I8, lanes), None)
                if dot.packed.itemsize == 2:
                    row = kb.b.zext(row, ir.VectorType(I16, lanes))
                rows.append(row)
            at = kb.mul(kb.add(kb.mul(g, nr), j * lanes), dot.group)
            kb.vstore(_interleave(kb, rows), self.pack, dot.packed, at)

    # -- the microkernel -----------------------------------------------------------------

    def _micro(self, oc0, mr: int, lanes: list[int], width: int, y_off) -> None:
        """Output channels oc0 .. oc0 + mr of the packed panel's `width` positions, in vectors
        of `lanes` int32 lanes each (vector j starts at position j * dot.lanes)."""
        kb, dot, nr = self.kb, self.dot, self.plan.gemm.nr
        acc_types = [ir.VectorType(I32, n) for n in lanes]
        accs = [[kb.alloca(t) for t in acc_types] for _ in range(mr)]
        for row in accs:
            for acc, t in zip(row, acc_types):
                kb.b.store(ir.Constant(t, None), acc)
        element = ir.IntType(8 * dot.packed.itemsize)
        w_bytes = self.kp * dot.weights.itemsize
        with kb.loop(0, self.kp // dot.group, name="kg") as g:
            b_vectors = [kb.vload(self.pack, dot.packed, kb.mul(kb.add(kb.mul(g, nr), j * dot.lanes), dot.group),
                                  n * dot.group) for j, n in enumerate(lanes)]
            for i in range(mr):
                at = kb.add(kb.mul(kb.add(oc0, i), w_bytes), kb.mul(g, dot.group * dot.weights.itemsize))
                word = kb.b.load(kb.b.gep(self.w, [kb.idx(at)], source_etype=I8), typ=I32)
                word.align = 1
                for j, n in enumerate(lanes):
                    weights = kb.b.bitcast(kb.splat(word, n), ir.VectorType(element, n * dot.group))
                    acc = kb.b.load(accs[i][j], typ=acc_types[j])
                    kb.b.store(dot_step(kb, dot, acc, b_vectors[j], weights), accs[i][j])
        for i in range(mr):
            oc = kb.add(oc0, i)
            for j, n in enumerate(lanes):
                valid = min(n, width - j * dot.lanes)
                acc = kb.b.load(accs[i][j], typ=acc_types[j])
                mask = kb.prefix_mask(n, valid) if valid < n else None
                self.epilogue.store(acc, oc, kb.add(kb.add(y_off, kb.mul(oc, self.positions)), j * dot.lanes), mask)


def _interleave(kb: KernelBuilder, rows: list[ir.Value]) -> ir.Value:
    """[r0, r1, ...] of `lanes` elements each -> r0[0], r1[0], ..., r0[1], r1[1], ..."""
    lanes, count = rows[0].type.count, len(rows)
    while len(rows) > 1:  # concatenate pairwise: r0|r1, r2|r3, then (r0|r1)|(r2|r3)
        width = rows[0].type.count
        mask = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        rows = [kb.b.shuffle_vector(rows[i], rows[i + 1], mask) for i in range(0, len(rows), 2)]
    order = [t * lanes + lane for lane in range(lanes) for t in range(count)]
    whole = rows[0]
    return kb.b.shuffle_vector(whole, ir.Constant(whole.type, None), ir.Constant(ir.VectorType(I32, len(order)), order))


CPU.register("QConv", lower=lower_qconv)
CPU.register("QConvInteger", lower=lower_qconv)
