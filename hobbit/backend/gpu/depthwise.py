"""Depthwise convolution on the GPU (Conv with group == C_in == C_out): each thread
computes `per_thread` outputs side by side along W of one (n, c) plane, loading each
input column their windows share once per kernel row, with the channel's KH x KW
weights in registers. Bias and the fused epilogue (Clip, Relu, a residual Add: Conv's
[N, C, H*W] view) are applied per output before its store.

The plan (hobbit.plan.gpu.depthwise) picks where the taps come from: a shared-memory
tile of the input staged by the block ("tiled", no bounds checks on the taps), or
global memory with each tap's bounds checked ("direct", hobbit.backend.gpu.window).

The GPU "Conv" kernel (hobbit/backend/gpu/conv.py) hands the nodes that are depthwise
(hobbit.plan.gpu.depthwise.is_depthwise) to `lower_depthwise`."""

from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.backend.gpu.elementwise import unflatten
from hobbit.backend.gpu.args import GpuArgs
from hobbit.backend.gpu.window import inside
from hobbit.emit.epilogue import Epilogue
from hobbit.emit.scalar import Emit
from hobbit.plan.gpu.depthwise import input_tile, is_depthwise

F32 = np.dtype(np.float32)
Fetch = Callable[[int, int], ir.Value]  # (kernel row, column offset in the thread's span) -> input value


class _Channel:
    """What every output of one (n, c) plane shares: its weights, bias and geometry."""

    def __init__(self, k: GpuArgs, plane: ir.Value):
        kb, node = k.kb, k.node
        self.k, self.kb, self.e = k, kb, Emit(kb, F32, 1)
        _, self.c, self.h, self.w = node.inputs[0].shape
        _, _, self.oh, self.ow = node.outputs[0].shape
        self.kh, self.kw = node.inputs[1].shape[2:]
        (self.sh, self.sw), (self.dh, self.dw) = node.attrs["strides"], node.attrs["dilations"]
        self.pt, self.pl = node.attrs["pads"][:2]
        self.per_thread = k.plan.per_thread
        self.plane = plane
        self.batch, self.channel = kb.b.udiv(plane, kb.i64(self.c)), kb.b.urem(plane, kb.i64(self.c))
        self.epilogue = Epilogue(kb, node, k.epilogue, (node.outputs[0].shape[0], self.c, self.oh * self.ow))

    def weights(self) -> list[list[ir.Value]]:
        kb, first = self.kb, self.kb.b.mul(self.channel, self.kb.i64(self.kh * self.kw))
        return [[kb.load(self.k.inputs[1], F32, kb.b.add(first, kb.i64(i * self.kw + t))) for t in range(self.kw)]
                for i in range(self.kh)]

    def columns(self) -> list[int]:
        """Column offsets (from the thread's first window's first column) that its windows read."""
        return sorted({j * self.sw + t * self.dw for j in range(self.per_thread) for t in range(self.kw)})

    def sums(self, fetch: Fetch) -> list[ir.Value]:
        e, weights = self.e, self.weights()
        acc = [e.c(0.0)] * self.per_thread
        for i in range(self.kh):
            row = {q: fetch(i, q) for q in self.columns()}
            for j in range(self.per_thread):
                for t in range(self.kw):
                    acc[j] = e.fma(row[j * self.sw + t * self.dw], weights[i][t], acc[j])
        return acc

    def finish(self, acc: list[ir.Value], oy: ir.Value, ox: ir.Value, row_guard: ir.Value | None,
               ragged: bool) -> None:
        """Bias, epilogue and store of the outputs (oy, ox + j); `ragged`: some may lie past
        the row's end, `row_guard`: whether oy is inside the plane, when it may not be."""
        kb, e = self.kb, self.e
        bias = self.k.inputs[2] if len(self.k.inputs) > 2 else None
        b = kb.load(bias, F32, self.channel) if bias is not None else None
        out_plane = kb.b.mul(self.plane, kb.i64(self.oh * self.ow))
        for j, v in enumerate(acc):
            x = kb.b.add(ox, kb.i64(j))
            at = kb.b.add(kb.b.mul(oy, kb.i64(self.ow)), x)
            guard = kb.b.icmp_unsigned("<", x, kb.i64(self.ow)) if ragged else None
            if row_guard is not None:
                guard = row_guard if guard is None else kb.b.and_(guard, row_guard)

            def store(v: ir.Value = v, at: ir.Value = at) -> None:
                if b is not None:
                    v = e.add(v, b)
                v = self.epilogue.apply(e, v, [self.batch, self.channel, at])
                kb.store(v, self.k.outputs[0], F32, kb.b.add(out_plane, at))
            if guard is None:
                store()
            else:
                with kb.if_then(guard):
                    store()


def _lower_direct(k: GpuArgs) -> None:
    kb, simt, node = k.kb, k.simt, k.node
    n, c = node.inputs[0].shape[:2]
    oh, ow = node.outputs[0].shape[2:]
    p = k.plan.per_thread
    groups = -(-ow // p)
    total = n * c * oh * groups
    with simt.phase(sync=False) as tid:
        flat = kb.b.add(kb.b.mul(simt.block(0), kb.i64(k.plan.threads)), tid)
        with kb.if_then(kb.b.icmp_unsigned("<", flat, kb.i64(total))):
            plane, oy, g = unflatten(kb, flat, (n * c, oh, groups))
            ch = _Channel(k, plane)
            ox = kb.b.mul(g, kb.i64(p))
            x_plane = kb.b.mul(plane, kb.i64(ch.h * ch.w))
            top = kb.b.sub(kb.b.mul(oy, kb.i64(ch.sh)), kb.i64(ch.pt))
            left = kb.b.sub(kb.b.mul(ox, kb.i64(ch.sw)), kb.i64(ch.pl))
            rows = [kb.b.add(top, kb.i64(i * ch.dh)) for i in range(ch.kh)]
            row_ok = [inside(kb, r, ch.h) for r in rows]
            cols = {q: kb.b.add(left, kb.i64(q)) for q in ch.columns()}
            col_ok = {q: inside(kb, x, ch.w) for q, x in cols.items()}

            def fetch(i: int, q: int) -> ir.Value:
                ok = kb.b.and_(row_ok[i], col_ok[q])
                at = kb.b.add(x_plane, kb.b.add(kb.b.mul(rows[i], kb.i64(ch.w)), cols[q]))
                v = kb.load(k.inputs[0], F32, kb.b.select(ok, at, x_plane))
                return kb.b.select(ok, v, ch.e.c(0.0))
            ch.finish(ch.sums(fetch), oy, ox, None, ow % p != 0)


def _lower_tiled(k: GpuArgs) -> None:
    kb, simt, node, plan = k.kb, k.simt, k.node, k.plan
    n, c, h, w = node.inputs[0].shape
    oh, ow = node.outputs[0].shape[2:]
    p, tile_h, row_threads = plan.per_thread, plan.extra["tile_h"], plan.extra["row_threads"]
    tiles_h, tiles_w = plan.extra["tiles"]
    kernel = tuple(node.inputs[1].shape[2:])
    (sh, sw), (dh, dw) = node.attrs["strides"], node.attrs["dilations"]
    pt, pl = node.attrs["pads"][:2]
    rows_in, cols_in = input_tile(tile_h, row_threads * p, kernel, (sh, sw), (dh, dw))
    tile = simt.shared(F32, rows_in * cols_in, "input")
    # The block's plane and tile: uniform, so every phase may read them.
    plane, ty, tx = unflatten(kb, simt.block(0), (n * c, tiles_h, tiles_w))
    oy0, ox0 = kb.b.mul(ty, kb.i64(tile_h)), kb.b.mul(tx, kb.i64(row_threads * p))
    top = kb.b.sub(kb.b.mul(oy0, kb.i64(sh)), kb.i64(pt))
    left = kb.b.sub(kb.b.mul(ox0, kb.i64(sw)), kb.i64(pl))
    x_plane = kb.b.mul(plane, kb.i64(h * w))

    with simt.phase() as tid:
        count = rows_in * cols_in
        with kb.loop(0, -(-count // plan.threads), name="stage") as s:
            at = kb.b.add(kb.b.mul(s, kb.i64(plan.threads)), tid)
            with kb.if_then(kb.b.icmp_unsigned("<", at, kb.i64(count))):
                r, q = kb.b.udiv(at, kb.i64(cols_in)), kb.b.urem(at, kb.i64(cols_in))
                y, x = kb.b.add(top, r), kb.b.add(left, q)
                ok = kb.b.and_(inside(kb, y, h), inside(kb, x, w))
                src = kb.b.select(ok, kb.b.add(x_plane, kb.b.add(kb.b.mul(y, kb.i64(w)), x)), x_plane)
                v = kb.load(k.inputs[0], F32, src)
                kb.store(kb.b.select(ok, v, kb.const(F32, 0.0)), tile, F32, at)

    with simt.phase(sync=False) as tid:
        ch = _Channel(k, plane)
        row, g = kb.b.udiv(tid, kb.i64(row_threads)), kb.b.urem(tid, kb.i64(row_threads))
        first = kb.b.add(kb.b.mul(row, kb.i64(sh * cols_in)), kb.b.mul(g, kb.i64(p * sw)))

        def fetch(i: int, q: int) -> ir.Value:
            return kb.load(tile, F32, kb.b.add(first, kb.i64(i * dh * cols_in + q)))
        oy = kb.b.add(oy0, row)
        row_guard = kb.b.icmp_unsigned("<", oy, kb.i64(oh)) if oh % tile_h else None
        ch.finish(ch.sums(fetch), oy, kb.b.add(ox0, kb.b.mul(g, kb.i64(p))), row_guard,
                  ow % (row_threads * p) != 0)


def lower_depthwise(k: GpuArgs) -> None:
    """The kernel of a depthwise Conv node (is_depthwise) under its plan (depthwise_plan)."""
    node = k.node
    if not is_depthwise(node):
        raise CodegenError(f"{node.name} is not a depthwise Conv (group {node.attrs['group']})")
    if any(np.dtype(v.dtype) != F32 for v in node.inputs if v is not None):
        raise CodegenError("the depthwise GPU kernel computes float32 tensors")
    (_lower_tiled if k.plan.extra["variant"] == "tiled" else _lower_direct)(k)

