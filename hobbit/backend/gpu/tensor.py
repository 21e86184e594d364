"""Data-movement kernels on the GPU: Concat and Transpose (Copy is element-wise:
hobbit.backend.gpu.elementwise runs it, fused steps included).

Both are written so that a warp's stores are consecutive (coalesced): a thread owns
output elements `threads` apart (hobbit.backend.gpu.elementwise.for_each_output). A Concat's
block copies one input into its slice of the output (the plan gives each input its own
blocks), reading the input contiguously too; a Transpose reads its input through the
permuted strides, after merging the dims that stay adjacent (a [N, C, H*W] -> [N, H*W, C]
permutation has three dims, whatever the rank it was written with)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.backend.gpu.elementwise import for_each_output, unflatten
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.emit.epilogue import collapse


def lower_concat(k: GpuArgs) -> None:
    kb, simt, plan, node = k.kb, k.simt, k.plan, k.node
    out = node.outputs[0]
    axis = node.attrs["axis"]
    inner = int(np.prod(out.shape[axis + 1:], dtype=np.int64))
    row = out.shape[axis] * inner  # one outer index's run of the output
    starts = plan.extra["starts"]
    span = plan.threads * plan.per_thread
    with simt.phase(sync=False) as tid:
        block = simt.block(0)
        offset = 0
        for i, (v, ptr) in enumerate(zip(node.inputs, k.inputs)):
            piece = v.shape[axis] * inner  # this input's run within each output row
            size = int(v.type.size)
            if starts[i] < starts[i + 1]:
                mine = kb.b.and_(kb.b.icmp_unsigned(">=", block, kb.i64(starts[i])),
                                 kb.b.icmp_unsigned("<", block, kb.i64(starts[i + 1])))
                with kb.if_then(mine):
                    first = kb.b.add(kb.b.mul(kb.b.sub(block, kb.i64(starts[i])), kb.i64(span)), tid)
                    for p in range(plan.per_thread):
                        flat = kb.b.add(first, kb.i64(p * plan.threads))
                        with kb.if_then(kb.b.icmp_unsigned("<", flat, kb.i64(size))):
                            _copy_piece(k, ptr, flat, piece, row, offset, v.dtype)
            offset += piece


def _copy_piece(k: GpuArgs, src: ir.Value, flat: ir.Value, piece: int, row: int, offset: int,
                dtype: np.dtype) -> None:
    """Element `flat` of an input whose rows of `piece` elements land `offset` into the
    output's rows of `row`."""
    kb = k.kb
    if piece == row:
        at = flat
    else:
        outer, within = kb.b.udiv(flat, kb.i64(piece)), kb.b.urem(flat, kb.i64(piece))
        at = kb.b.add(kb.b.mul(outer, kb.i64(row)), kb.b.add(within, kb.i64(offset)))
    kb.store(kb.load(src, dtype, flat), k.outputs[0], dtype, at)


def lower_transpose(k: GpuArgs) -> None:
    kb, node = k.kb, k.node
    x, out = node.inputs[0], node.outputs[0]
    perm = tuple(node.attrs["perm"]) or tuple(reversed(range(len(x.shape))))
    in_strides = contiguous_strides(tuple(x.shape))
    out_shape = tuple(out.shape)
    shape, (src_strides, _) = collapse(out_shape, [[in_strides[p] for p in perm], contiguous_strides(out_shape)])

    def body(flat: ir.Value) -> None:
        index = unflatten(kb, flat, shape)
        kb.store(kb.load(k.inputs[0], x.dtype, kb.affine(list(zip(index, src_strides)))), k.outputs[0], x.dtype, flat)

    for_each_output(k, int(out.type.size), body)


GPU.register("Concat", lower=lower_concat)
GPU.register("Transpose", lower=lower_transpose)
