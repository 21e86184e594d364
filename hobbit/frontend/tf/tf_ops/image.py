"""Converters for TensorFlow's image resizes, as hobbit's Resize tables with ONNX's
coordinate modes. TensorFlow's rules, per output index y and scale out/in:

- align_corners: x = y * (in - 1) / (out - 1); nearest rounds half up;
- half_pixel_centers: x = (y + 0.5) / scale - 0.5 for bilinear, and nearest takes
  floor((y + 0.5) / scale), which is half_pixel rounded half up;
- neither: x = y / scale (asymmetric); nearest rounds down.

The resize runs on the H and W axes of the NHWC tensor as it is: no transposes."""

from __future__ import annotations

from hobbit.errors import Unsupported
from hobbit.frontend.common.resize import ResizeMode, resize
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import const_ints


def _mode(node, mode: str) -> ResizeMode:
    align_corners = bool(node.attrs.get("align_corners", False))
    half_pixel = bool(node.attrs.get("half_pixel_centers", False))
    if align_corners and half_pixel:
        raise Unsupported("align_corners and half_pixel_centers together")
    coordinates = "align_corners" if align_corners else "half_pixel" if half_pixel else "asymmetric"
    nearest = "round_prefer_ceil" if align_corners or half_pixel else "floor"
    return ResizeMode(mode=mode, coordinates=coordinates, nearest=nearest)


def _resize(ctx, node, ins, mode: str):
    images, size_value = ins
    if len(images.shape) != 4:
        raise Unsupported(f"{node.op} of a rank-{len(images.shape)} tensor (it takes NHWC images)")
    sizes = const_ints(ctx, size_value, f"{node.op} size")
    if len(sizes) != 2 or any(s <= 0 for s in sizes):
        raise Unsupported(f"{node.op} size {sizes} must be two positive ints")
    return [resize(ctx, images, _mode(node, mode), None, sizes, None, [1, 2])]


@tf_converter("ResizeBilinear")
def resize_bilinear(ctx, node, ins):
    return _resize(ctx, node, ins, "linear")


@tf_converter("ResizeNearestNeighbor")
def resize_nearest(ctx, node, ins):
    return _resize(ctx, node, ins, "nearest")
