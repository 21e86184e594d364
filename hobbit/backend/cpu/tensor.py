"""The CPU kernels of the data-movement ops (hobbit/ops/tensor.py): strided copies, or
index-table copies for Gather and reflect/edge/wrap Pad. View ops have no body."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.graph.ir import Value
from hobbit.graph.shapes import broadcast_strides, contiguous_strides
from hobbit.emit.scalar_ops import SCALARS
from hobbit.backend.cpu.copy import emit_fill, emit_strided_copy
from hobbit.backend.cpu.elementwise import emit_elementwise
from hobbit.backend.cpu.gather import emit_runtime_gather, emit_table_copy
from hobbit.backend.cpu.args import CPU, KernelArgs


@CPU.kernel("Reshape")
def _lower_view(k: KernelArgs) -> None:
    """A view shares its input's memory: nothing to compute."""


@CPU.kernel("Copy", scalar=SCALARS["Copy"])
def _lower_copy(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], k.width(out.dtype))


@CPU.kernel("Transpose")
def _lower_transpose(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    perm = tuple(k.node.attrs["perm"]) or tuple(reversed(range(len(x.shape))))
    in_strides = contiguous_strides(tuple(x.shape))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(k.node.outputs[0].shape),
                      [in_strides[p] for p in perm], 0, threads=k.threads)


def _copy_slabs(k: KernelArgs, whole: Value, whole_ptr: ir.Value, parts: list[Value], part_ptrs: list[ir.Value],
                into_whole: bool) -> None:
    """Copy each part to (Concat) or from (Split) its slab of the whole along `axis`, the
    parts' slabs in order."""
    strides = contiguous_strides(tuple(whole.shape))
    axis = k.node.attrs["axis"]
    start = 0
    for part, ptr in zip(parts, part_ptrs):
        shape = tuple(part.shape)
        slab = (strides, start * strides[axis])
        if into_whole:
            emit_strided_copy(k.kb, ptr, whole_ptr, whole.dtype, shape, contiguous_strides(shape), 0, *slab,
                              threads=k.threads)
        else:
            emit_strided_copy(k.kb, whole_ptr, ptr, whole.dtype, shape, *slab, threads=k.threads)
        start += shape[axis]


@CPU.kernel("Concat")
def _lower_concat(k: KernelArgs) -> None:
    _copy_slabs(k, k.node.outputs[0], k.outputs[0], k.node.inputs, k.inputs, into_whole=True)


@CPU.kernel("Split")
def _lower_split(k: KernelArgs) -> None:
    _copy_slabs(k, k.node.inputs[0], k.inputs[0], k.node.outputs, k.outputs, into_whole=False)


@CPU.kernel("Slice")
def _lower_slice(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    a = k.node.attrs
    in_strides = contiguous_strides(tuple(x.shape))
    offset = sum(s * st for s, st in zip(a["starts"], in_strides))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(a["sizes"]),
                      [step * st for step, st in zip(a["steps"], in_strides)], offset, threads=k.threads)


def pad_source_index(j: int, size: int, mode: str) -> int:
    """Source index along one dim for position `j` (relative to the input's start) outside [0, size)."""
    if mode == "edge":
        return min(max(j, 0), size - 1)
    if mode == "wrap":
        return j % size
    period = 2 * (size - 1)  # reflect, the edge element not repeated
    if period == 0:
        return 0
    j = j % period
    return j if j < size else period - j


@CPU.kernel("Pad")
def _lower_pad(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    a = k.node.attrs
    rank, pads = len(x.shape), a["pads"]
    in_strides = contiguous_strides(tuple(x.shape))
    if a["mode"] != "constant":
        offsets = [[pad_source_index(o - pads[d], x.shape[d], a["mode"]) * in_strides[d]
                    for o in range(out.shape[d])] for d in range(rank)]
        emit_table_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, offsets)
        return
    emit_fill(k.kb, k.outputs[0], x.dtype, 0, out.type.size, a["value"])
    out_strides = contiguous_strides(tuple(out.shape))
    begin = [max(0, -pads[d]) for d in range(rank)]
    shape = tuple(x.shape[d] - begin[d] - max(0, -pads[d + rank]) for d in range(rank))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, shape, in_strides,
                      sum(b * s for b, s in zip(begin, in_strides)), out_strides,
                      sum(max(0, pads[d]) * out_strides[d] for d in range(rank)))


@CPU.kernel("Gather")
def _lower_gather(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    axis = k.node.attrs["axis"]
    outer = int(np.prod(data.shape[:axis], dtype=np.int64))
    inner = int(np.prod(data.shape[axis + 1:], dtype=np.int64))
    dim = data.shape[axis]
    if indices.const is None:
        emit_runtime_gather(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], data.dtype, indices.dtype,
                            outer, dim, indices.type.size, inner, axis)
        return
    idx = [int(i) % dim for i in indices.const.reshape(-1)]  # the converter range-checked them
    offsets = [range(0, outer * dim * inner, dim * inner) if outer else [],
               [i * inner for i in idx], range(inner)]
    emit_table_copy(k.kb, k.inputs[0], k.outputs[0], data.dtype, offsets)


@CPU.kernel("Expand")
def _lower_expand(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    shape = tuple(out.shape)
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, shape, broadcast_strides(tuple(x.shape), shape), 0)


@CPU.kernel("Tile")
def _lower_tile(k: KernelArgs) -> None:
    """The output viewed as [r0, d0, r1, d1, ...] reads the input with stride 0 on each r."""
    x = k.node.inputs[0]
    in_strides = contiguous_strides(tuple(x.shape))
    shape, strides = [], []
    for d, r, s in zip(x.shape, k.node.attrs["repeats"], in_strides):
        shape += [r, d]
        strides += [0, s]
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(shape), strides, 0)
