"""TensorFlow's data_format and window attributes for hobbit's NCHW ops.

An NHWC op becomes Transpose(NHWC->NCHW) -> the NCHW op -> Transpose(NCHW->NHWC). The
converters keep these transposes local and simple on purpose: the transpose pass
(hobbit/passes/transpose.py) sinks and cancels them across the network, which it can
only do well if every converter hands it the same plain pattern."""

from __future__ import annotations

from hobbit.errors import Unsupported
from hobbit.frontend.common.padding import split_same_padding

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


def data_format(node) -> str:
    fmt = node.attrs.get("data_format", "NHWC")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {fmt!r}")
    return fmt


def spatial(node, name: str, fmt: str, default: int = 1) -> tuple[int, int]:
    """The (H, W) entries of a 4-entry attribute given in `fmt` order (strides, ksize ...)."""
    values = node.attrs.get(name)
    if values is None:
        return (default, default)
    values = [int(v) for v in values]
    if len(values) != 4:
        raise Unsupported(f"{name} {values} must have 4 entries")
    batch, channel = (0, 3) if fmt == "NHWC" else (0, 1)
    if values[batch] != 1 or values[channel] != 1:
        raise Unsupported(f"{name} {values} other than 1 in the batch or channel dim")
    return (values[1], values[2]) if fmt == "NHWC" else (values[2], values[3])


def spatial_dims(shape: tuple[int, ...], fmt: str) -> tuple[int, int]:
    return (shape[1], shape[2]) if fmt == "NHWC" else (shape[2], shape[3])


def window_pads(node, fmt: str, in_hw: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
                dilations: tuple[int, int] = (1, 1)) -> tuple[int, int, int, int]:
    """hobbit's (top, left, bottom, right) pads for TF's padding SAME, VALID or EXPLICIT.
    SAME puts the odd pixel at the end, as ONNX's SAME_UPPER does."""
    padding = node.attrs.get("padding", "VALID")
    padding = padding.decode() if isinstance(padding, bytes) else padding
    if padding == "VALID":
        return (0, 0, 0, 0)
    if padding == "SAME":
        totals = [max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
                  for size, k, s, d in zip(in_hw, kernel, strides, dilations)]
        top, left, bottom, right = split_same_padding(totals, "SAME_UPPER")
        return (top, left, bottom, right)
    if padding == "EXPLICIT":
        explicit = [int(v) for v in node.attrs.get("explicit_paddings", [])]
        if len(explicit) != 8:
            raise Unsupported(f"explicit_paddings {explicit} must have 8 entries")
        h, w = (1, 2) if fmt == "NHWC" else (2, 3)
        return (explicit[2 * h], explicit[2 * w], explicit[2 * h + 1], explicit[2 * w + 1])
    raise Unsupported(f"padding {padding!r}")


def to_nchw(ctx, x, fmt: str):
    return ctx.emit1("Transpose", [x], {"perm": TO_NCHW}) if fmt == "NHWC" else x


def to_format(ctx, y, fmt: str):
    """An NCHW result back in the node's data_format."""
    return ctx.emit1("Transpose", [y], {"perm": TO_NHWC}) if fmt == "NHWC" else y


def to_nhwc(ctx, x, fmt: str):
    """For ops built in NHWC (DepthToSpace ...): an NCHW input in NHWC."""
    return ctx.emit1("Transpose", [x], {"perm": TO_NHWC}) if fmt == "NCHW" else x


def from_nhwc(ctx, y, fmt: str):
    """An NHWC result back in the node's data_format."""
    return ctx.emit1("Transpose", [y], {"perm": TO_NCHW}) if fmt == "NCHW" else y
