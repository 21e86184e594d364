"""The CPU kernels of the bounded selection ops (hobbit/ops/selection.py).

BoundedNonZero makes one pass over its input. The coordinates of an element are the
indices of a static loop nest (no division per element); each non-zero one is
written at the running count in every row of the output (row r starts at r * x.size).
Along the innermost dim, chunks of W elements (4 vector registers, at most 64) are
tested at once into a W-bit mask; a sparse chunk (most of a detection model's score
masks) costs a trip per set bit and writes only what it finds, a denser one packs
each 8 lanes through a 256-row table of lane orders (no mispredicted loop exits), a
full one stores vectors. Shorter rows and the ragged edge are tested element by
element without a branch: the coordinates are stored at the count, which only
advances for a non-zero. Every store, vector ones included, lies below the bound:
the count never passes the number of elements already visited.

BoundedCompress makes one pass over the condition, writing the selected positions
into a scratch table the same branchless way, then copies each selected slice
(static inner size) for every outer index. Both read only positions they made
themselves, so neither needs a run-time check."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import I64, KernelBuilder
from hobbit.backend.cpu.copy import emit_row_copy
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.ops.selection import compress_view

INT64 = np.dtype(np.int64)
CHUNK_VECTORS = 4  # a chunk of NonZero's input spans this many vector registers (at most 64 elements)
PACK_TABLE = "nonzero_pack_table"
DENSE_FROM = 4  # a chunk with more than 1/DENSE_FROM of its elements non-zero is packed by table


def bits_dtype(dtype: np.dtype) -> np.dtype:
    """The unsigned integer dtype an element is tested (or copied) as."""
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _magnitude(dtype: np.dtype) -> int | None:
    """The bits that must not all be zero for a non-zero element: all but a float's sign
    (so -0.0 is zero and NaN is not), None for every bit."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return None
    return (1 << (8 * dtype.itemsize - 1)) - 1


def _is_nonzero(kb: KernelBuilder, raw: ir.Value, magnitude: int | None) -> ir.Value:
    """i1 (or a vector of them) for raw element bits that are not zero."""
    b = kb.b
    if magnitude is not None:
        raw = b.and_(raw, _splat_like(raw, magnitude))
    return b.icmp_unsigned("!=", raw, _splat_like(raw, 0))


def _splat_like(value: ir.Value, c: int) -> ir.Constant:
    if isinstance(value.type, ir.VectorType):
        return ir.Constant(value.type, [ir.Constant(value.type.element, c)] * value.type.count)
    return ir.Constant(value.type, c)


def emit_nonzero(kb: KernelBuilder, x: ir.Value, out: ir.Value, extent: ir.Value, dtype: np.dtype,
                 shape: tuple[int, ...], lanes: int) -> None:
    """out[r, :count] = coordinate r of each non-zero element of x (of `shape`, rank >= 1),
    extent = count; `lanes` is the target's vector lanes for the dtype."""
    b = kb.b
    size = int(np.prod(shape, dtype=np.int64))
    count = kb.local(kb.i64(0))
    if size:
        raw = bits_dtype(dtype)
        magnitude = _magnitude(dtype)
        strides = contiguous_strides(shape)
        length = shape[-1]
        width = min(64, CHUNK_VECTORS * lanes)
        chunks = length // width

        def write(coords: list[int | ir.Value], at: ir.Value) -> None:
            for r, c in enumerate(coords):
                kb.store(kb.idx(c), out, INT64, kb.add(r * size, at))

        def row(outer: list[ir.Value]) -> None:
            base = kb.affine(list(zip(outer, strides)))
            if chunks:
                with kb.loop(0, chunks, name="chunk") as ci:
                    _chunk(kb, x, out, raw, magnitude, base, kb.mul(ci, width), width, outer, size, count)
            with kb.loop(chunks * width, length, name="j") as j:
                found = _is_nonzero(kb, kb.load(x, raw, kb.add(base, j)), magnitude)
                at = b.load(count)
                write(outer + [j], at)
                b.store(b.add(at, b.zext(found, I64)), count)

        def nest(d: int, outer: list[ir.Value]) -> None:
            if d == len(shape) - 1:
                row(outer)
                return
            with kb.loop(0, shape[d], name=f"d{d}") as i:
                nest(d + 1, outer + [i])

        nest(0, [])
    kb.store(b.load(count), extent, INT64)


def _pack_table(kb: KernelBuilder) -> ir.GlobalVariable:
    """Row m (256 rows of 8 bytes): the lanes set in the 8-bit mask m, in order, then zeros.
    One table per module, shared by every NonZero kernel."""
    module = kb.fn.module
    existing = module.globals.get(PACK_TABLE)
    if existing is not None:
        return existing
    rows = []
    for m in range(256):
        lanes = [lane for lane in range(8) if m >> lane & 1]
        rows += lanes + [0] * (8 - len(lanes))
    ty = ir.ArrayType(ir.IntType(8), len(rows))
    table = ir.GlobalVariable(module, ty, name=PACK_TABLE)
    table.global_constant = True
    table.linkage = "private"
    table.unnamed_addr = True
    table.initializer = ir.Constant(ty, rows)
    return table


def _chunk(kb: KernelBuilder, x: ir.Value, out: ir.Value, raw: np.dtype, magnitude: int | None,
           base: int | ir.Value, j0: ir.Value, width: int, outer: list[ir.Value], size: int,
           count: ir.Value) -> None:
    """Elements j0 .. j0 + width of one row, tested as one vector into a bit mask, then
    written the way its popcount makes cheapest: an empty chunk not at all; a sparse one
    one coordinate per set bit (count trailing zeros), writing only what it finds, which
    keeps a mostly-zero input cheap; a denser one 8 lanes at a time packed through a
    table; a full one as vectors."""
    b = kb.b
    found = _is_nonzero(kb, kb.vload(x, raw, kb.add(base, j0), width), magnitude)
    mask = b.bitcast(found, ir.IntType(width))
    if width < 64:
        mask = b.zext(mask, I64)
    hits = kb.call_intrinsic("llvm.ctpop.i64", I64, [mask])
    with b.if_then(b.icmp_unsigned("!=", mask, kb.i64(0))):
        with b.if_else(b.icmp_unsigned(">", hits, kb.i64(width // DENSE_FROM))) as (dense, sparse):
            with dense:
                with b.if_else(b.icmp_unsigned("==", hits, kb.i64(width))) as (full, mixed):
                    with full:
                        _write_all(kb, out, j0, width, outer, size, count)
                    with mixed:
                        _pack(kb, out, mask, j0, width, outer, size, count)
            with sparse:
                _write_bits(kb, out, mask, hits, j0, outer, size, count)


def _write_all(kb: KernelBuilder, out: ir.Value, j0: ir.Value, width: int, outer: list[ir.Value], size: int,
               count: ir.Value) -> None:
    """Every element of the chunk is non-zero: its coordinates as width-wide vectors."""
    b = kb.b
    at = b.load(count)
    for r, c in enumerate(outer):
        kb.vstore(kb.splat(c, width), out, INT64, kb.add(r * size, at))
    iota = ir.Constant(ir.VectorType(I64, width), list(range(width)))
    kb.vstore(b.add(kb.splat(j0, width), iota), out, INT64, kb.add(len(outer) * size, at))
    b.store(b.add(at, kb.i64(width)), count)


def _write_bits(kb: KernelBuilder, out: ir.Value, mask: ir.Value, hits: ir.Value, j0: ir.Value,
                outer: list[ir.Value], size: int, count: ir.Value) -> None:
    """One trip per set bit of the mask, lowest first."""
    b = kb.b
    rest = kb.alloca(I64)
    b.store(mask, rest)
    with kb.loop(0, hits, name="hit"):
        bits = b.load(rest)
        t = kb.call_intrinsic("llvm.cttz.i64", I64, [bits, ir.Constant(ir.IntType(1), 1)])
        at = b.load(count)
        for r, c in enumerate(outer + [b.add(j0, t)]):
            kb.store(c, out, INT64, kb.add(r * size, at))
        b.store(b.add(at, kb.i64(1)), count)
        b.store(b.and_(bits, b.sub(bits, kb.i64(1))), rest)


def _pack(kb: KernelBuilder, out: ir.Value, mask: ir.Value, j0: ir.Value, width: int, outer: list[ir.Value],
          size: int, count: ir.Value) -> None:
    """Each 8 lanes of the mask packed through the table into 8 coordinates stored at the
    count; the lanes past their popcount are overwritten next or lie in the padding."""
    b = kb.b
    table = _pack_table(kb)
    for group in range(width // 8):
        byte = b.and_(b.lshr(mask, kb.i64(8 * group)), kb.i64(255))
        lanes = kb.vload(table, np.dtype(np.uint8), b.mul(byte, kb.i64(8)), 8)
        at = b.load(count)
        for r, c in enumerate(outer):
            kb.vstore(kb.splat(c, 8), out, INT64, kb.add(r * size, at))
        inner = b.add(b.zext(lanes, ir.VectorType(I64, 8)), kb.splat(b.add(j0, kb.i64(8 * group)), 8))
        kb.vstore(inner, out, INT64, kb.add(len(outer) * size, at))
        b.store(b.add(at, kb.call_intrinsic("llvm.ctpop.i64", I64, [byte])), count)


def _lower_nonzero(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    emit_nonzero(k.kb, k.inputs[0], k.outputs[0], k.outputs[1], x.dtype, tuple(x.shape) or (1,), k.width(x.dtype))


def emit_compress(kb: KernelBuilder, x: ir.Value, condition: ir.Value, out: ir.Value, extent: ir.Value,
                  table: ir.Value | None, dtype: np.dtype, outer: int, length: int, inner: int,
                  condition_length: int, lanes: int) -> None:
    """out[o, q, :] = x[o, p_q, :] for the positions p_q < length where the condition holds,
    extent = how many there are; `table` holds `length` int64 positions."""
    b = kb.b
    count = kb.local(kb.i64(0))
    tested = min(length, condition_length)
    if tested:
        with kb.loop(0, tested, name="p") as p:
            keep = b.icmp_unsigned("!=", kb.load(condition, np.dtype(np.uint8), p), ir.Constant(ir.IntType(8), 0))
            at = b.load(count)
            kb.store(p, table, INT64, at)
            b.store(b.add(at, b.zext(keep, I64)), count)
        selected = b.load(count)
        raw = bits_dtype(dtype)
        with kb.loop(0, outer, name="o") as o:
            with kb.loop(0, selected, name="q") as q:
                src = kb.mul(kb.add(kb.mul(o, length), kb.load(table, INT64, q)), inner)
                dst = kb.mul(kb.add(kb.mul(o, length), q), inner)
                if inner < lanes:
                    with kb.loop(0, inner, name="c") as c:
                        kb.store(kb.load(x, raw, kb.add(src, c)), out, raw, kb.add(dst, c))
                else:
                    emit_row_copy(kb, x, src, out, dst, inner, raw, lanes)
    kb.store(b.load(count), extent, INT64)


def _lower_compress(k: KernelArgs) -> None:
    x, condition = k.node.inputs
    outer, length, inner = compress_view(tuple(x.shape), k.node.attrs["axis"])
    emit_compress(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], k.outputs[1], k.scratch, x.dtype,
                  outer, length, inner, condition.shape[0], k.width(x.dtype))


CPU.register("BoundedNonZero", lower=_lower_nonzero)
CPU.register("BoundedCompress", lower=_lower_compress)
