"""Strided copies: out[i] = in[offset + sum(i_d * stride_d)] over a shape.

Transpose, Slice, Concat and Split pieces are all this one loop nest with
different strides; LLVM vectorises the innermost loop when its stride is 1. For
a tensor with run-time dims (hobbit.graph.extents) the strides stay the static
ones of the bound shape and only the trip counts (`lengths`) are run-time values.

A transpose whose innermost output dim reads the input with a stride, while another dim reads
it contiguously (NHWC -> NCHW, a matrix's transpose), is copied in square tiles of those two
dims where a row's strided lines would not stay in the L1 cache until the next row reads them
again (_tiled_dim): each input line is then read whole while it is cached, not once per element. Polly's tiling of this nest showed the gap (issue 31,
hobbit.backend.polly: 1.7x on a 1024x1024 transpose, 2.5-3.6x on NHWC -> NCHW, 3.6x on a
64x128x64 rotation, against the plain nest on a Zen 3)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import collapse, collapse_extents
from hobbit.backend.cpu.parallel import Threads

PARALLEL_MIN = 1 << 15  # below this a parallel region costs more than the copy
# A tile's side in bytes of its elements: two 64-byte cache lines of the input read per column.
TILE_BYTES = 128
# The plain nest already reads each input line whole while the innermost dim's lines stay in the
# L1 cache between two output rows: tiled, NCHW -> NHWC of 1x64x56x56 (64 lines) was 1.24x slower
# and 1x12x128x64 (0,1,3,2: 128 lines) 1.19x; from 256 lines (16 KiB, half of a 32 KiB L1)
# tiles paid, 256x4096 -> 0.65x (Zen 3, 1 thread). So a dim of fewer lines is tiled
# only where its stride is a multiple of ALIASING bytes, whose lines all fall in one L1 set:
# 8x64x64x64 (0,3,2,1) -> 0.76x.
LONG_ROW = 256
ALIASING = 4096


def emit_strided_copy(kb: KernelBuilder, src: ir.Value, dst: ir.Value, dtype: np.dtype,
                      shape: tuple[int, ...], src_strides: list[int], src_offset: int | ir.Value,
                      dst_strides: list[int] | None = None, dst_offset: int | ir.Value = 0,
                      threads: Threads | None = None, lengths: tuple[int | ir.Value, ...] | None = None) -> None:
    """With `threads`, copies of at least PARALLEL_MIN elements (of `shape`) share their
    outermost loop. `lengths`: each dim's trip count in this inference where `shape` has
    run-time dims (strides and `shape` are the bound's); every index stays below it."""
    if dst_strides is None:
        dst_strides = contiguous_strides(tuple(shape))
    if any(s == 0 for s in shape):
        return
    stride_sets = [list(src_strides), list(dst_strides)]
    parallel = threads is not None and int(np.prod(shape)) >= PARALLEL_MIN
    if lengths is None:
        loop_shape, (s_strides, d_strides) = collapse(tuple(shape), stride_sets)
        trips: list[int | ir.Value] = list(loop_shape)
        tile = max(1, TILE_BYTES // np.dtype(dtype).itemsize)
        across = _tiled_dim(loop_shape, s_strides, d_strides, tile, np.dtype(dtype).itemsize)
        if across is not None:
            _tiled_copy(kb, src, dst, dtype, loop_shape, s_strides, d_strides, src_offset, dst_offset, across, tile,
                        threads if parallel else None)
            return
    else:
        loop_shape, (s_strides, d_strides), trips = collapse_extents(kb, tuple(shape), stride_sets, tuple(lengths))

    def level(d: int, index: list) -> None:
        if d == len(loop_shape):
            v = kb.load(src, dtype, kb.affine(list(zip(index, s_strides)), src_offset))
            kb.store(v, dst, dtype, kb.affine(list(zip(index, d_strides)), dst_offset))
            return
        lo, hi = threads.split(trips[0]) if d == 0 and parallel else (0, trips[d])
        with kb.loop(lo, hi, name=f"d{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def _tiled_dim(shape: tuple[int, ...], src_strides: list[int], dst_strides: list[int], tile: int,
               itemsize: int) -> int | None:
    """The dim to tile with the innermost one: the dim that reads the input contiguously, where
    the innermost dim writes contiguously but reads with a stride, both span a tile, and the
    innermost dim's lines do not stay in L1 by themselves (LONG_ROW, ALIASING); else None."""
    inner = len(shape) - 1
    if inner < 1 or dst_strides[inner] != 1 or src_strides[inner] == 1 or shape[inner] < tile:
        return None
    if shape[inner] < LONG_ROW and (src_strides[inner] * itemsize) % ALIASING:
        return None
    return next((d for d in range(inner) if src_strides[d] == 1 and shape[d] >= tile), None)


def _tiled_copy(kb: KernelBuilder, src: ir.Value, dst: ir.Value, dtype: np.dtype, shape: tuple[int, ...],
                src_strides: list[int], dst_strides: list[int], src_offset: int | ir.Value,
                dst_offset: int | ir.Value, across: int, tile: int, threads: Threads | None) -> None:
    """The copy with dims `across` and the innermost one walked in `tile` x `tile` squares (the
    last square of a dim cut short), the other dims outside in order; `threads` share the
    outermost loop."""
    inner = len(shape) - 1
    outer = [d for d in range(inner) if d != across]
    order = [(d, "all") for d in outer] + [(across, "tiles"), (inner, "tiles"), (across, "in"), (inner, "in")]
    index: dict[int, int | ir.Value] = {}
    first: dict[int, int | ir.Value] = {}

    def level(at: int) -> None:
        if at == len(order):
            v = kb.load(src, dtype, kb.affine([(index[d], src_strides[d]) for d in range(len(shape))], src_offset))
            kb.store(v, dst, dtype, kb.affine([(index[d], dst_strides[d]) for d in range(len(shape))], dst_offset))
            return
        d, walk = order[at]
        if walk == "all":
            trips: int | ir.Value = shape[d]
        elif walk == "tiles":
            trips = -(-shape[d] // tile)
        else:
            trips = tile if shape[d] % tile == 0 else kb.imin(tile, kb.b.sub(kb.i64(shape[d]), kb.idx(first[d])))
        lo, hi = threads.split(trips) if at == 0 and threads is not None else (0, trips)
        with kb.loop(lo, hi, name=f"d{d}{walk}") as i:
            if walk == "tiles":
                first[d] = kb.mul(i, tile)
            else:
                index[d] = kb.add(first[d], i) if walk == "in" else i
            level(at + 1)

    level(0)


def emit_fill(kb: KernelBuilder, dst: ir.Value, dtype: np.dtype, start: int | ir.Value, stop: int | ir.Value,
              value: float | ir.Value, base: int | ir.Value = 0) -> None:
    """dst[base + start : base + stop] = value (nothing when stop <= start); one flat loop
    LLVM turns into vector stores or a memset."""
    if isinstance(start, int) and isinstance(stop, int) and stop <= start:
        return
    c = kb.const(dtype, value) if isinstance(value, (int, float)) else value
    with kb.loop(start, stop, name="fill") as i:
        kb.store(c, dst, dtype, kb.add(base, i))


def emit_row_copy(kb: KernelBuilder, src: ir.Value, src_base: int | ir.Value, dst: ir.Value,
                  dst_base: int | ir.Value, count: int | ir.Value, dtype: np.dtype, width: int) -> None:
    """Copy `count` contiguous elements (a run-time count: a row of a run-time dim) in vectors
    of `width` (a masked one for the tail): rows moved within the caches must not be limited
    by a scalar loop."""
    if not isinstance(count, int):
        b = kb.b
        full = b.mul(b.udiv(count, kb.i64(width)), kb.i64(width))
        with kb.loop(0, full, width, name="iw") as iw:
            v = kb.vload(src, dtype, kb.add(src_base, iw), width)
            kb.vstore(v, dst, dtype, kb.add(dst_base, iw))
        tail = b.sub(count, full)
        with kb.if_then(b.icmp_unsigned("!=", tail, kb.i64(0))):
            mask = kb.runtime_prefix_mask(width, tail)
            v = kb.vload(src, dtype, kb.add(src_base, full), width, mask)
            kb.vstore(v, dst, dtype, kb.add(dst_base, full), mask)
        return
    full = count - count % width
    if full:
        with kb.loop(0, full, width, name="iw") as iw:
            v = kb.vload(src, dtype, kb.add(src_base, iw), width)
            kb.vstore(v, dst, dtype, kb.add(dst_base, iw))
    if count % width:
        mask = kb.prefix_mask(width, count % width)
        v = kb.vload(src, dtype, kb.add(src_base, full), width, mask)
        kb.vstore(v, dst, dtype, kb.add(dst_base, full), mask)


def emit_deinterleaved_row_copy(kb: KernelBuilder, src: ir.Value, src_base: int | ir.Value, count: int | ir.Value,
                                dst: ir.Value, dst_base: int | ir.Value, left: int, phases: int,
                                phase_stride: int, dtype: np.dtype, lanes: int) -> None:
    """Copy `count` contiguous elements (a run-time count: a row of a run-time dim) into a
    padded row stored by phase: source element iw is padded column x = left + iw and goes to
    dst[dst_base + (x % phases)*phase_stride + x // phases]. A stride-`phases` consumer then
    reads consecutive outputs' taps as one contiguous vector. Chunks of phases*lanes elements
    are loaded as one wide vector and each phase is taken out with one shuffle."""
    chunk = phases * lanes
    vty_index = ir.VectorType(ir.IntType(32), lanes)
    b = kb.b

    def piece(iw0, out0, valid: int | ir.Value | None) -> None:
        """Source elements iw0 .. iw0 + chunk (the first `valid` of them); out0 = iw0 // phases."""
        if isinstance(valid, ir.Value):
            mask = kb.runtime_prefix_mask(chunk, valid)
        else:
            mask = None if valid is None else kb.prefix_mask(chunk, valid)
        wide = kb.vload(src, dtype, kb.add(src_base, iw0), chunk, mask)
        for p in range(phases):
            first = (p - left) % phases  # the first source offset in the chunk with phase p
            if isinstance(valid, ir.Value):  # ceil((valid - first) / phases), at least 0
                ahead = b.add(valid, kb.i64(phases - 1 - first))
                n_out = b.udiv(b.select(b.icmp_signed("<", ahead, kb.i64(0)), kb.i64(0), ahead), kb.i64(phases))
            else:
                n_out = lanes if valid is None else max(0, -(-(valid - first) // phases))
                if n_out == 0:
                    continue
            taken = kb.b.shuffle_vector(wide, wide, ir.Constant(vty_index, [first + phases * i for i in range(lanes)]))
            at = kb.add(kb.add(dst_base, p * phase_stride + (left + first) // phases), out0)
            out_mask = kb.runtime_prefix_mask(lanes, n_out) if isinstance(n_out, ir.Value) else \
                None if n_out == lanes else kb.prefix_mask(lanes, n_out)
            kb.vstore(taken, dst, dtype, at, out_mask)

    if not isinstance(count, int):
        chunks = b.udiv(count, kb.i64(chunk))
        with kb.loop(0, chunks, name="chunk") as ci:
            piece(kb.mul(ci, chunk), kb.mul(ci, lanes), None)
        tail = b.sub(count, b.mul(chunks, kb.i64(chunk)))
        with kb.if_then(b.icmp_unsigned("!=", tail, kb.i64(0))):
            piece(b.mul(chunks, kb.i64(chunk)), b.mul(chunks, kb.i64(lanes)), tail)
        return
    chunks, tail = divmod(count, chunk)
    if chunks:
        with kb.loop(0, chunks, name="chunk") as ci:
            piece(kb.mul(ci, chunk), kb.mul(ci, lanes), None)
    if tail:
        piece(chunks * chunk, chunks * lanes, tail)
