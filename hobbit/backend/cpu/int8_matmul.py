"""QMatMul: int8 activations [M, K] times constant int8 weights [K, N] (fully-connected
layers), on the target's dot product, requantized per column.

Vectors run along N, over weights packed at compile time in NR-column panels of the dot
product's layout (hobbit.plan.int8.packed_matrix), so each panel is one contiguous stream;
each row's group of k activations is one broadcast 32-bit word. At batch 1 this is a
matrix-vector product bound by reading the weights: a quarter of the float32 bytes.
Threads share the panels. QMatMulInteger (MatMulInteger) is the same product with an int32
epilogue."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.int8_vector import I32, dot_step, requantize, zero_byte, zero_read
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.int8 import DotProduct, dot_product, padded_k

I16 = ir.IntType(16)
U8 = np.dtype(np.uint8)
I32_DTYPE = np.dtype(np.int32)


def lower_qmatmul(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    a = node.attrs
    x = node.inputs[0]
    rows = int(np.prod(x.shape[:-1]))
    dot = dot_product(k.target)
    sched = gemm_schedule(rows, a["n"], a["k"], k.target, 4)  # the pass packed the weights for its NR
    kernel = _QMatMul(kb, node, dot, sched.mr, sched.nv, sched.nr, rows, k.inputs, k.outputs[0], a,
                      np.dtype(x.dtype) == np.int8)
    full, rest = divmod(a["n"], sched.nr)
    panels = full + (rest > 0)

    def share(lo, hi) -> None:
        with kb.loop(lo, kb.imin(hi, full), name="panel") as p:
            kernel.panel(p, sched.nr)
        if rest:
            with kb.when_greater(hi, full) as live:
                if live:
                    kernel.panel(full, rest)

    if k.threads.max_threads == 1:
        share(0, panels)
    else:
        k.threads.shares(panels, share)


class _QMatMul:
    def __init__(self, kb: KernelBuilder, node, dot: DotProduct, mr: int, nv: int, nr: int, rows: int, inputs, y,
                 attrs: dict, flip: bool):
        self.kb, self.dot, self.mr, self.nv, self.nr, self.rows = kb, dot, mr, nv, nr, rows
        self.x, self.w = inputs[:2]
        self.integer = node.op == "QMatMulInteger"
        if self.integer:  # int32 out: the sums less the run-time zero point times the column sums
            self.sums, self.zero = inputs[2], zero_read(kb, node, zero_byte(kb, inputs[3]))
        else:
            self.offset, self.multiplier = inputs[2:]
        self.y, self.attrs, self.flip = y, attrs, flip
        self.k, self.n = attrs["k"], attrs["n"]
        self.groups = padded_k(self.k, dot.group) // dot.group

    def panel(self, p, width: int) -> None:
        kb = self.kb
        blocks, rest = divmod(self.rows, self.mr)
        nv = -(-width // self.dot.lanes)
        with kb.loop(0, blocks, name="mb") as mb:
            self._micro(p, kb.mul(mb, self.mr), self.mr, nv, width)
        if rest:
            self._micro(p, blocks * self.mr, rest, nv, width)

    def _micro(self, p, m0, mr: int, nv: int, width: int) -> None:
        kb, dot, nr = self.kb, self.dot, self.nr
        acc_type = ir.VectorType(I32, dot.lanes)
        operand = ir.VectorType(ir.IntType(8 * dot.weights.itemsize), dot.lanes * dot.group)
        accs = [[kb.alloca(acc_type) for _ in range(nv)] for _ in range(mr)]
        for row in accs:
            for acc in row:
                kb.b.store(ir.Constant(acc_type, None), acc)
        whole = self.k // dot.group

        def step(g, present: int) -> None:
            base = kb.mul(kb.add(kb.mul(p, self.groups), g), nr * dot.group)
            weights = [kb.vload(self.w, dot.weights, kb.add(base, j * dot.lanes * dot.group), dot.lanes * dot.group)
                       for j in range(nv)]
            for i in range(mr):
                word = self._activations(kb.add(kb.mul(kb.add(m0, i), self.k), kb.mul(g, dot.group)), present)
                activations = kb.b.bitcast(kb.splat(word, dot.lanes), operand)
                for j in range(nv):
                    acc = kb.b.load(accs[i][j], typ=acc_type)
                    kb.b.store(dot_step(kb, dot, acc, activations, weights[j]), accs[i][j])

        with kb.loop(0, whole, name="kg") as g:
            step(g, dot.group)
        if self.k % dot.group:
            step(whole, self.k % dot.group)
        self._store(accs, p, m0, mr, nv, width)

    def _activations(self, at, present: int) -> ir.Value:
        """One row's `present` activations from x[at] as a 32-bit word in the dot product's
        operand layout (bytes, or int16 pairs); missing k read as zero."""
        kb, b, dot = self.kb, self.kb.b, self.dot
        if present == dot.group and dot.packed.itemsize == 1:
            word = b.load(b.gep(self.x, [kb.idx(at)], source_etype=ir.IntType(8)), typ=I32)
            word.align = 1
            return b.xor(word, ir.Constant(I32, 0x80808080)) if self.flip else word
        word = ir.Constant(I32, 0)
        lane_bits = 32 // dot.group
        for t in range(present):
            byte = kb.load(self.x, U8, kb.add(at, t))
            if self.flip:
                byte = b.xor(byte, ir.Constant(byte.type, 0x80))
            word = b.or_(word, b.shl(b.zext(byte, I32), ir.Constant(I32, t * lane_bits)))
        return word

    def _store(self, accs, p, m0, mr: int, nv: int, width: int) -> None:
        kb, lanes = self.kb, self.dot.lanes
        n0 = kb.mul(p, self.nr)
        for j in range(nv):
            valid = min(lanes, width - j * lanes)
            mask = kb.prefix_mask(lanes, valid) if valid < lanes else None
            column = kb.add(n0, j * lanes)
            if self.integer:
                correction = kb.b.mul(kb.splat(self.zero, lanes), kb.vload(self.sums, I32_DTYPE, column, lanes, mask))
            else:
                offset = kb.vload(self.offset, I32_DTYPE, column, lanes, mask)
                multiplier = kb.vload(self.multiplier, np.dtype(np.float32), column, lanes, mask)
            for i in range(mr):
                acc = kb.b.load(accs[i][j], typ=ir.VectorType(I32, lanes))
                at = kb.add(kb.mul(kb.add(m0, i), self.n), column)
                if self.integer:
                    kb.vstore(kb.b.sub(acc, correction), self.y, I32_DTYPE, at, mask)
                else:
                    kb.vstore(requantize(kb, self.attrs, acc, offset, multiplier), self.y, np.dtype(self.attrs["to"]),
                              at, mask)


CPU.register("QMatMul", lower=lower_qmatmul)
CPU.register("QMatMulInteger", lower=lower_qmatmul)
