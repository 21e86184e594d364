"""Strided copies: out[i] = in[offset + sum(i_d * stride_d)] over a static shape.

Transpose, Slice, Concat and Split pieces are all this one loop nest with
different strides; LLVM vectorises the innermost loop when its stride is 1."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.lower.builder import KernelBuilder
from hobbit.lower.elementwise import collapse


def emit_strided_copy(kb: KernelBuilder, src: ir.Value, dst: ir.Value, dtype: np.dtype,
                      shape: tuple[int, ...], src_strides: list[int], src_offset: int,
                      dst_strides: list[int] | None = None, dst_offset: int = 0) -> None:
    if dst_strides is None:
        dst_strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    if any(s == 0 for s in shape):
        return
    loop_shape, (s_strides, d_strides) = collapse(tuple(shape), [list(src_strides), list(dst_strides)])

    def level(d: int, index: list) -> None:
        if d == len(loop_shape):
            v = kb.load(src, dtype, kb.affine(list(zip(index, s_strides)), src_offset))
            kb.store(v, dst, dtype, kb.affine(list(zip(index, d_strides)), dst_offset))
            return
        with kb.loop(0, loop_shape[d], name=f"d{d}") as i:
            level(d + 1, index + [i])

    level(0, [])


def emit_fill(kb: KernelBuilder, dst: ir.Value, dtype: np.dtype, count: int, value: float) -> None:
    """dst[0:count] = value; one flat loop LLVM turns into vector stores (or memset)."""
    if count == 0:
        return
    c = kb.const(dtype, value)
    with kb.loop(0, count, name="fill") as i:
        kb.store(c, dst, dtype, i)
