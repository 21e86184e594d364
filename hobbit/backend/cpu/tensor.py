"""The CPU kernels of the data-movement ops (hobbit/ops/tensor.py): strided copies, or
index-table copies for Gather and reflect/edge/wrap Pad. View ops have no body.

Each kernel also says which run-time dims (hobbit.graph.extents) it follows (the
`dynamic=` predicates, `_*_dynamic`): a copy walks each dim up to its length in this
inference (strides stay the bound's); Concat along a run-time axis places each part
after the run-time extents of the parts before it, and skips a first part that is already
in place (a key/value cache kept in its buffer: FIRST_IN_PLACE); Gather checks an index along a
run-time axis against that axis's run-time length. The rest is refused with a reason."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import numpy as np
from llvmlite import ir

from hobbit.graph.extents import FIRST_IN_PLACE, Extent
from hobbit.graph.ir import Node, Value
from hobbit.graph.shapes import broadcast_strides, contiguous_strides
from hobbit.emit.builder import I64
from hobbit.emit.scalar_ops import SCALARS
from hobbit.backend.cpu.copy import emit_fill, emit_strided_copy
from hobbit.backend.cpu.elementwise import dynamic_extents, elementwise_dynamic, emit_elementwise
from hobbit.backend.cpu.gather import (constant_table, emit_gather_extents, emit_runtime_gather,
                                       emit_table_copy)
from hobbit.backend.cpu.args import CPU, KernelArgs


def _extents(value: Value) -> tuple[Extent | None, ...]:
    """A value's run-time extent per dim (None for a static dim)."""
    return value.extents or (None,) * len(value.shape)


@CPU.kernel("Reshape")
def _lower_view(k: KernelArgs) -> None:
    """A view shares its input's memory: nothing to compute."""


@CPU.kernel("Copy", scalar=SCALARS["Copy"], dynamic=elementwise_dynamic)
def _lower_copy(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], k.width(out.dtype),
                     extents=dynamic_extents(k, out))


def _perm(node: Node) -> tuple[int, ...]:
    return tuple(node.attrs["perm"]) or tuple(reversed(range(len(node.inputs[0].shape))))


def _transpose_dynamic(node: Node) -> str | None:
    x, out = node.inputs[0], node.outputs[0]
    if [_extents(x)[p] for p in _perm(node)] != list(_extents(out)):
        return "its output's run-time dims are not its input's, permuted"
    return None


@CPU.kernel("Transpose", dynamic=_transpose_dynamic)
def _lower_transpose(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    perm = _perm(k.node)
    in_strides = contiguous_strides(tuple(x.shape))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(out.shape),
                      [in_strides[p] for p in perm], 0, threads=k.threads, lengths=dynamic_extents(k, out))


def _slabs_dynamic(node: Node, whole: Value, parts: list[Value], along_run_time: bool) -> str | None:
    """Concat/Split: each part has the whole's run-time dims off the axis; along the axis the
    parts are static, or (Concat, `along_run_time`) the whole's extent is their sum."""
    axis = node.attrs["axis"]
    whole_extents = _extents(whole)
    for part in parts:
        off_axis = [e for d, e in enumerate(_extents(part)) if d != axis]
        if off_axis != [e for d, e in enumerate(whole_extents) if d != axis]:
            return f"'{part.name}' has other run-time dims than '{whole.name}'"
    if node.attrs.get("in_place") and any(_extents(v)[axis] is not None for v in [whole, *parts]):
        return "it is done in place, its parts at offsets of their bound sizes, along a run-time axis"
    if whole_extents[axis] is None:
        return None
    if not along_run_time:
        return f"it splits run-time dim {axis}"
    lengths = [_extents(p)[axis] or Extent((), int(p.shape[axis])) for p in parts]
    if any(e.div != 1 for e in lengths):
        return f"the run-time lengths of its parts along axis {axis} are strided (floor divisions)"
    if _sum_extents(lengths) != whole_extents[axis]:
        return f"the run-time lengths of its parts along axis {axis} do not add up to the output's"
    return None


def _sum_extents(extents: list[Extent]) -> Extent:
    """The sum of affine lengths."""
    coeffs: dict[int, int] = {}
    for e in extents:
        for slot, c in e.terms:
            coeffs[slot] = coeffs.get(slot, 0) + c
    return Extent(tuple(sorted((s, c) for s, c in coeffs.items() if c)), sum(e.const for e in extents))


def _copy_slabs(k: KernelArgs, whole: Value, whole_ptr: ir.Value, parts: list[Value], part_ptrs: list[ir.Value],
                into_whole: bool) -> None:
    """Copy each part to (Concat) or from (Split) its slab of the whole along `axis`, the
    parts' slabs in order (after the parts before it: their run-time lengths along a
    run-time axis). A Concat marked FIRST_IN_PLACE (its first part stored at the whole's
    strides) copies its first part only where it is not the whole's own buffer."""
    strides = contiguous_strides(tuple(whole.shape))
    axis = k.node.attrs["axis"]
    start: int | ir.Value = 0
    for index, (part, ptr) in enumerate(zip(parts, part_ptrs)):
        shape = tuple(part.shape)
        lengths = dynamic_extents(k, part)
        slab = (strides, k.kb.mul(start, strides[axis]))
        if into_whole:
            with _unless_in_place(k, ptr, whole_ptr) if index == 0 else nullcontext():
                emit_strided_copy(k.kb, ptr, whole_ptr, whole.dtype, shape, contiguous_strides(shape), 0, *slab,
                                  threads=k.threads, lengths=lengths)
        else:
            emit_strided_copy(k.kb, whole_ptr, ptr, whole.dtype, shape, *slab, threads=k.threads, lengths=lengths)
        start = k.kb.add(start, shape[axis] if lengths is None else lengths[axis])


def _unless_in_place(k: KernelArgs, part_ptr: ir.Value, whole_ptr: ir.Value) -> AbstractContextManager:
    """Where the Concat is FIRST_IN_PLACE: code inside runs only where its first part is not
    the whole's own buffer; else it always runs."""
    if not k.node.attrs.get(FIRST_IN_PLACE):
        return nullcontext()
    b = k.kb.b
    return k.kb.if_then(b.icmp_unsigned("!=", b.ptrtoint(part_ptr, I64), b.ptrtoint(whole_ptr, I64)))


def _concat_dynamic(node: Node) -> str | None:
    return _slabs_dynamic(node, node.outputs[0], node.inputs, along_run_time=True)


@CPU.kernel("Concat", dynamic=_concat_dynamic)
def _lower_concat(k: KernelArgs) -> None:
    _copy_slabs(k, k.node.outputs[0], k.outputs[0], k.node.inputs, k.inputs, into_whole=True)


def _split_dynamic(node: Node) -> str | None:
    return _slabs_dynamic(node, node.inputs[0], list(node.outputs), along_run_time=False)


@CPU.kernel("Split", dynamic=_split_dynamic)
def _lower_split(k: KernelArgs) -> None:
    _copy_slabs(k, k.node.inputs[0], k.inputs[0], k.node.outputs, k.outputs, into_whole=False)


def _slice_dynamic(node: Node) -> str | None:
    """A run-time dim must pass through whole: start 0, step 1, the input's extent."""
    x, out = node.inputs[0], node.outputs[0]
    a = node.attrs
    for d, (e_in, e_out) in enumerate(zip(_extents(x), _extents(out))):
        if (e_in is not None or e_out is not None) and (a["starts"][d] != 0 or a["steps"][d] != 1 or e_in != e_out):
            return f"it slices run-time dim {d}"
    return None


@CPU.kernel("Slice", dynamic=_slice_dynamic)
def _lower_slice(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    a = k.node.attrs
    in_strides = contiguous_strides(tuple(x.shape))
    offset = sum(s * st for s, st in zip(a["starts"], in_strides))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(a["sizes"]),
                      [step * st for step, st in zip(a["steps"], in_strides)], offset, threads=k.threads,
                      lengths=dynamic_extents(k, k.node.outputs[0]))


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


def _pad_dynamic(node: Node) -> str | None:
    """Constant padding follows run-time dims (the output's extent is the input's plus the
    pads); reflect, edge and wrap read from the far end, so only their unpadded dims may be."""
    x, out = node.inputs[0], node.outputs[0]
    pads, rank = node.attrs["pads"], len(x.shape)
    for d, (e_in, e_out) in enumerate(zip(_extents(x), _extents(out))):
        if e_in is None and e_out is None:
            continue
        if e_in is None or e_out != e_in.plus(pads[d] + pads[d + rank]):
            return f"its output's run-time dim {d} is not its input's plus the pads"
        if node.attrs["mode"] != "constant" and (pads[d] or pads[d + rank]):
            return f"it pads run-time dim {d} in {node.attrs['mode']} mode"
    return None


def _emit_fill_extents(kb, dst: ir.Value, dtype: np.dtype, shape: tuple[int, ...],
                       lengths: tuple[int | ir.Value, ...], value: float) -> None:
    """dst (contiguous in `shape`) = value inside `lengths`: a strided copy of one constant."""
    scalar = kb.fn.module.get_unique_name("pad_value")
    cell = ir.GlobalVariable(kb.fn.module, kb.const(dtype, value).type, name=scalar)
    cell.global_constant, cell.linkage, cell.unnamed_addr = True, "private", True
    cell.initializer = kb.const(dtype, value)
    emit_strided_copy(kb, cell, dst, dtype, shape, [0] * len(shape), 0, lengths=lengths)


@CPU.kernel("Pad", dynamic=_pad_dynamic)
def _lower_pad(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    a = k.node.attrs
    rank, pads = len(x.shape), a["pads"]
    in_strides = contiguous_strides(tuple(x.shape))
    in_lengths, out_lengths = dynamic_extents(k, x), dynamic_extents(k, out)
    if a["mode"] != "constant":
        offsets = [[pad_source_index(o - pads[d], x.shape[d], a["mode"]) * in_strides[d]
                    for o in range(out.shape[d])] for d in range(rank)]
        emit_table_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, offsets, out_lengths)
        return
    if out_lengths is None:
        emit_fill(k.kb, k.outputs[0], x.dtype, 0, out.type.size, a["value"])
    else:
        _emit_fill_extents(k.kb, k.outputs[0], x.dtype, tuple(out.shape), out_lengths, a["value"])
    out_strides = contiguous_strides(tuple(out.shape))
    begin = [max(0, -pads[d]) for d in range(rank)]
    cut = [begin[d] + max(0, -pads[d + rank]) for d in range(rank)]
    shape = tuple(x.shape[d] - cut[d] for d in range(rank))
    lengths = None if in_lengths is None else tuple(k.kb.add(n, -c) for n, c in zip(in_lengths, cut))
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, shape, in_strides,
                      sum(b * s for b, s in zip(begin, in_strides)), out_strides,
                      sum(max(0, pads[d]) * out_strides[d] for d in range(rank)), lengths=lengths)


def _gather_dynamic(node: Node) -> str | None:
    """Any Gather whose output's run-time dims are its data's (off the axis) and its indices'."""
    data, indices = node.inputs
    out, axis = node.outputs[0], node.attrs["axis"]
    expected = _extents(data)[:axis] + _extents(indices) + _extents(data)[axis + 1:]
    if tuple(_extents(out)) != tuple(expected):
        return "its output's run-time dims are not its data's and its indices'"
    return None


@CPU.kernel("Gather", dynamic=_gather_dynamic)
def _lower_gather(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    axis = k.node.attrs["axis"]
    if data.extents is not None or indices.extents is not None:
        _lower_gather_extents(k)
        return
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


def _lower_gather_extents(k: KernelArgs) -> None:
    """Gather on run-time dims: constant indices into a static axis are positions known now
    (a strided copy when they are one static block); others are checked at run time against
    the axis's length in this inference."""
    data, indices = k.node.inputs
    axis = k.node.attrs["axis"]
    data_lengths, index_lengths = k.extents(data), k.extents(indices)
    static_axis = _extents(data)[axis] is None
    dim = int(data.shape[axis])
    if indices.const is not None and static_axis and indices.extents is None:
        outer_shape, inner_shape = tuple(data.shape[:axis]), tuple(data.shape[axis + 1:])
        inner = int(np.prod(inner_shape, dtype=np.int64))
        strides = contiguous_strides(tuple(data.shape))
        idx = [int(i) % dim for i in indices.const.reshape(-1)]  # the converter range-checked them
        offsets = ([range(0, n * s, s) for n, s in zip(outer_shape, strides)] + [[i * inner for i in idx]]
                   + [range(0, n * s, s) for n, s in zip(inner_shape, strides[axis + 1:])])
        lengths = data_lengths[:axis] + (len(idx),) + data_lengths[axis + 1:]
        emit_table_copy(k.kb, k.inputs[0], k.outputs[0], data.dtype, offsets, lengths)
        return
    index_ptr, index_dtype, checked = k.inputs[1], indices.dtype, True
    if indices.const is not None:
        values = indices.const.reshape(-1).astype(np.int64)
        if static_axis:  # positions now, as the converter range-checked them
            values, checked = values % dim, False
        index_ptr, index_dtype = constant_table(k.kb, values), np.dtype(np.int64)
    emit_gather_extents(k.kb, k.inputs[0], index_ptr, k.outputs[0], data.dtype, index_dtype, tuple(data.shape),
                        tuple(indices.shape), axis, data_lengths, index_lengths, checked, k.threads)


def _expand_dynamic(node: Node) -> str | None:
    """The input's run-time dims stay where they are; a run-time output dim the input has
    as 1 is a broadcast (stride 0)."""
    x, out = node.inputs[0], node.outputs[0]
    offset = len(out.shape) - len(x.shape)
    for d, e in enumerate(_extents(x)):
        if e is not None and _extents(out)[offset + d] != e:
            return f"its input's run-time dim {d} is broadcast"
    return None


@CPU.kernel("Expand", dynamic=_expand_dynamic)
def _lower_expand(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    shape = tuple(out.shape)
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, shape, broadcast_strides(tuple(x.shape), shape), 0,
                      lengths=dynamic_extents(k, out))


def _tile_dynamic(node: Node) -> str | None:
    x, out = node.inputs[0], node.outputs[0]
    for d, (r, e_in, e_out) in enumerate(zip(node.attrs["repeats"], _extents(x), _extents(out))):
        if (e_in is not None or e_out is not None) and (r != 1 or e_in != e_out):
            return f"it repeats run-time dim {d}"
    return None


@CPU.kernel("Tile", dynamic=_tile_dynamic)
def _lower_tile(k: KernelArgs) -> None:
    """The output viewed as [r0, d0, r1, d1, ...] reads the input with stride 0 on each r."""
    x = k.node.inputs[0]
    in_strides = contiguous_strides(tuple(x.shape))
    x_lengths = dynamic_extents(k, x)
    shape, strides, lengths = [], [], []
    for d, (n, r, s) in enumerate(zip(x.shape, k.node.attrs["repeats"], in_strides)):
        shape += [r, n]
        strides += [0, s]
        lengths += [r, n if x_lengths is None else x_lengths[d]]
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(shape), strides, 0,
                      lengths=None if x_lengths is None else tuple(lengths))
