"""Bounded values: the frontend's side of data-dependent dims (see hobbit.graph.ir.Bounded).

An op whose output length depends on the data (NonZero, NonMaxSuppression, Unique,
Compress on a run-time condition, TopK with a run-time k) becomes a Bounded* graph op:
its data outputs have a static upper-bound shape, derived from the input shapes, and
its last output is the int64 extent. The converter marks each data output with
`mark_bounded`; what consumes such a value then either maps elements (and inherits the
mark) or reads along the dim and takes the extent as an input. The static part of a
model never sees any of this: its kernels, plans and speed are those of a model
without data-dependent ops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.errors import ShapeError, Unsupported
from hobbit.graph.ir import Bounded, Node, Value
from hobbit.ops.reduce import identity
from hobbit.ops.registry import get_op


def mark_bounded(value: Value, axis: int, extent: Value) -> Value:
    """Declare that `value` holds data only in [0, extent) along `axis` of its static shape."""
    if not 0 <= axis < len(value.shape):
        raise ShapeError(f"'{value.name}' has no dim {axis} to bound (shape {value.shape})")
    if extent.dtype != np.dtype(np.int64) or extent.shape != ():
        raise ShapeError(f"the extent of '{value.name}' must be an int64 scalar, got {extent.type}")
    value.bounded = Bounded(axis, extent)
    return value


# -- what the frontend knows of run-time shape arithmetic -------------------------------

@dataclass
class Known:
    """A small run-time int64 tensor computed from extents (Shape of a bounded value, and
    the Gather/Concat/Min arithmetic exporters write on it): each element's range, and the
    extent value it is exactly, where it is one. A converter that needs a shape, a k or a
    length from it gets static bounds and the run-time value to bound by."""

    lo: np.ndarray
    hi: np.ndarray
    same: np.ndarray  # object: the extent Value an element equals, or None

    @staticmethod
    def const(data: np.ndarray) -> Known:
        data = np.asarray(data, np.int64)
        return Known(data, data, np.full(data.shape, None, object))

    def static(self) -> bool:
        return bool((self.lo == self.hi).all())


_MOVES = {"Reshape", "Gather", "Concat", "Slice", "Split", "Transpose", "Expand", "Tile", "Copy", "Cast"}
_MONOTONE = {"Min", "Max", "Add", "ReduceMin", "ReduceMax", "ReduceSum"}
_COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
_REDUCTIONS = {"ReduceSum": "add", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "mul",
               "ReduceSumSquare": "add", "ReduceL1": "add", "ReduceL2": "add"}


def known_of(ctx, value: Value | None) -> Known | None:
    """What is known of `value`'s run-time data: a constant's data, an extent's range, or
    the result of shape arithmetic on those; None for anything else."""
    if value is None:
        return None
    if value.const is not None:
        return Known.const(value.const) if value.const.dtype.kind in "iu" else None
    found = ctx.known.get(id(value))
    return found[1] if found is not None and found[0] is value else None


def remember(ctx, value: Value, known: Known) -> None:
    """Keyed by identity; the entry holds the value, so its id is never reused meanwhile."""
    ctx.known[id(value)] = (value, known)


def _run(reference, node: Node, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    return [np.asarray(r) for r in reference(arrays, node.attrs)]


def _less(a: Known, b: Known) -> tuple[np.ndarray, np.ndarray]:
    """Where a < b holds for every value in the ranges, and where it fails for every one."""
    return a.hi < b.lo, a.lo >= b.hi


def _compared(op: str, a: Known, b: Known) -> np.ndarray | None:
    """A comparison's result where the ranges (or an extent compared with itself) decide it
    for every element; None where they do not."""
    if op == "Equal":
        equal = ((a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)) | np.vectorize(
            lambda x, y: x is not None and x is y, otypes=[bool])(a.same, b.same)
        true, false = equal, (a.hi < b.lo) | (b.hi < a.lo)
    elif op in ("Less", "GreaterOrEqual"):
        true, false = _less(a, b)
    else:
        true, false = _less(b, a)
    if op in ("LessOrEqual", "GreaterOrEqual"):
        true, false = false, true
    true, false = np.broadcast_arrays(true, false)
    return true if (true | false).all() else None


def _infer_decided(ctx, node: Node) -> bool:
    """Comparisons of shape arithmetic that the ranges decide (torchvision's `-1 == n` on a
    length n >= 0, before an Expand) fold to constants, and a Where on a constant condition
    moves the Known elements it picks; True when `node` was one of those."""
    if node.op in _COMPARISONS:
        ins = [known_of(ctx, v) for v in node.inputs]
        if None not in ins:
            decided = _compared(node.op, *ins)
            if decided is not None:
                remember(ctx, node.outputs[0], Known.const(decided))
        return True
    if node.op == "Where" and node.inputs[0].const is not None:
        picks = [known_of(ctx, v) for v in node.inputs[1:]]
        if None not in picks:
            cond = node.inputs[0].const
            remember(ctx, node.outputs[0], Known(*(np.where(cond, getattr(picks[0], f), getattr(picks[1], f))
                                                   for f in ("lo", "hi", "same"))))
        return True
    return False


def _infer_known(ctx, node: Node) -> None:
    """Carry Known through shape arithmetic: data movement keeps each element's identity and
    range; Min, Max, Add and the reductions are monotone, so their bounds are the op on
    the bounds; Sub and Mul (of non-negative values) have their interval forms."""
    if _infer_decided(ctx, node):
        return
    ins = [known_of(ctx, v) for v in node.inputs]
    if any(k is None for v, k in zip(node.inputs, ins) if v is not None):
        return
    present = [k for k in ins if k is not None]
    if len(node.outputs) != 1:
        return
    reference = get_op(node.op).reference
    lo = [None if k is None else k.lo for k in ins]
    hi = [None if k is None else k.hi for k in ins]
    if node.op in _MOVES:
        out_lo, out_hi = _run(reference, node, lo)[0], _run(reference, node, hi)[0]
        tags = np.arange(sum(k.same.size for k in present), dtype=np.int64)
        pool, flat, at = [], [], 0
        for k in ins:
            if k is None:
                flat.append(None)
                continue
            flat.append(tags[at:at + k.same.size].reshape(k.same.shape))
            pool += list(k.same.reshape(-1))
            at += k.same.size
        if node.op == "Gather":
            flat[1] = ins[1].lo  # the indices are data, not elements
        moved = _run(reference, node, flat)[0]
        same = np.array([pool[t] for t in moved.reshape(-1)], object).reshape(moved.shape)
    elif node.op in _MONOTONE:
        out_lo, out_hi = _run(reference, node, lo)[0], _run(reference, node, hi)[0]
        same = np.full(out_lo.shape, None, object)
        zero = [k is not None and k.static() and not k.lo.any() for k in ins]
        if node.op == "Add" and any(zero):  # torchvision's split offsets: 0 + n is n
            same = np.broadcast_to(ins[zero.index(False) if False in zero else 0].same, out_lo.shape).copy()
    elif node.op == "Sub":
        out_lo, out_hi = ins[0].lo - ins[1].hi, ins[0].hi - ins[1].lo
        same = np.full(out_lo.shape, None, object)
    elif node.op == "Mul" and all((k.lo >= 0).all() for k in present):
        out_lo, out_hi = ins[0].lo * ins[1].lo, ins[0].hi * ins[1].hi
        same = np.full(out_lo.shape, None, object)
    else:
        return
    remember(ctx, node.outputs[0], Known(np.asarray(out_lo, np.int64), np.asarray(out_hi, np.int64), same))


def folded(ctx, value: Value) -> Value:
    """A constant in place of shape arithmetic whose result is static (the static dims of
    a bounded value's Shape), so converters that need constants get them."""
    known = known_of(ctx, value)
    if value.const is not None or known is None or not known.static():
        return value
    return ctx.const(known.lo.astype(value.dtype).reshape(value.shape))


def extent_scalar(ctx, value: Value, known: Known, index: int) -> Value:
    """The int64 scalar holding element `index` of the run-time tensor `value`."""
    found = known.same.reshape(-1)[index]
    if found is not None:
        return found
    if value.shape == ():
        return value
    flat = ctx.emit1("Reshape", [value], {"shape": (value.type.size,)})
    scalar = ctx.emit1("Gather", [flat, ctx.const(np.int64(index))], {"axis": 0})
    remember(ctx, scalar, Known(known.lo.reshape(-1)[index], known.hi.reshape(-1)[index], np.array(None, object)))
    return scalar


def new_extent(ctx, value: Value, lo: int, hi: int) -> Value:
    """Record a freshly computed extent scalar and its range."""
    remember(ctx, value, Known(np.asarray(lo, np.int64), np.asarray(hi, np.int64), np.array(value, object)))
    return value


# -- how a bounded value flows through the ops that do not read along its dim ------------

def _elementwise_axis(node: Node) -> tuple[int, Value] | None:
    out_rank = len(node.outputs[0].shape)
    found = None
    for v in node.inputs:
        if v is None or v.bounded is None:
            continue
        axis = v.bounded.axis + out_rank - len(v.shape)
        if found is not None and (found[0] != axis or found[1] is not v.bounded.extent):
            raise Unsupported(f"{node.op} combines values whose data-dependent lengths are not known "
                              f"to be equal ('{v.name}')")
        found = found or (axis, v.bounded.extent)
    if found is None:
        return None
    for v in node.inputs:
        if v is None:
            continue
        d = found[0] - (out_rank - len(v.shape))
        if d >= 0 and (v.bounded is None or v.bounded.axis != d) and v.shape[d] != 1:
            raise Unsupported(f"{node.op} combines a data-dependent dim with a static dim of "
                              f"{v.shape[d]} ('{v.name}')")
    return found


def _reshape_axis(src: tuple[int, ...], dst: tuple[int, ...], axis: int) -> tuple[int, int] | None:
    """Where dim `axis` of `src` goes in `dst` when it passes through (dims of 1 may come and
    go around it), as (dst axis, 1); or (0, factor) when it is the outermost dim and merges
    with inner dims into dst's outermost (the extent scales by `factor`)."""
    before = int(np.prod(src[:axis], dtype=np.int64))
    for j in range(len(dst)):
        if int(np.prod(dst[:j], dtype=np.int64)) == before and dst[j] == src[axis] \
                and int(np.prod(dst[j + 1:], dtype=np.int64)) == int(np.prod(src[axis + 1:], dtype=np.int64)):
            return j, 1
    inner_src, inner_dst = int(np.prod(src[axis + 1:], dtype=np.int64)), int(np.prod(dst[1:], dtype=np.int64))
    if before == 1 and dst and inner_dst and inner_src % inner_dst == 0:
        return 0, inner_src // inner_dst
    return None


def _is_prefix_cut(node: Node) -> bool:
    """A Slice that keeps the first rows along the bounded dim (x[:n], as detectors keep
    their best detections): the extent becomes min(extent, n)."""
    axis, a = node.inputs[0].bounded.axis, node.attrs
    return a["starts"][axis] == 0 and a["steps"][axis] == 1 and a["sizes"][axis] < node.inputs[0].shape[axis]


def _per_sample_rows(node: Node, bounded: list[Value]) -> bool:
    """An op that keeps the samples along dim 0 independent (Conv, Gemm's rows, Softmax on
    another axis: the op registry's per_sample fact) computes the padding rows of a value
    bounded along dim 0 as it computes any other rows, so its outputs are bounded alike."""
    rule = get_op(node.op).per_sample
    extent = bounded[0].bounded.extent
    if rule is None or any(v.bounded.axis != 0 or v.bounded.extent is not extent for v in bounded):
        return False
    rows = bounded[0].shape[0]
    if any(not out.shape or out.shape[0] != rows for out in node.outputs):
        return False
    return bool(rule(node, [v is not None and v.bounded is not None for v in node.inputs]))


def _moved_axis(node: Node, v: Value) -> int | None:
    """The output dim the bounded dim of input `v` becomes in a data-movement op that does
    not cut or reorder along it; None when the op does."""
    a, axis = node.attrs, v.bounded.axis
    if node.op == "Transpose":
        return list(a["perm"]).index(axis)
    if node.op in ("Slice",):
        keeps = a["starts"][axis] == 0 and a["steps"][axis] == 1 and a["sizes"][axis] == v.shape[axis]
        return axis if keeps else None
    if node.op in ("Split", "Concat"):
        return axis if a["axis"] != axis else None
    if node.op == "Gather":
        g = a["axis"]
        return None if g == axis or v is not node.inputs[0] else (axis if axis < g else axis + len(node.inputs[1].shape) - 1)
    if node.op == "Expand":
        return axis + len(node.outputs[0].shape) - len(v.shape)
    if node.op == "Tile":
        return axis if a["repeats"][axis] == 1 else None
    if node.op == "Pad":
        rank = len(v.shape)
        return axis if a["pads"][axis] == 0 and a["pads"][axis + rank] == 0 else None
    return None


def propagate(ctx, node: Node, marks_own: bool = False) -> None:
    """Mark the outputs of a node that maps elements or moves data without reading along a
    bounded input's dim; refuse any other op on a bounded input (a Bounded* op, whose
    converter marks its own outputs, excepted). Then carry shape arithmetic (Known)."""
    bounded = [v for v in node.inputs if v is not None and v.bounded is not None]
    if bounded and not marks_own and not node.op.startswith("Bounded"):
        opdef = get_op(node.op)
        if opdef.kind == "elementwise" or node.op == "Where":
            axis, extent = _elementwise_axis(node)
            for out in node.outputs:
                mark_bounded(out, axis, extent)
        elif node.op == "Reshape":
            v = node.inputs[0]
            placed = _reshape_axis(tuple(v.shape), tuple(node.outputs[0].shape), v.bounded.axis)
            if placed is None:
                raise Unsupported(f"Reshape of {v.shape} to {node.outputs[0].shape} mixes the "
                                  f"data-dependent dim {v.bounded.axis} with others")
            axis, factor = placed
            extent = v.bounded.extent
            if factor != 1:
                extent = ctx.emit1("Mul", [extent, ctx.const(np.int64(factor))])
            mark_bounded(node.outputs[0], axis, extent)
        elif node.op in _REDUCTIONS:
            v = node.inputs[0]
            axes = tuple(node.attrs["axes"]) or tuple(range(len(v.shape)))
            if v.bounded.axis not in axes:  # a reduction over the dim reads padding set by padded_for_reduction
                before = 0 if node.attrs["keepdims"] else sum(1 for ax in axes if ax < v.bounded.axis)
                mark_bounded(node.outputs[0], v.bounded.axis - before, v.bounded.extent)
        elif node.op == "Slice" and _is_prefix_cut(node):
            v = node.inputs[0]
            size = node.attrs["sizes"][v.bounded.axis]
            extent = new_extent(ctx, ctx.emit1("Min", [v.bounded.extent, ctx.const(np.int64(size))]), 0, size)
            mark_bounded(node.outputs[0], v.bounded.axis, extent)
        elif _per_sample_rows(node, bounded):
            for out in node.outputs:
                mark_bounded(out, 0, bounded[0].bounded.extent)
        else:
            extents = {id(v.bounded.extent) for v in bounded}
            moved = {_moved_axis(node, v) for v in bounded}
            if None in moved or len(moved) != 1 or len(extents) != 1:
                raise Unsupported(f"{node.op} does not take a data-dependent dim yet "
                                  f"(input '{bounded[0].name}', dim {bounded[0].bounded.axis})")
            if node.op == "Concat" and len(bounded) != len(node.inputs):
                raise Unsupported("Concat of values with and without a data-dependent dim")
            axis = moved.pop()
            for out in node.outputs:
                mark_bounded(out, axis, bounded[0].bounded.extent)
    _infer_known(ctx, node)


def padded_for_reduction(ctx, op: str, inputs: list, attrs: dict) -> list:
    """A reduction over a bounded dim reads its padding filled with the reduction's identity
    (the kernel then reads the whole bound); the reduced dim is no longer data-dependent."""
    x = inputs[0]
    if x is None or x.bounded is None or op not in _REDUCTIONS:
        if x is not None and x.bounded is not None and op == "ReduceMean":
            raise Unsupported("ReduceMean over a data-dependent dim")
        return inputs
    axes = tuple(attrs.get("axes") or range(len(x.shape)))
    if x.bounded.axis not in axes:
        return inputs
    return [pad(ctx, x, identity(x.dtype, _REDUCTIONS[op]))] + list(inputs[1:])


def pad(ctx, x: Value, fill: float) -> Value:
    """`x` with its padding set to `fill`; the result stays bounded."""
    padded = ctx.emit1("BoundedPad", [x, x.bounded.extent], {"axis": x.bounded.axis, "value": fill})
    return mark_bounded(padded, x.bounded.axis, x.bounded.extent)


def checked(ctx, value: Value, limit: Value, relation: str) -> Value:
    """`value` (an int64 scalar length) checked against `limit` at run time."""
    out = ctx.emit1("BoundedCheck", [value, limit], {"relation": relation})
    k = known_of(ctx, value)
    hi = int(k.hi) if k is not None else None
    limit_known = known_of(ctx, limit)
    if hi is None and limit_known is not None:
        hi = int(limit_known.hi)
    return new_extent(ctx, out, 0, hi if hi is not None else 0)
