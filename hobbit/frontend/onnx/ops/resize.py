"""Converters for Resize and Upsample: their attributes and inputs read into a ResizeMode
and the scales or sizes, for the resize builder shared with TensorFlow
(hobbit.frontend.common.resize)."""

from __future__ import annotations

from hobbit.errors import Unsupported
from hobbit.frontend.common.resize import ResizeMode, resize
from hobbit.frontend.onnx.converters import converter

_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                     "asymmetric", "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _float_list(ctx, value, what: str) -> list[float] | None:
    if value is None:
        return None
    data = ctx.const_value(value, what)
    return None if data.size == 0 else [float(v) for v in data.reshape(-1)]


def _mode(a: dict, coordinates: str | None = None, nearest: str | None = None) -> ResizeMode:
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode!r}")
    m = ResizeMode(mode=mode,
                   coordinates=coordinates or a.get("coordinate_transformation_mode", "half_pixel"),
                   nearest=nearest or a.get("nearest_mode", "round_prefer_floor"),
                   cubic_a=float(a.get("cubic_coeff_a", -0.75)),
                   exclude_outside=bool(a.get("exclude_outside", 0)),
                   antialias=bool(a.get("antialias", 0)),
                   extrapolation_value=float(a.get("extrapolation_value", 0.0)))
    if m.coordinates not in _COORDINATE_MODES:
        raise Unsupported(f"coordinate_transformation_mode={m.coordinates!r}")
    if m.nearest not in _NEAREST_MODES:
        raise Unsupported(f"nearest_mode={m.nearest!r}")
    if m.antialias and mode == "nearest":
        raise Unsupported("antialias with mode 'nearest'")
    return m


@converter("Resize", since=10)
def resize_v10(ctx, node, ins):
    """Opset 10: inputs X, scales; asymmetric coordinates, nearest rounds down."""
    a = ctx.attrs(node)
    scales = _float_list(ctx, ins[1], "Resize scales")
    return [resize(ctx, ins[0], _mode(a, "asymmetric", "floor"), scales, None, None, None)]


@converter("Resize", since=11)
def resize_v11(ctx, node, ins):
    a = ctx.attrs(node)
    ins = list(ins) + [None] * (4 - len(ins))
    m = _mode(a)
    roi = _float_list(ctx, ins[1], "Resize roi") if m.coordinates == "tf_crop_and_resize" else None
    if m.coordinates == "tf_crop_and_resize" and roi is None:
        raise Unsupported("tf_crop_and_resize without roi")
    scales = _float_list(ctx, ins[2], "Resize scales")
    sizes = _float_list(ctx, ins[3], "Resize sizes")
    if (scales is None) == (sizes is None):
        raise Unsupported("Resize needs exactly one of scales and sizes")
    axes = a.get("axes")
    return [resize(ctx, ins[0], m, scales, None if sizes is None else [int(s) for s in sizes], roi,
                   None if axes is None else list(axes), a.get("keep_aspect_ratio_policy", "stretch"))]


def _upsample(ctx, node, x, scales: list[float] | None):
    a = ctx.attrs(node)
    if scales is None:
        raise Unsupported("Upsample without scales")
    mode = {"bilinear": "linear"}.get(a.get("mode", "nearest"), a.get("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"Upsample mode={mode!r}")
    m = ResizeMode(mode=mode, coordinates="asymmetric", nearest="floor")
    return [resize(ctx, x, m, scales, None, None, None)]


@converter("Upsample", since=7)
def upsample_v7(ctx, node, ins):
    scales = ctx.attrs(node).get("scales")
    return _upsample(ctx, node, ins[0], None if scales is None else [float(s) for s in scales])


@converter("Upsample", since=9)
def upsample_v9(ctx, node, ins):
    return _upsample(ctx, node, ins[0], _float_list(ctx, ins[1], "Upsample scales"))
