"""Rows of vectors -> their columns, in registers.

A GEMM that stores C transposed (vectors along N, written with a stride: a conv whose
vectors run along output channels, a Winograd GEMM by tiles) holds MR rows of W lanes whose
columns are contiguous in memory. Writing each lane alone took two instructions per element
(an extract and a store), and in IR four per element: a third of ResNet-18's module, where
LLVM's SLP vectoriser and dead store elimination spent most of their time. Transposed in
registers, the block is written as W stores of MR elements.

How: with the rows padded to P (a power of two, at most W), element (row r, lane x) sits
at vector r, lane x. Stage b swaps bit b of the vector index with bit b of the lane index,
one two-source shuffle per vector; after log2(P) stages vector v holds, for every h < W/P,
column h*P + v in lanes h*P .. h*P + P - 1, rows in order."""

from __future__ import annotations

from llvmlite import ir

I32 = ir.IntType(32)


def padded_rows(rows: int) -> int:
    """P: the power of two the rows are padded to."""
    return 1 << (rows - 1).bit_length()


def transposable(rows: int, width: int) -> bool:
    """Whether `rows` vectors of `width` lanes can be transposed here (every column fits a
    vector of P lanes, and W is a power of two)."""
    return width & (width - 1) == 0 and padded_rows(rows) <= width


def columns(b: ir.IRBuilder, rows: list[ir.Value], count: int) -> list[ir.Value]:
    """The first `count` columns of `rows` (equal vectors, transposable): column c as a vector
    of P lanes, lane r = rows[r][c] (the lanes past len(rows) are undefined)."""
    vty = rows[0].type
    width, p = vty.count, padded_rows(len(rows))
    vectors = list(rows) + [ir.Constant(vty, None)] * (p - len(rows))
    for bit in range(p.bit_length() - 1):
        step = 1 << bit
        low = ir.Constant(ir.VectorType(I32, width), [(x & ~step) + (width if x & step else 0) for x in range(width)])
        high = ir.Constant(ir.VectorType(I32, width), [(x | step) + (width if x & step else 0) for x in range(width)])
        for v in range(p):
            if v & step:
                continue
            first, second = vectors[v], vectors[v | step]
            vectors[v] = b.shuffle_vector(first, second, low)
            vectors[v | step] = b.shuffle_vector(first, second, high)
    out = []
    for c in range(count):
        h, v = divmod(c, p)
        lanes = ir.Constant(ir.VectorType(I32, p), [h * p + r for r in range(p)])
        out.append(vectors[v] if p == width else b.shuffle_vector(vectors[v], ir.Constant(vty, None), lanes))
    return out
