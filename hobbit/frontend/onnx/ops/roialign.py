"""Converter for RoiAlign (opset 10; opset 16 adds coordinate_transformation_mode, whose
default, half_pixel, differs from opset 10's behaviour, output_half_pixel).

A detector pools the rois that survive NonMaxSuppression: rois (and the batch indices
taken from them) are then bounded along dim 0 (hobbit.frontend.common.bounded), the kernel
takes their extent and the pooled output is bounded by it."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.bounded import checked, mark_bounded
from hobbit.frontend.onnx.converters import converter

_MODES = {"half_pixel": 1, "output_half_pixel": 0}


def _roi_align(ctx, node, ins, half_pixel: int):
    a = ctx.attrs(node)
    x, rois, indices = ins
    mode = a.get("mode", "avg")
    if mode not in ("avg", "max"):
        raise Unsupported(f"mode={mode!r}")
    if np.dtype(x.dtype) not in (np.float32, np.float64) or rois.dtype != x.dtype:
        raise Unsupported(f"RoiAlign of {np.dtype(x.dtype).name} data with {np.dtype(rois.dtype).name} rois")
    if x.bounded is not None:
        raise Unsupported("RoiAlign of a feature map with a data-dependent dim")
    bounded = [v for v in (rois, indices) if v.bounded is not None]
    if any(v.bounded.axis != 0 for v in bounded):
        raise Unsupported("RoiAlign rois bounded along a dim other than their first")
    extent = bounded[0].bounded.extent if bounded else None
    if len(bounded) == 2 and indices.bounded.extent is not rois.bounded.extent:
        extent = checked(ctx, indices.bounded.extent, rois.bounded.extent, "eq")
    attrs = {"mode": mode, "output_height": int(a.get("output_height", 1)),
             "output_width": int(a.get("output_width", 1)), "sampling_ratio": int(a.get("sampling_ratio", 0)),
             "spatial_scale": float(a.get("spatial_scale", 1.0)), "half_pixel": half_pixel}
    out, = ctx.emit("RoiAlign", [x, rois, indices, extent], attrs, marks_own=True)
    return [out if extent is None else mark_bounded(out, 0, extent)]


@converter("RoiAlign", since=10)
def roi_align_10(ctx, node, ins):
    return _roi_align(ctx, node, ins, 0)


@converter("RoiAlign", since=16)
def roi_align_16(ctx, node, ins):
    mode = ctx.attrs(node).get("coordinate_transformation_mode", "half_pixel")
    if mode not in _MODES:
        raise Unsupported(f"coordinate_transformation_mode={mode!r}")
    return _roi_align(ctx, node, ins, _MODES[mode])
