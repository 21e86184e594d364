"""Converters for TensorFlow's constants, identities, shape arithmetic and data movement.

Shapes are static once the graph inputs' shapes are known, so the shape ops (Shape,
Size, Rank, Fill, Range, ZerosLike ...) become constants here, and the arithmetic built
on them folds as the importer emits it."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.layout import data_format, from_nhwc, to_nhwc
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


def _slice(ctx, x, starts: list[int], steps: list[int], sizes: list[int]):
    if steps == [1] * len(steps) and starts == [0] * len(starts) and tuple(sizes) == tuple(x.shape):
        return x
    return ctx.emit1("Slice", [x], {"starts": tuple(starts), "steps": tuple(steps), "sizes": tuple(sizes)})


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
    return [_slice(ctx, x, begins, [1] * len(begins), sizes)]


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
    return [reshape(ctx, _slice(ctx, x, starts, steps, sizes), tuple(out_shape))]


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


def _paddings(ctx, x, value) -> list[tuple[int, int]]:
    flat = const_ints(ctx, value, "paddings")
    rank = len(x.shape)
    if len(flat) != 2 * rank:
        raise Unsupported(f"paddings {flat} do not fit {x.type}")
    return [(flat[2 * d], flat[2 * d + 1]) for d in range(rank)]


def _pad(ctx, x, pairs, mode: str = "constant", value: float = 0.0):
    if all(p == (0, 0) for p in pairs):
        return x
    pads = tuple(b for b, _ in pairs) + tuple(e for _, e in pairs)
    return ctx.emit1("Pad", [x], {"pads": pads, "mode": mode, "value": value})


@tf_converter("Pad")
def pad(ctx, node, ins):
    return [_pad(ctx, ins[0], _paddings(ctx, ins[0], ins[1]))]


@tf_converter("PadV2")
def pad_v2(ctx, node, ins):
    x, paddings, constant = ins
    data = ctx.const_value(constant, "PadV2's constant_values")
    return [_pad(ctx, x, _paddings(ctx, x, paddings), "constant", float(np.asarray(data).reshape(-1)[0]))]


@tf_converter("MirrorPad")
def mirror_pad(ctx, node, ins):
    """REFLECT is hobbit's reflect pad; SYMMETRIC (the edge repeated) is built per dim as
    Concat(reversed head, x, reversed tail)."""
    x = ins[0]
    pairs = _paddings(ctx, x, ins[1])
    mode = node.attrs.get("mode", "REFLECT")
    if mode == "REFLECT":
        return [_pad(ctx, x, pairs, "reflect")]
    if mode != "SYMMETRIC":
        raise Unsupported(f"MirrorPad mode {mode!r}")
    for dim, (before, after) in enumerate(pairs):
        size = x.shape[dim]
        if before > size or after > size or before < 0 or after < 0:
            raise Unsupported(f"SYMMETRIC padding {(before, after)} of dim {dim} of size {size}")
        pieces = []
        if before:
            pieces.append(_reversed_part(ctx, x, dim, before - 1, before))
        pieces.append(x)
        if after:
            pieces.append(_reversed_part(ctx, x, dim, size - 1, after))
        x = pieces[0] if len(pieces) == 1 else ctx.emit1("Concat", pieces, {"axis": dim})
    return [x]


def _reversed_part(ctx, x, dim: int, start: int, count: int):
    """x's `count` entries along `dim` from `start` backwards."""
    rank = len(x.shape)
    starts = [start if d == dim else 0 for d in range(rank)]
    steps = [-1 if d == dim else 1 for d in range(rank)]
    sizes = [count if d == dim else x.shape[d] for d in range(rank)]
    return ctx.emit1("Slice", [x], {"starts": tuple(starts), "steps": tuple(steps), "sizes": tuple(sizes)})


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
    return [_slice(ctx, x, starts, steps, list(x.shape))]


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


def _blocks(ctx, x, block_value, pairs_value, what: str) -> tuple[list[int], list[tuple[int, int]]]:
    block = const_ints(ctx, block_value, f"{what} block_shape")
    flat = const_ints(ctx, pairs_value, f"{what} paddings")
    if len(flat) != 2 * len(block) or len(block) + 1 > len(x.shape) or any(b <= 0 for b in block):
        raise Unsupported(f"{what} block_shape {block} and paddings {flat} do not fit {x.type}")
    return block, [(flat[2 * i], flat[2 * i + 1]) for i in range(len(block))]


@tf_converter("SpaceToBatchND")
def space_to_batch(ctx, node, ins):
    """Pad the block dims, cut each into (size/b, b), move the b's in front of the batch.
    With BatchToSpaceND around a convolution, this is how TensorFlow dilates."""
    x = ins[0]
    block, pairs = _blocks(ctx, x, ins[1], ins[2], "SpaceToBatchND")
    m = len(block)
    x = _pad(ctx, x, [(0, 0)] + pairs + [(0, 0)] * (len(x.shape) - m - 1))
    spatial, rest = list(x.shape[1:m + 1]), list(x.shape[m + 1:])
    if any(size % b for size, b in zip(spatial, block)):
        raise Unsupported(f"SpaceToBatchND: padded dims {spatial} are not multiples of block_shape {block}")
    cut = [x.shape[0]] + [d for size, b in zip(spatial, block) for d in (size // b, b)] + rest
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    moved = ctx.emit1("Transpose", [reshape(ctx, x, tuple(cut))], {"perm": tuple(perm)})
    batch = x.shape[0] * int(np.prod(block))
    return [reshape(ctx, moved, tuple([batch] + [size // b for size, b in zip(spatial, block)] + rest))]


@tf_converter("BatchToSpaceND")
def batch_to_space(ctx, node, ins):
    """SpaceToBatchND's inverse: the block factors leave the batch for their dims, then the crops."""
    x = ins[0]
    block, crops = _blocks(ctx, x, ins[1], ins[2], "BatchToSpaceND")
    m, blocks = len(block), int(np.prod(block))
    if x.shape[0] % blocks:
        raise Unsupported(f"BatchToSpaceND: batch {x.shape[0]} is not a multiple of block_shape {block}")
    batch, spatial, rest = x.shape[0] // blocks, list(x.shape[1:m + 1]), list(x.shape[m + 1:])
    split = block + [batch] + spatial + rest
    perm = [m] + [d for i in range(m) for d in (m + 1 + i, i)] + list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    moved = ctx.emit1("Transpose", [reshape(ctx, x, tuple(split))], {"perm": tuple(perm)})
    joined = reshape(ctx, moved, tuple([batch] + [size * b for size, b in zip(spatial, block)] + rest))
    full = list(joined.shape)
    starts = [0] + [begin for begin, _ in crops] + [0] * len(rest)
    sizes = [batch] + [full[1 + i] - begin - end for i, (begin, end) in enumerate(crops)] + rest
    if any(s < 0 for s in sizes):
        raise Unsupported(f"BatchToSpaceND crops {crops} exceed the dims {full}")
    return [_slice(ctx, joined, starts, [1] * len(starts), sizes)]


def _block_size(node, x, what: str) -> tuple[int, str]:
    size = int(node.attrs.get("block_size", 0))
    if size < 2:
        raise Unsupported(f"{what} block_size {size} (it must be at least 2)")
    fmt = data_format(node)
    if len(x.shape) != 4:
        raise Unsupported(f"{what} of a rank-{len(x.shape)} tensor (it takes 4-D images)")
    return size, fmt


@tf_converter("DepthToSpace")
def depth_to_space(ctx, node, ins):
    """NHWC [N, H, W, b*b*C] -> [N, H*b, W*b, C]: channel (i*b + j)*C + c goes to pixel
    (i, j) of its block (ONNX's DCR order), as reshape, transpose, reshape."""
    b, fmt = _block_size(node, ins[0], "DepthToSpace")
    x = to_nhwc(ctx, ins[0], fmt)
    n, h, w, c = x.shape
    if c % (b * b):
        raise Unsupported(f"DepthToSpace of {c} channels, not a multiple of block_size² {b * b}")
    blocks = reshape(ctx, x, (n, h, w, b, b, c // (b * b)))
    moved = ctx.emit1("Transpose", [blocks], {"perm": (0, 1, 3, 2, 4, 5)})
    return [from_nhwc(ctx, reshape(ctx, moved, (n, h * b, w * b, c // (b * b))), fmt)]


@tf_converter("SpaceToDepth")
def space_to_depth(ctx, node, ins):
    """DepthToSpace's inverse: NHWC [N, H*b, W*b, C] -> [N, H, W, b*b*C]."""
    b, fmt = _block_size(node, ins[0], "SpaceToDepth")
    x = to_nhwc(ctx, ins[0], fmt)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise Unsupported(f"SpaceToDepth of {h}x{w} pixels, not multiples of block_size {b}")
    blocks = reshape(ctx, x, (n, h // b, b, w // b, b, c))
    moved = ctx.emit1("Transpose", [blocks], {"perm": (0, 1, 3, 2, 4, 5)})
    return [from_nhwc(ctx, reshape(ctx, moved, (n, h // b, w // b, b * b * c)), fmt)]
