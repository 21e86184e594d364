"""Converters for TensorFlow's slices and gathers: Slice, StridedSlice (every mask, its
sparse spec expanded to one dense slice per dim), ReverseV2 (a slice with step -1), GatherV2
(with batch_dims) and GatherNd."""

from __future__ import annotations

from hobbit.errors import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import axis, const_int, const_ints, reshape, sliced


@tf_converter("Slice")
def slice_op(ctx, node, ins):
    x, begin_value, size_value = ins
    begins = const_ints(ctx, begin_value, "Slice begin")
    sizes = const_ints(ctx, size_value, "Slice size")
    if len(begins) != len(x.shape) or len(sizes) != len(x.shape):
        raise Unsupported(f"Slice begin {begins} and size {sizes} do not fit {x.type}")
    sizes = [dim - b if s == -1 else s for b, s, dim in zip(begins, sizes, x.shape)]
    if any(b < 0 or s < 0 or b + s > dim for b, s, dim in zip(begins, sizes, x.shape)):
        raise Unsupported(f"Slice begin {begins} size {sizes} leaves {x.type}")
    return [sliced(ctx, x, begins, [1] * len(begins), sizes)]


@tf_converter("StridedSlice")
def strided_slice(ctx, node, ins):
    """Every mask: the sparse spec (with its ellipsis and new axes) is expanded to one
    (start, step, size) per input dim, sliced, and reshaped to add the new axes and drop
    the shrunk ones."""
    x, begin_value, end_value, strides_value = ins
    begins = const_ints(ctx, begin_value, "StridedSlice begin")
    ends = const_ints(ctx, end_value, "StridedSlice end")
    strides = const_ints(ctx, strides_value, "StridedSlice strides")
    if not len(begins) == len(ends) == len(strides):
        raise Unsupported(f"StridedSlice begin {begins}, end {ends}, strides {strides} differ in length")
    masks = {name: int(node.attrs.get(name, 0)) for name in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    starts, steps, sizes, out_shape = _dense_slice(x.shape, begins, ends, strides, masks)
    return [reshape(ctx, sliced(ctx, x, starts, steps, sizes), tuple(out_shape))]


def _dense_slice(shape, begins, ends, strides, masks) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per input dim (start, step, size), and the output shape; a spec without an ellipsis
    has one implied at its end."""
    def bit(name: str, i: int) -> bool:
        return bool(masks[name] >> i & 1)

    if bin(masks["ellipsis_mask"]).count("1") > 1:
        raise Unsupported("StridedSlice with more than one ellipsis")
    entries: list[int | None] = list(range(len(begins)))
    if not masks["ellipsis_mask"]:
        entries.append(None)
    consuming = sum(1 for i in range(len(begins)) if not bit("new_axis_mask", i) and not bit("ellipsis_mask", i))
    if consuming > len(shape):
        raise Unsupported(f"StridedSlice indexes {consuming} dims of a rank-{len(shape)} tensor")
    starts, steps, sizes, out_shape = [], [], [], []
    dim = 0
    for i in entries:
        if i is None or bit("ellipsis_mask", i):
            for _ in range(len(shape) - consuming):
                starts.append(0)
                steps.append(1)
                sizes.append(shape[dim])
                out_shape.append(shape[dim])
                dim += 1
        elif bit("new_axis_mask", i):
            out_shape.append(1)
        else:
            start, step, length = _dim_slice(shape[dim], begins[i], ends[i], strides[i],
                                             bit("begin_mask", i), bit("end_mask", i), bit("shrink_axis_mask", i))
            starts.append(start)
            steps.append(step)
            sizes.append(length)
            if not bit("shrink_axis_mask", i):
                out_shape.append(length)
            dim += 1
    return starts, steps, sizes, out_shape


def _dim_slice(size: int, begin: int, end: int, stride: int, begin_masked: bool, end_masked: bool,
               shrink: bool) -> tuple[int, int, int]:
    """(start, step, length) of one dim; TensorFlow clamps begin and end as Python slices do."""
    if stride == 0:
        raise Unsupported("StridedSlice with a zero stride")
    if shrink:
        index = begin + size if begin < 0 else begin
        if not 0 <= index < size:
            raise Unsupported(f"StridedSlice index {begin} is outside a dim of size {size}")
        return index, 1, 1
    first, last, step = slice(None if begin_masked else begin, None if end_masked else end, stride).indices(size)
    length = len(range(first, last, step))
    return (first if length else 0), step, length


@tf_converter("GatherV2", "Gather")
def gather(ctx, node, ins):
    """batch_dims 0 is hobbit's Gather; batch_dims == axis is a GatherND over the batch dims;
    batch_dims below axis moves the gathered dim to just after the batch dims first, and
    the index dims back to where the gathered dim was after."""
    params, indices = ins[0], ins[1]
    rank = len(params.shape)
    index = const_int(ctx, ins[2], "GatherV2 axis") if node.op == "GatherV2" else 0
    dim = axis(index, rank, "GatherV2 axis")
    batch_dims = int(node.attrs.get("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += len(indices.shape)
    if batch_dims == 0:
        return [ctx.emit1("Gather", [params, indices], {"axis": dim})]
    if not 0 < batch_dims <= dim or batch_dims > len(indices.shape):
        raise Unsupported(f"GatherV2 with batch_dims {batch_dims} and axis {dim} of {params.type}")
    if batch_dims == dim:
        return [_batch_gather(ctx, params, indices, batch_dims)]
    between = list(range(batch_dims, dim))
    perm = list(range(batch_dims)) + [dim] + between + list(range(dim + 1, rank))
    moved = ctx.emit1("Transpose", [params], {"perm": tuple(perm)})
    gathered = _batch_gather(ctx, moved, indices, batch_dims)
    index_dims = list(range(batch_dims, len(indices.shape)))
    middle = [batch_dims + len(index_dims) + i for i in range(len(between))]
    rest = list(range(batch_dims + len(index_dims) + len(between), len(gathered.shape)))
    back = list(range(batch_dims)) + middle + index_dims + rest
    return [ctx.emit1("Transpose", [gathered], {"perm": tuple(back)})]


def _batch_gather(ctx, params, indices, batch_dims: int):
    """GatherV2 with axis == batch_dims: each index picks along the dim after the batch dims."""
    expanded = reshape(ctx, indices, tuple(indices.shape) + (1,))
    return ctx.emit1("GatherND", [params, expanded], {"batch_dims": batch_dims})


@tf_converter("GatherNd")
def gather_nd(ctx, node, ins):
    """TF's GatherNd has no batch dims (tf.gather_nd builds those from other ops)."""
    policy = node.attrs.get("bad_indices_policy", "")
    policy = policy.decode() if isinstance(policy, bytes) else policy
    if policy not in ("", "DEFAULT", "ERROR"):
        raise Unsupported(f"GatherNd bad_indices_policy {policy!r}")
    params, indices = ins
    if not indices.shape or indices.shape[-1] > len(params.shape):
        raise Unsupported(f"GatherNd indices {indices.type} do not fit params {params.type}")
    return [ctx.emit1("GatherND", [params, indices], {"batch_dims": 0})]


@tf_converter("ReverseV2")
def reverse_v2(ctx, node, ins):
    """A Slice stepping backwards along every reversed dim."""
    x, axes_value = ins
    rank = len(x.shape)
    dims = {axis(a, rank, "ReverseV2 axis") for a in const_ints(ctx, axes_value, "ReverseV2 axis")}
    dims = {d for d in dims if x.shape[d] > 1}
    if not dims:
        return [x]
    starts = [x.shape[d] - 1 if d in dims else 0 for d in range(rank)]
    steps = [-1 if d in dims else 1 for d in range(rank)]
    return [sliced(ctx, x, starts, steps, list(x.shape))]
