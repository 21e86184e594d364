"""Converters for TensorFlow's constants, identities, shape arithmetic and data movement.

Shapes are static once the graph inputs' shapes are known, so the shape ops (Shape,
Size, Rank, Fill, Range, ZerosLike ...) become constants here, and the arithmetic built
on them folds as the importer emits it. Slices and gathers (slicing.py), pads (padding.py)
and block rearrangements (blocks.py) have modules of their own."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import axis, const_int, const_ints, reshape


@tf_converter("Const")
def const(ctx, node, ins):
    value = node.attrs.get("value")
    if not isinstance(value, np.ndarray):
        raise Unsupported("Const without a tensor value")
    return [ctx.const(value)]


@tf_converter("Placeholder")
def placeholder(ctx, node, ins):
    raise Unsupported("this Placeholder is not one of the model's inputs, so its value is unknown")


@tf_converter("PlaceholderWithDefault")
def placeholder_with_default(ctx, node, ins):
    """Not a model input here (inputs are bound before conversion), so it is its default."""
    return [ins[0]]


@tf_converter("Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics")
def identity(ctx, node, ins):
    return [ins[0]]


@tf_converter("IdentityN")
def identity_n(ctx, node, ins):
    return list(ins)


@tf_converter("Reshape")
def reshape_op(ctx, node, ins):
    x, shape_value = ins
    shape = const_ints(ctx, shape_value, "Reshape's shape")
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise Unsupported(f"Reshape to {shape}: at most one dim may be -1 and none below")
    if unknown:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.type.size % known:
            raise Unsupported(f"Reshape of {x.type} to {shape}: the -1 dim is not a whole number")
        shape[unknown[0]] = x.type.size // known
    if int(np.prod(shape, dtype=np.int64)) != x.type.size:
        raise Unsupported(f"Reshape of {x.type} to {shape} changes the element count")
    return [reshape(ctx, x, tuple(shape))]


@tf_converter("Squeeze")
def squeeze(ctx, node, ins):
    x = ins[0]
    rank = len(x.shape)
    dims = {axis(int(d), rank, "squeeze dim") for d in node.attrs.get("squeeze_dims", [])}
    if not dims:
        dims = {d for d, size in enumerate(x.shape) if size == 1}
    if any(x.shape[d] != 1 for d in dims):
        raise Unsupported(f"Squeeze of dims {sorted(dims)} of {x.type}, which are not all 1")
    return [reshape(ctx, x, tuple(size for d, size in enumerate(x.shape) if d not in dims))]


@tf_converter("ExpandDims")
def expand_dims(ctx, node, ins):
    x, dim_value = ins
    rank = len(x.shape)
    dim = axis(const_int(ctx, dim_value, "ExpandDims dim"), rank + 1, "ExpandDims dim")
    return [reshape(ctx, x, tuple(x.shape[:dim]) + (1,) + tuple(x.shape[dim:]))]


@tf_converter("Transpose")
def transpose(ctx, node, ins):
    x, perm_value = ins
    perm = tuple(axis(p, len(x.shape), "Transpose perm") for p in const_ints(ctx, perm_value, "Transpose perm"))
    if perm == tuple(range(len(x.shape))):
        return [x]
    return [ctx.emit1("Transpose", [x], {"perm": perm})]


def _concat(ctx, values, index: int):
    rank = len(values[0].shape)
    if rank == 0:
        raise Unsupported("concatenation of scalars")
    dim = axis(index, rank, "concat axis")
    values = [v for v in values if v.shape[dim] != 0] or values[:1]
    return values[0] if len(values) == 1 else ctx.emit1("Concat", values, {"axis": dim})


@tf_converter("ConcatV2")
def concat_v2(ctx, node, ins):
    return [_concat(ctx, ins[:-1], const_int(ctx, ins[-1], "concat axis"))]


@tf_converter("Concat")
def concat_v1(ctx, node, ins):
    return [_concat(ctx, ins[1:], const_int(ctx, ins[0], "concat axis"))]


@tf_converter("Pack")
def pack(ctx, node, ins):
    rank = len(ins[0].shape)
    dim = axis(int(node.attrs.get("axis", 0)), rank + 1, "Pack axis")
    shape = tuple(ins[0].shape[:dim]) + (1,) + tuple(ins[0].shape[dim:])
    pieces = [reshape(ctx, v, shape) for v in ins]
    return [pieces[0] if len(pieces) == 1 else ctx.emit1("Concat", pieces, {"axis": dim})]


@tf_converter("Unpack")
def unpack(ctx, node, ins):
    x = ins[0]
    rank = len(x.shape)
    dim = axis(int(node.attrs.get("axis", 0)), rank, "Unpack axis")
    shape = tuple(x.shape[:dim]) + tuple(x.shape[dim + 1:])
    pieces = _split(ctx, x, dim, [1] * x.shape[dim])
    return [reshape(ctx, p, shape) for p in pieces]


def _split(ctx, x, dim: int, sizes: list[int]) -> list:
    if len(sizes) == 1:
        return [x]
    return ctx.emit("Split", [x], {"axis": dim, "split": tuple(sizes)}, n_outputs=len(sizes))


@tf_converter("Split")
def split(ctx, node, ins):
    axis_value, x = ins
    dim = axis(const_int(ctx, axis_value, "Split axis"), len(x.shape), "Split axis")
    count = int(node.attrs.get("num_split", 1))
    if count <= 0 or x.shape[dim] % count:
        raise Unsupported(f"Split of dim {dim} of {x.type} into {count} equal pieces")
    return _split(ctx, x, dim, [x.shape[dim] // count] * count)


@tf_converter("SplitV")
def split_v(ctx, node, ins):
    x, sizes_value, axis_value = ins
    dim = axis(const_int(ctx, axis_value, "SplitV axis"), len(x.shape), "SplitV axis")
    sizes = const_ints(ctx, sizes_value, "SplitV size_splits")
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in sizes):
        raise Unsupported(f"SplitV sizes {sizes}: at most one may be -1 and none below")
    if unknown:
        sizes[unknown[0]] = x.shape[dim] - sum(s for s in sizes if s != -1)
    if sum(sizes) != x.shape[dim] or any(s < 0 for s in sizes):
        raise Unsupported(f"SplitV sizes {sizes} do not add up to dim {dim} of {x.type}")
    return _split(ctx, x, dim, sizes)


@tf_converter("Shape")
def shape(ctx, node, ins):
    return [ctx.const(np.array(ins[0].shape, dtype=node.attrs.get("out_type", np.int32)))]


@tf_converter("ShapeN")
def shape_n(ctx, node, ins):
    dtype = node.attrs.get("out_type", np.int32)
    return [ctx.const(np.array(v.shape, dtype=dtype)) for v in ins]


@tf_converter("Size")
def size(ctx, node, ins):
    return [ctx.const(np.array(ins[0].type.size, dtype=node.attrs.get("out_type", np.int32)))]


@tf_converter("Rank")
def rank(ctx, node, ins):
    return [ctx.const(np.array(len(ins[0].shape), dtype=np.int32))]


@tf_converter("ZerosLike", "OnesLike")
def zeros_like(ctx, node, ins):
    fill = np.zeros if node.op == "ZerosLike" else np.ones
    return [ctx.const(fill(ins[0].shape, dtype=ins[0].dtype))]


@tf_converter("Fill")
def fill(ctx, node, ins):
    dims_value, value = ins
    dims = tuple(const_ints(ctx, dims_value, "Fill dims"))
    if any(d < 0 for d in dims):
        raise Unsupported(f"Fill dims {dims} must be >= 0")
    if value.const is not None:
        return [ctx.const(np.full(dims, value.const, dtype=value.dtype))]
    return [ctx.emit1("Expand", [value], {"shape": dims})]


@tf_converter("Range")
def range_op(ctx, node, ins):
    start, limit, delta = (ctx.const_value(v, "Range's operands").reshape(-1)[0] for v in ins)
    if delta == 0:
        raise Unsupported("Range with a zero delta")
    return [ctx.const(np.arange(start, limit, delta).astype(node.attrs.get("Tidx", ins[0].dtype)))]


@tf_converter("Tile")
def tile(ctx, node, ins):
    x, multiples = ins
    repeats = tuple(const_ints(ctx, multiples, "Tile multiples"))
    if len(repeats) != len(x.shape):
        raise Unsupported(f"Tile multiples {repeats} do not fit {x.type}")
    return [ctx.emit1("Tile", [x], {"repeats": repeats})]


@tf_converter("BroadcastTo")
def broadcast_to(ctx, node, ins):
    x, shape_value = ins
    return [ctx.emit1("Expand", [x], {"shape": tuple(const_ints(ctx, shape_value, "BroadcastTo shape"))})]
