"""The bounded forms of ONNX converters: what Shape, Size, ConstantOfShape, TopK, Gather,
GatherND, ScatterElements, Concat and Slice (a prefix, or run-time ends) become when an input has a data-dependent dim or is shape
arithmetic on one (hobbit.frontend.common.bounded). The converters in the other modules call
these when they meet such an input; everything static stays on their usual path."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.bounded import (Known, checked, extent_scalar, known_of, mark_bounded, new_extent, pad,
                                            remember)
from hobbit.graph.ir import Value

I64 = np.int64


def shape_of(ctx, x: Value, start: int, end: int) -> Value:
    """Shape of a bounded value: a run-time int64 vector, its bounded element the extent."""
    parts, lo, hi, same = [], [], [], []
    for d, n in list(enumerate(x.shape))[start:end]:
        if d == x.bounded.axis:
            parts.append(ctx.emit1("Reshape", [x.bounded.extent], {"shape": (1,)}))
            lo.append(0)
            same.append(x.bounded.extent)
        else:
            parts.append(ctx.const(np.array([n], I64)))
            lo.append(n)
            same.append(None)
        hi.append(n)
    out = parts[0] if len(parts) == 1 else ctx.emit1("Concat", parts, {"axis": 0})
    remember(ctx, out, Known(np.array(lo, I64), np.array(hi, I64), np.array(same, object)))
    return out


def size_of(ctx, x: Value) -> Value:
    rest = x.type.size // max(x.shape[x.bounded.axis], 1)
    size = ctx.emit1("Mul", [x.bounded.extent, ctx.const(np.int64(rest))])
    return new_extent(ctx, size, 0, x.type.size)


def _one_bounded_dim(known: Known, what: str) -> int | None:
    loose = [i for i in range(known.lo.size) if known.lo.reshape(-1)[i] != known.hi.reshape(-1)[i]]
    if len(loose) > 1:
        raise Unsupported(f"{what} has {len(loose)} data-dependent dims (hobbit bounds one per tensor)")
    return loose[0] if loose else None


def constant_of_shape(ctx, shape: Value, known: Known, value: np.ndarray) -> Value:
    """A constant of the bound shape, bounded by the run-time element of `shape`."""
    dims = tuple(int(d) for d in known.hi.reshape(-1))
    axis = _one_bounded_dim(known, "ConstantOfShape's shape")
    data = ctx.const(np.full(dims, np.asarray(value).reshape(-1)[0], dtype=np.asarray(value).dtype))
    if axis is None:
        return data
    return mark_bounded(ctx.emit1("Copy", [data]), axis, extent_scalar(ctx, shape, known, axis))


def top_k(ctx, x: Value, k_value: Value | None, k_static: int, axis: int, largest: int) -> list[Value]:
    """TopK over a bounded dim or with a run-time k: a static TopK of k's upper bound over
    the input with its padding set to the worst value (sorted output, so its first k are
    the answer), bounded by k checked against the number of values it ranks."""
    known = known_of(ctx, k_value) if k_value is not None else None
    if k_value is not None and known is None:
        raise Unsupported("TopK k must be a constant or computed from data-dependent dims")
    dim = x.shape[axis]
    k_hi = min(int(known.hi.reshape(-1)[0]), dim) if known is not None else k_static
    if x.bounded is not None and x.bounded.axis == axis:
        worst = -np.inf if largest else np.inf
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            worst = int(info.min if largest else info.max)
        x_in, limit = pad(ctx, x, worst), x.bounded.extent
    elif x.bounded is not None:
        raise Unsupported("TopK along a static dim of a value with a data-dependent dim")
    else:
        x_in, limit = x, ctx.const(np.int64(dim))
    values, indices = ctx.emit("TopK", [x_in], {"axis": axis, "k": k_hi, "largest": largest}, n_outputs=2,
                               marks_own=True)
    k = ctx.const(np.int64(k_static)) if known is None else extent_scalar(ctx, k_value, known, 0)
    extent = checked(ctx, k, limit, "le")
    return [mark_bounded(values, axis, extent), mark_bounded(indices, axis, extent)]


def gather(ctx, data: Value, indices: Value, axis: int) -> Value:
    """Gather reading only the valid index rows, and checking indices against the data's
    extent when it gathers along the data's bounded dim."""
    index_bounded = indices.bounded is not None
    if index_bounded and indices.bounded.axis != 0:
        raise Unsupported("Gather indices bounded along a dim other than their first")
    along = data.bounded is not None and data.bounded.axis == axis
    if data.bounded is not None and not along and index_bounded:
        raise Unsupported("Gather of a value and indices that both have data-dependent dims")
    inputs = [data, indices, indices.bounded.extent if index_bounded else None,
              data.bounded.extent if along else None]
    out = ctx.emit1("BoundedGather", inputs, {"axis": axis})
    if index_bounded:
        return mark_bounded(out, axis, indices.bounded.extent)
    if data.bounded is not None and not along:
        moved = data.bounded.axis if data.bounded.axis < axis else data.bounded.axis + len(indices.shape) - 1
        return mark_bounded(out, moved, data.bounded.extent)
    return out


def gather_nd(ctx, data: Value, indices: Value, batch_dims: int) -> Value:
    if batch_dims or data.bounded is not None or indices.bounded.axis != 0 or len(indices.shape) < 2:
        raise Unsupported("GatherND with data-dependent dims other than its index rows")
    out = ctx.emit1("BoundedGatherND", [data, indices, indices.bounded.extent])
    return mark_bounded(out, 0, indices.bounded.extent)


def scatter_elements(ctx, data: Value, indices: Value, updates: Value, axis: int, reduction: str) -> Value:
    """ScatterElements of index rows bounded along dim 0 (only the valid rows write) into data
    that is static, bounded along `axis` (indices are checked against its extent) or bounded
    along dim 0 alike (the rows line up); the result is bounded as the data is."""
    rows = indices.bounded
    if (rows is None) != (updates.bounded is None) or (rows is not None and (
            rows.axis != 0 or updates.bounded.axis != 0 or updates.bounded.extent is not rows.extent)):
        raise Unsupported("ScatterElements whose indices and updates are not bounded alike along dim 0")
    along = data.bounded is not None and data.bounded.axis == axis
    if data.bounded is not None and not along and (rows is None or data.bounded.axis != 0
                                                   or data.bounded.extent is not rows.extent):
        raise Unsupported("ScatterElements into a value bounded along a dim its indices do not share")
    inputs = [data, indices, updates, rows.extent if rows is not None else None,
              data.bounded.extent if along else None]
    out = ctx.emit("BoundedScatterElements", inputs, {"axis": axis, "reduction": reduction}, marks_own=True)[0]
    if data.bounded is None:
        return out
    return mark_bounded(out, data.bounded.axis, data.bounded.extent)


def concat(ctx, parts: list[Value], axis: int) -> Value:
    """Concat along a bounded dim: the valid rows of each part, one after another."""
    extents = [v.bounded.extent if v.bounded is not None and v.bounded.axis == axis else None for v in parts]
    if any(v.bounded is not None and v.bounded.axis != axis for v in parts):
        raise Unsupported("Concat of values bounded along different dims")
    out = ctx.emit1("BoundedConcat", parts + extents, {"axis": axis, "count": len(parts)})
    return mark_bounded(out, axis, _sum_extents(ctx, parts, extents, axis))


def _sum_extents(ctx, parts: list[Value], extents: list[Value | None], axis: int) -> Value:
    """The concatenation's length, computed once per list of parts' lengths (the boxes,
    scores and labels of a detector are concatenated from the same per-class lengths, and
    share one extent, so what combines them needs no run-time check)."""
    key = tuple(id(e) if e is not None else v.shape[axis] for v, e in zip(parts, extents))
    if key not in ctx.extent_sums:
        static = sum(v.shape[axis] for v, e in zip(parts, extents) if e is None)
        present = [e for e in extents if e is not None]
        total = present[0] if not static else ctx.emit1("Add", [ctx.const(np.int64(static)), present[0]])
        for e in present[1:]:
            total = ctx.emit1("Add", [total, e])
        if total is not present[0]:
            new_extent(ctx, total, 0, sum(v.shape[axis] for v in parts))
        ctx.extent_sums[key] = total
    return ctx.extent_sums[key]


def cut_to_ends(ctx, x: Value, cut: Value, ends: Value, known: Known, starts: list[int], axes: list[int],
                steps: list[int] | None) -> Value:
    """Slice whose ends are computed from data-dependent lengths: `cut` is `x` sliced to the
    ends' upper bounds. A run-time end on x's bounded dim, from 0 by step 1, keeps the rows
    before it: the extent becomes min(extent, end), or stays when the end is the extent
    itself (torchvision splits its per-image boxes at the number of proposals)."""
    loose = [j for j in range(known.lo.size) if known.lo.reshape(-1)[j] != known.hi.reshape(-1)[j]]
    for j in loose:
        if x.bounded is None or axes[j] != x.bounded.axis or starts[j] != 0 \
                or (steps is not None and steps[j] != 1) or known.lo.reshape(-1)[j] < 0:
            raise Unsupported(f"Slice with a run-time end on dim {axes[j]} of '{x.name}' (only a "
                              f"prefix of its data-dependent dim is supported)")
        end = extent_scalar(ctx, ends, known, j)
        if end is cut.bounded.extent:
            continue
        extent = new_extent(ctx, ctx.emit1("Min", [cut.bounded.extent, end]), 0, x.shape[axes[j]])
        cut = mark_bounded(ctx.emit("Copy", [cut], marks_own=True)[0], axes[j], extent)
    return cut


def select(ctx, cond: Value, then: Value, other: Value) -> Value:
    """An If on run-time data whose branches differ in length along one dim, as detectors'
    `if no boxes: empty else: batched NMS`: both branches are computed (ONNX ops have no
    side effects), and the result is the non-empty branch's data with an extent chosen by
    the condition. Only a branch that is empty (a constant of size 0) can stand beside a
    bounded or static one: two non-empty branches would need a run-time choice of buffer."""
    if then.dtype != other.dtype or len(then.shape) != len(other.shape):
        raise Unsupported(f"If branches of different types ({then.type} and {other.type})")
    empty_then = then.const is not None and then.type.size == 0
    empty_other = other.const is not None and other.type.size == 0
    if empty_then == empty_other:
        raise Unsupported(f"If on run-time data whose branches both hold data ({then.type} and {other.type})")
    full, empty = (other, then) if empty_then else (then, other)
    if full.bounded is not None:
        axis, length = full.bounded.axis, full.bounded.extent
    else:
        axis = next(d for d, n in enumerate(empty.shape) if n == 0)
        length = ctx.const(np.int64(full.shape[axis]))
    flag = ctx.emit1("Reshape", [cond], {"shape": ()}) if cond.shape != () else cond
    zero = ctx.const(np.int64(0))
    extent = ctx.emit1("Where", [flag, zero, length] if empty_then else [flag, length, zero])
    data = ctx.emit("Copy", [full], marks_own=True)[0]
    known = known_of(ctx, length)
    return mark_bounded(data, axis, new_extent(ctx, extent, 0, int(known.hi) if known is not None else full.shape[axis]))
