"""Converters for shape and data-movement ONNX ops."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError, Unsupported
from hobbit.frontend.common import bounded as bounds
from hobbit.frontend.common.bounded import known_of, mark_bounded, new_extent
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.ops import bounded
from hobbit.graph.shapes import broadcast


@converter("Constant", since=1)
def constant(ctx, node, ins):
    a = ctx.attrs(node)
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if key in a:
            value = a[key]
            dtype = np.float32 if "float" in key else (np.int64 if "int" in key else None)
            return [ctx.const(np.asarray(value, dtype=dtype))]
    raise Unsupported(f"Constant with attributes {sorted(a)}")


@converter("Shape", since=1)
def shape(ctx, node, ins):
    a = ctx.attrs(node)
    dims = np.array(ins[0].shape, dtype=np.int64)
    start, end = a.get("start", 0), a.get("end", len(dims))
    if ins[0].bounded is not None:
        return [bounded.shape_of(ctx, ins[0], start, end)]
    return [ctx.const(dims[start:end])]


@converter("Reshape", since=5)
def reshape(ctx, node, ins):
    x = ins[0]
    target = [int(d) for d in _shape_arg(ctx, ins[1], "Reshape shape")]
    allowzero = ctx.attrs(node).get("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        out.append(x.shape[i] if d == 0 and not allowzero else d)
    if out.count(-1) > 1:
        raise Unsupported(f"Reshape shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or x.type.size % known:
            raise ShapeError(f"Reshape of {tuple(x.shape)} to {target}: the -1 dim cannot be inferred "
                             f"(the other dims hold {known} elements per step)")
        out[out.index(-1)] = x.type.size // known
    return [ctx.emit1("Reshape", [x], {"shape": tuple(out)})]


@converter("Flatten", since=1)
def flatten(ctx, node, ins):
    x = ins[0]
    axis = int(ctx.attrs(node).get("axis", 1))
    axis = axis + len(x.shape) if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))  # not size // outer: outer may be 0
    return [ctx.emit1("Reshape", [x], {"shape": (outer, inner)})]


@converter("Reshape", since=1)
def reshape_attr(ctx, node, ins):
    """Opset 1-4: the target shape is the `shape` attribute."""
    a = ctx.attrs(node)
    if "shape" not in a:
        raise Unsupported("Reshape without a shape attribute")
    return reshape(ctx, node, [ins[0], ctx.const(np.array(a["shape"], dtype=np.int64))])


def _axis(axis: int, rank: int) -> int:
    """A possibly negative axis as a position in [0, rank)."""
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _ints(ctx, node, ins, index: int, attr: str, what: str) -> list[int] | None:
    """An integer list given as input `index` (newer opsets) or attribute `attr` (older ones)."""
    if len(ins) > index and ins[index] is not None:
        return [int(v) for v in np.asarray(ctx.const_value(ins[index], what)).reshape(-1)]
    value = ctx.attrs(node).get(attr)
    return None if value is None else [int(v) for v in value]


def _shape_arg(ctx, value, what: str) -> np.ndarray:
    """A shape input: its data when constant; for shape arithmetic on a data-dependent dim,
    its upper bounds (the op then runs on the bound shape, and the bounded dim follows the
    data through it, hobbit.frontend.common.bounded.propagate)."""
    known = known_of(ctx, value)
    if value.const is None and known is not None:
        return known.hi
    return np.asarray(ctx.const_value(value, what))


@converter("Size", since=1)
def size(ctx, node, ins):
    if ins[0].bounded is not None:
        return [bounded.size_of(ctx, ins[0])]
    return [ctx.const(np.array(ins[0].type.size, dtype=np.int64))]


@converter("Transpose", since=1)
def transpose(ctx, node, ins):
    rank = len(ins[0].shape)
    perm = ctx.attrs(node).get("perm")
    perm = tuple(_axis(p, rank) for p in perm) if perm else tuple(reversed(range(rank)))
    if perm == tuple(range(rank)):
        return [ins[0]]
    return [ctx.emit1("Transpose", ins[:1], {"perm": perm})]


@converter("Concat", since=1)
def concat(ctx, node, ins):
    present = [v for v in ins if v is not None]
    axis = _axis(int(ctx.attrs(node).get("axis", 1)), len(present[0].shape))
    if len(present) == 1:
        return [present[0]]
    if any(v.bounded is not None and v.bounded.axis == axis for v in present):
        return [bounded.concat(ctx, present, axis)]
    return [ctx.emit1("Concat", present, {"axis": axis})]


@converter("Split", since=1)
def split(ctx, node, ins):
    """`split` is an input in opsets 1 and 13+, an attribute in 2-12; opset 18 adds num_outputs."""
    x = ins[0]
    a = ctx.attrs(node)
    axis = _axis(int(a.get("axis", 0)), len(x.shape))
    dim = x.shape[axis]
    sizes = _ints(ctx, node, ins, 1, "split", "Split sizes")
    if sizes is None:
        count = int(a.get("num_outputs", len(node.output)))
        chunk = -(-dim // count)
        if "num_outputs" not in a and dim % count:
            raise Unsupported(f"dim {dim} does not split evenly into {count} outputs")
        sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
        if sizes[-1] < 0:
            raise Unsupported(f"dim {dim} cannot be split into {count} outputs")
    if sum(sizes) != dim or len(sizes) != len(node.output):
        raise Unsupported(f"split sizes {sizes} do not cut dim {dim} into {len(node.output)} outputs")
    return ctx.emit("Split", [x], {"axis": axis, "split": tuple(sizes)}, n_outputs=len(sizes))


def _slice(ctx, x, starts: list[int], ends: list[int], axes: list[int] | None, steps: list[int] | None):
    """ONNX Slice on static shapes: Python's slice.indices clamps exactly as ONNX specifies."""
    rank = len(x.shape)
    axes = list(range(len(starts))) if axes is None else [_axis(ax, rank) for ax in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise Unsupported(f"Slice starts {starts}, ends {ends}, axes {axes}, steps {steps} do not match")
    first, step_all, sizes = [0] * rank, [1] * rank, list(x.shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise Unsupported("Slice step 0")
        lo, hi, st = slice(start, end, step).indices(x.shape[axis])
        first[axis], step_all[axis], sizes[axis] = lo, st, len(range(lo, hi, st))
    if tuple(sizes) == tuple(x.shape) and all(s == 1 for s in step_all):
        return [x]
    return [ctx.emit1("Slice", [x], {"starts": tuple(first), "steps": tuple(step_all), "sizes": tuple(sizes)})]


@converter("Slice", since=1)
def slice_attrs(ctx, node, ins):
    a = ctx.attrs(node)
    return _slice(ctx, ins[0], list(a["starts"]), list(a["ends"]), a.get("axes"), None)


@converter("Slice", since=10)
def slice_inputs(ctx, node, ins):
    starts = _ints(ctx, node, ins, 1, "", "Slice starts")
    axes, steps = _ints(ctx, node, ins, 3, "", "Slice axes"), _ints(ctx, node, ins, 4, "", "Slice steps")
    known = known_of(ctx, ins[2])
    if ins[2].const is None and known is not None:
        cut = _slice(ctx, ins[0], starts, [int(e) for e in known.hi.reshape(-1)], axes, steps)[0]
        axes = list(range(len(starts))) if axes is None else [_axis(ax, len(ins[0].shape)) for ax in axes]
        return [bounded.cut_to_ends(ctx, ins[0], cut, ins[2], known, starts, axes, steps)]
    return _slice(ctx, ins[0], starts, _ints(ctx, node, ins, 2, "", "Slice ends"), axes, steps)


@converter("Pad", since=1)
def pad(ctx, node, ins):
    """pads/value are attributes before opset 11 (`paddings` in opset 1), inputs after; opset 18 adds axes."""
    x = ins[0]
    a = ctx.attrs(node)
    rank = len(x.shape)
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"Pad mode {mode!r}")
    if ctx.opset >= 11:
        pads = _ints(ctx, node, ins, 1, "", "Pad pads")
        value = ctx.const_value(ins[2], "Pad constant_value") if len(ins) > 2 and ins[2] is not None else 0
        axes = _ints(ctx, node, ins, 3, "", "Pad axes")
    else:
        pads = [int(p) for p in a.get("pads", a.get("paddings", []))]
        value, axes = a.get("value", 0.0), None
    if axes is not None:
        axes = [_axis(ax, rank) for ax in axes]
        if len(pads) != 2 * len(axes):
            raise Unsupported(f"Pad has {len(pads)} pads for axes {axes}")
        full = [0] * (2 * rank)
        for i, ax in enumerate(axes):
            full[ax], full[ax + rank] = pads[i], pads[i + len(axes)]
        pads = full
    if len(pads) != 2 * rank:
        raise Unsupported(f"Pad has {len(pads)} pads for rank {rank}")
    if not any(pads):
        return [x]
    if mode != "constant" and any(p < 0 for p in pads):
        raise Unsupported(f"negative pads in mode {mode!r}")
    value = np.asarray(value).reshape(-1)[0].item() if np.asarray(value).size else 0
    return [ctx.emit1("Pad", [x], {"pads": tuple(pads), "mode": mode, "value": value})]


@converter("Gather", since=1)
def gather(ctx, node, ins):
    """Constant indices are range-checked and made non-negative here; runtime ones are clamped."""
    data, indices = ins
    axis = _axis(int(ctx.attrs(node).get("axis", 0)), len(data.shape))
    if indices.bounded is not None or (data.bounded is not None and data.bounded.axis == axis):
        return [bounded.gather(ctx, data, indices, axis)]
    if indices.const is not None:
        dim = data.shape[axis]
        idx = indices.const.astype(np.int64)
        if idx.size and (idx.min() < -dim or idx.max() >= dim):
            raise Unsupported(f"Gather indices {idx.min()}..{idx.max()} are out of range for dim {dim}")
        indices = ctx.const(np.where(idx < 0, idx + dim, idx))
    return [ctx.emit1("Gather", [data, indices], {"axis": axis})]


def _reshape_to(ctx, x, shape: tuple[int, ...]):
    return x if shape == tuple(x.shape) else ctx.emit1("Reshape", [x], {"shape": shape})


@converter("Squeeze", since=1)
def squeeze(ctx, node, ins):
    """`axes` is an attribute before opset 13, an optional input after; none means every 1-dim."""
    x = ins[0]
    rank = len(x.shape)
    axes = _ints(ctx, node, ins, 1, "axes", "Squeeze axes")
    if axes is None:
        axes = [d for d in range(rank) if x.shape[d] == 1]
    axes = {_axis(ax, rank) for ax in axes}
    if any(x.shape[d] != 1 for d in axes):
        raise Unsupported(f"Squeeze axes {sorted(axes)} include a dim that is not 1 in {x.shape}")
    return [_reshape_to(ctx, x, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


@converter("Unsqueeze", since=1)
def unsqueeze(ctx, node, ins):
    """`axes` is an attribute before opset 13, an input after; they index the output's dims."""
    x = ins[0]
    axes = _ints(ctx, node, ins, 1, "axes", "Unsqueeze axes")
    if axes is None:
        raise Unsupported("Unsqueeze without axes")
    out_rank = len(x.shape) + len(axes)
    axes = {_axis(ax, out_rank) for ax in axes}
    dims = iter(x.shape)
    return [_reshape_to(ctx, x, tuple(1 if d in axes else next(dims) for d in range(out_rank)))]


@converter("Expand", since=8)
def expand(ctx, node, ins):
    x = ins[0]
    shape = broadcast(tuple(x.shape), tuple(int(d) for d in _shape_arg(ctx, ins[1], "Expand shape").reshape(-1)))
    if shape == tuple(x.shape):
        return [x]
    return [ctx.emit1("Expand", [x], {"shape": shape})]


@converter("Tile", since=6)
def tile(ctx, node, ins):
    repeats = tuple(_ints(ctx, node, ins, 1, "", "Tile repeats"))
    if all(r == 1 for r in repeats) and len(repeats) == len(ins[0].shape):
        return [ins[0]]
    return [ctx.emit1("Tile", [ins[0]], {"repeats": repeats})]


@converter("Range", since=11)
def range_(ctx, node, ins):
    start, limit, delta = (np.asarray(ctx.const_value(v, f"Range {what}")).reshape(-1)
                           for v, what in zip(ins, ("start", "limit", "delta")))
    if start.size != 1 or limit.size != 1 or delta.size != 1:
        raise ShapeError("Range start, limit and delta must be scalars")
    if delta[0] == 0:
        raise ShapeError("Range delta is 0")
    return [ctx.emit1("Range", ins)]


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx, node, ins):
    known = known_of(ctx, ins[0])
    if ins[0].const is None and known is not None:
        value = ctx.attrs(node).get("value", np.zeros(1, dtype=np.float32))
        return [bounded.constant_of_shape(ctx, ins[0], known, value)]
    shape = ctx.const_value(ins[0], "ConstantOfShape shape")
    if (np.asarray(shape) < 0).any():
        raise ShapeError(f"ConstantOfShape shape {shape.tolist()} has a negative dimension")
    value = ctx.attrs(node).get("value", np.zeros(1, dtype=np.float32))
    return [ctx.emit1("ConstantOfShape", [ctx.const(shape.astype(np.int64))], {"value": np.asarray(value)})]


@converter("NonZero", since=9)
def nonzero(ctx, node, ins):
    """Constant inputs fold; a run-time input gives positions bounded by its size. Positions
    in a bounded input's bound shape are its positions (the strides are the bound's), so
    NonZero of one is NonZero of it with the padding set to zero."""
    if ins[0].const is None:
        x = ins[0] if ins[0].bounded is None else bounds.pad(ctx, ins[0], 0)  # padding is zero: never counted
        out, n = ctx.emit("BoundedNonZero", [x], n_outputs=2, marks_own=True)
        return [mark_bounded(out, 1, new_extent(ctx, n, 0, ins[0].type.size))]
    return [ctx.emit1("NonZero", ins)]


def _logic(op: str):
    def convert(ctx, node, ins):
        return [ctx.emit1(op, ins)]
    return convert


for _op in ("Equal", "Less", "Greater", "And", "Or", "Xor"):
    converter(_op, since=7)(_logic(_op))
for _op in ("LessOrEqual", "GreaterOrEqual"):
    converter(_op, since=12)(_logic(_op))
converter("Not", since=1)(_logic("Not"))
converter("Where", since=9)(_logic("Where"))
