"""Converters for TensorFlow's block rearrangements: SpaceToBatchND and BatchToSpaceND (a
pad or crop around reshapes and a transpose), DepthToSpace and SpaceToDepth (in either data
format)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.layout import data_format, from_nhwc, to_nhwc
from hobbit.frontend.tf.tf_ops.operands import const_ints, padded, reshape, sliced


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
    x = padded(ctx, x, [(0, 0)] + pairs + [(0, 0)] * (len(x.shape) - m - 1))
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
    return [sliced(ctx, joined, starts, [1] * len(starts), sizes)]


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
