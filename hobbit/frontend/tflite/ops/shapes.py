"""TFLite shape and data-movement builtins as TensorFlow ops: reshape, squeeze and expand,
transpose, concatenation, pack/unpack, splits, slices, gathers, padding, tiling, reversal,
broadcasting, shape/rank/fill/range, resizing, and the space/depth/batch rearrangements."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext
from hobbit.frontend.tflite.ops.common import activation, declared_dims, reshaped
from hobbit.frontend.tflite.ops.table import translates, unsupported


# More dims than any TensorFlow kernel takes; a larger count is a damaged file.
MAX_RANK = 64


@translates("RESHAPE")
def reshape(c: OpContext) -> list[TensorRef]:
    """The new shape is input 1 when given, else the options' new_shape, else the output's."""
    dtype = c.dtype(0)
    if c.has_input(1) and c.tensor(1).shape != (0,):
        return [c.node("Reshape", [c.input(0), c.input(1)], T=dtype, Tshape=c.dtype(1))]
    shape = c.ints_option(S.ReshapeOptions.NEW_SHAPE)
    if shape is None:
        shape = declared_dims(c, c.output(0))
    if shape is None:
        return unsupported(c, "TFLite:RESHAPE")
    return [reshaped(c, c.input(0), shape, dtype)]


@translates("SQUEEZE")
def squeeze(c: OpContext) -> list[TensorRef]:
    dims = c.ints_option(S.SqueezeOptions.SQUEEZE_DIMS) or []
    return [c.node("Squeeze", [c.input(0)], T=c.dtype(0), squeeze_dims=dims)]


@translates("EXPAND_DIMS")
def expand_dims(c: OpContext) -> list[TensorRef]:
    return [c.node("ExpandDims", [c.input(0), c.input(1)], T=c.dtype(0), Tdim=c.dtype(1))]


@translates("TRANSPOSE")
def transpose(c: OpContext) -> list[TensorRef]:
    return [c.node("Transpose", [c.input(0), c.input(1)], T=c.dtype(0), Tperm=c.dtype(1))]


@translates("CONCATENATION")
def concatenation(c: OpContext) -> list[TensorRef]:
    O = S.ConcatenationOptions
    values = c.inputs()
    axis = c.const(c.int_option(O.AXIS), suffix="axis")
    y = c.node("ConcatV2", [*values, axis], N=len(values), T=c.dtype(0), Tidx=np.dtype(np.int32))
    return [activation(c, y, c.enum_option(O.ACTIVATION))]


@translates("PACK")
def pack(c: OpContext) -> list[TensorRef]:
    values = c.inputs()
    return [c.node("Pack", values, N=len(values), T=c.dtype(0), axis=c.int_option(S.PackOptions.AXIS))]


@translates("UNPACK")
def unpack(c: OpContext) -> list[TensorRef]:
    O = S.UnpackOptions
    num = c.int_option(O.NUM)
    y = c.node("Unpack", [c.input(0)], T=c.dtype(0), num=num, axis=c.int_option(O.AXIS))
    return [TensorRef(y.node, i) for i in range(num)]


@translates("SPLIT")
def split(c: OpContext) -> list[TensorRef]:
    """Inputs (axis, value), as TF's Split."""
    num = c.int_option(S.SplitOptions.NUM_SPLITS)
    y = c.node("Split", [c.input(0), c.input(1)], T=c.dtype(1), num_split=num)
    return [TensorRef(y.node, i) for i in range(num)]


@translates("SPLIT_V")
def split_v(c: OpContext) -> list[TensorRef]:
    """Inputs (value, size_splits, axis), as TF's SplitV."""
    num = c.int_option(S.SplitOptions.NUM_SPLITS)
    y = c.node("SplitV", c.inputs(), T=c.dtype(0), Tlen=c.dtype(1), num_split=num)
    return [TensorRef(y.node, i) for i in range(num)]


@translates("STRIDED_SLICE")
def strided_slice(c: OpContext) -> list[TensorRef]:
    """With `offset`, end is relative to begin: TF's end is begin + end."""
    O = S.StridedSliceOptions
    index = c.dtype(1)
    begin, end = c.input(1), c.input(2)
    if c.bool_option(O.OFFSET):
        end = c.node("AddV2", [begin, end], T=index)
    if c.has_input(3):
        step = c.input(3)
    else:
        (count,) = c.static_shape(1, 1)
        if count > MAX_RANK:
            raise ShapeError(f"{c.emitter.model.source}: {c.label} writing '{c.base}' slices {count} dims")
        step = c.const(np.ones(count, dtype=index), index, "strides")
    return [
        c.node(
            "StridedSlice",
            [c.input(0), begin, end, step],
            T=c.dtype(0),
            Index=index,
            begin_mask=c.int_option(O.BEGIN_MASK),
            end_mask=c.int_option(O.END_MASK),
            ellipsis_mask=c.int_option(O.ELLIPSIS_MASK),
            new_axis_mask=c.int_option(O.NEW_AXIS_MASK),
            shrink_axis_mask=c.int_option(O.SHRINK_AXIS_MASK),
        )
    ]


@translates("SLICE")
def slice_(c: OpContext) -> list[TensorRef]:
    return [c.node("Slice", c.inputs(), T=c.dtype(0), Index=c.dtype(1))]


@translates("GATHER")
def gather(c: OpContext) -> list[TensorRef]:
    O = S.GatherOptions
    axis = c.const(c.int_option(O.AXIS), suffix="axis")
    return [
        c.node(
            "GatherV2", [c.input(0), c.input(1), axis], Tparams=c.dtype(0), Tindices=c.dtype(1),
            Taxis=np.dtype(np.int32), batch_dims=c.int_option(O.BATCH_DIMS),
        )
    ]


@translates("GATHER_ND")
def gather_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("GatherNd", c.inputs(), Tparams=c.dtype(0), Tindices=c.dtype(1))]


@translates("PAD", "PADV2")
def pad(c: OpContext) -> list[TensorRef]:
    attrs = {"T": c.dtype(0), "Tpaddings": c.dtype(1)}
    if c.has_input(2):
        return [c.node("PadV2", [c.input(0), c.input(1), c.input(2)], **attrs)]
    return [c.node("Pad", [c.input(0), c.input(1)], **attrs)]


@translates("MIRROR_PAD")
def mirror_pad(c: OpContext) -> list[TensorRef]:
    code = c.enum_option(S.MirrorPadOptions.MODE)
    mode = S.MIRROR_PAD_MODE[code] if 0 <= code < len(S.MIRROR_PAD_MODE) else f"MODE_{code}"
    return [c.node("MirrorPad", [c.input(0), c.input(1)], T=c.dtype(0), Tpaddings=c.dtype(1), mode=mode)]


@translates("TILE")
def tile(c: OpContext) -> list[TensorRef]:
    return [c.node("Tile", c.inputs(), T=c.dtype(0), Tmultiples=c.dtype(1))]


@translates("REVERSE_V2")
def reverse_v2(c: OpContext) -> list[TensorRef]:
    return [c.node("ReverseV2", c.inputs(), T=c.dtype(0), Tidx=c.dtype(1))]


@translates("BROADCAST_TO")
def broadcast_to(c: OpContext) -> list[TensorRef]:
    return [c.node("BroadcastTo", c.inputs(), T=c.dtype(0), Tidx=c.dtype(1))]


@translates("SHAPE")
def shape(c: OpContext) -> list[TensorRef]:
    return [c.node("Shape", [c.input(0)], T=c.dtype(0), out_type=c.output(0).dtype)]


@translates("RANK")
def rank(c: OpContext) -> list[TensorRef]:
    return [c.node("Rank", [c.input(0)], T=c.dtype(0))]


@translates("FILL")
def fill(c: OpContext) -> list[TensorRef]:
    """Inputs (dims, value), as TF's Fill."""
    return [c.node("Fill", [c.input(0), c.input(1)], T=c.dtype(1), index_type=c.dtype(0))]


@translates("RANGE")
def range_(c: OpContext) -> list[TensorRef]:
    return [c.node("Range", c.inputs(), Tidx=c.dtype(0))]


@translates("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(c: OpContext) -> list[TensorRef]:
    if c.op.builtin == "RESIZE_BILINEAR":
        op, O = "ResizeBilinear", S.ResizeBilinearOptions
    else:
        op, O = "ResizeNearestNeighbor", S.ResizeNearestNeighborOptions
    return [
        c.node(
            op, [c.input(0), c.input(1)], T=c.dtype(0),
            align_corners=c.bool_option(O.ALIGN_CORNERS),
            half_pixel_centers=c.bool_option(O.HALF_PIXEL_CENTERS),
        )
    ]


_BLOCK_OPS = {"SPACE_TO_DEPTH": "SpaceToDepth", "DEPTH_TO_SPACE": "DepthToSpace"}


@translates(*_BLOCK_OPS)
def block_rearrangement(c: OpContext) -> list[TensorRef]:
    return [
        c.node(
            _BLOCK_OPS[c.op.builtin], [c.input(0)], T=c.dtype(0),
            block_size=c.int_option(S.BlockSizeOptions.BLOCK_SIZE), data_format="NHWC",
        )
    ]


@translates("SPACE_TO_BATCH_ND")
def space_to_batch_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("SpaceToBatchND", c.inputs(), T=c.dtype(0), Tblock_shape=c.dtype(1), Tpaddings=c.dtype(2))]


@translates("BATCH_TO_SPACE_ND")
def batch_to_space_nd(c: OpContext) -> list[TensorRef]:
    return [c.node("BatchToSpaceND", c.inputs(), T=c.dtype(0), Tblock_shape=c.dtype(1), Tcrops=c.dtype(2))]
