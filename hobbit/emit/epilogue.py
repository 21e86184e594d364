"""Fused epilogues: the element-wise steps a kernel applies to what it computed.

A fused group is a producer (an element-wise op, or a kernel such as Conv or
Gemm) followed by a chain of element-wise steps. The producer hands each output
vector to `Epilogue.apply` with its index in the producer's *view* of the output
(e.g. Conv's [N, C, H*W]); every step operand is broadcast into that view by
strides computed here, so a bias is a scalar broadcast and a residual is a
vector load: one pass over memory. The broadcasting load and the merging of
contiguous dims are what every backend's element-wise loop uses too."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.graph.ir import EpilogueStep, Node
from hobbit.ops.registry import get_op
from hobbit.graph.shapes import view_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.half import widen
from hobbit.emit.scalar import Emit
from hobbit.emit.scalar_ops import SCALARS


def scalar_expr(op: str) -> Callable[..., Any]:
    """The scalar expression of element-wise op `op` (hobbit/emit/scalar_ops.py)."""
    kernel = get_op(op).kernel
    if kernel not in SCALARS:
        raise CodegenError(f"op {op} has no scalar expression (kernel {kernel!r})")
    return SCALARS[kernel]


class Epilogue:
    """Applies a node's fused element-wise steps to values the kernel computed."""

    def __init__(self, kb: KernelBuilder, node: Node, operand_ptrs: list[ir.Value | None],
                 view: tuple[int, ...]):
        self.kb = kb
        self.steps: list[tuple[EpilogueStep, ir.Value | None, list[int] | None]] = []
        out_shape = node.outputs[0].shape
        for step, ptr in zip(node.epilogue, operand_ptrs):
            strides = None
            if step.operand is not None:
                strides = view_strides(step.operand.shape, out_shape, view)
                assert strides is not None, "fusion admitted an operand the view cannot index"
            self.steps.append((step, ptr, strides))

    def apply(self, e: Emit, x: ir.Value, index: list[int | ir.Value], mask: ir.Value | None = None,
              axis: int = -1) -> ir.Value:
        """Run the steps on `x`, whose lanes lie along view dim `axis` starting at `index`."""
        for step, ptr, strides in self.steps:
            scalar = scalar_expr(step.op)
            if ptr is None:
                x = scalar(e, [x], step.attrs)
                continue
            y = load_broadcast(e, ptr, strides, index, mask, axis, stored=step.operand.dtype)
            args = [y, x] if step.swap else [x, y]
            x = scalar(e, args, step.attrs)
        return x


    def prefetch(self, index: list[int | ir.Value], axis: int = -1) -> None:
        """Start fetching the operand vectors `apply` will read at `index` (a residual
        produced kernels ago is rarely still in cache)."""
        for step, ptr, strides in self.steps:
            if ptr is not None and strides[axis] == 1:
                self.kb.prefetch(ptr, step.operand.dtype, self.kb.affine(list(zip(index, strides))))


def load_broadcast(e: Emit, ptr: ir.Value, strides: list[int], index: list[int | ir.Value],
                   mask: ir.Value | None, axis: int = -1, stored=None) -> ir.Value:
    """Load e.width elements along view dim `axis`: a vector if contiguous, a splat if
    broadcast, element loads otherwise. `stored` is the dtype in memory when it differs
    from e.dtype (float16/bfloat16); the value comes back widened to e.dtype."""
    kb = e.kb
    stored = e.dtype if stored is None else stored
    offset = kb.affine(list(zip(index, strides)))
    if e.width == 1 or strides[axis] == 0:
        return kb.splat(widen(kb.b, kb.load(ptr, stored, offset), stored), e.width)
    return widen(kb.b, kb.vload_strided(ptr, stored, offset, strides[axis], e.width, mask), stored)


def collapse(shape: tuple[int, ...], stride_sets: list[list[int]]) -> tuple[tuple[int, ...], list[list[int]]]:
    """Merge adjacent dims that every operand walks contiguously, so loops are few and long."""
    groups = _groups(shape, stride_sets, [False] * len(shape))
    return _merged(shape, stride_sets, groups)


def collapse_extents(kb: KernelBuilder, shape: tuple[int, ...], stride_sets: list[list[int]],
                     extents: tuple[int | ir.Value, ...]) -> tuple[tuple[int, ...], list[list[int]],
                                                                   list[int | ir.Value]]:
    """collapse() for a shape with run-time dims (hobbit.graph.extents): `extents` gives each
    dim's length in this inference. A run-time dim starts a new merged dim, as the elements
    inside its extent and static inner dims are one range, but not with the dims inside it;
    the third result is each merged dim's length in this inference."""
    dynamic = [not (isinstance(e, int) and e == n) for e, n in zip(extents, shape)]
    groups = _groups(shape, stride_sets, dynamic)
    merged, strides = _merged(shape, stride_sets, groups)
    lengths: list[int | ir.Value] = []
    for group in groups:
        length: int | ir.Value = extents[group[0]] if group else 1
        for d in group[1:]:
            length = kb.mul(length, shape[d])
        lengths.append(length)
    return merged, strides, lengths


def _groups(shape: tuple[int, ...], stride_sets: list[list[int]], dynamic: list[bool]) -> list[list[int]]:
    """The dims each merged dim covers: runs of dims every operand walks contiguously, where
    only the first of a run may be a run-time dim."""
    dims = [d for d in range(len(shape)) if shape[d] != 1 or dynamic[d]]
    if not dims:
        return [[]]
    groups = [[dims[0]]]
    for d in dims[1:]:
        last = groups[-1][-1]
        if not dynamic[d] and all(s[last] == s[d] * shape[d] for s in stride_sets):
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups


def _merged(shape: tuple[int, ...], stride_sets: list[list[int]],
            groups: list[list[int]]) -> tuple[tuple[int, ...], list[list[int]]]:
    if groups == [[]]:
        return (1,), [[0] for _ in stride_sets]
    new_shape = tuple(int(np.prod([shape[d] for d in group])) for group in groups)
    return new_shape, [[s[group[-1]] for group in groups] for s in stride_sets]
