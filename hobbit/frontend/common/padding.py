"""Explicit (begin..., end...) pads: from ONNX's pads / auto_pad attributes (the Conv, ConvND
and pooling converters), and SAME padding split as ONNX's SAME_UPPER / SAME_LOWER split it,
which is also TensorFlow's SAME (its window ops' converters).

Kept apart from the converters so that ONNX's convnd.py and pool_nd.py need not import
nn.py, which itself hands non-4-D convolutions to convnd.py, and so that the TensorFlow
converters need no ONNX module."""

from __future__ import annotations

from hobbit.errors import Unsupported


def resolve_pads(auto_pad: str, pads: list[int] | None, in_hw: tuple[int, ...], kernel: tuple[int, ...],
                 strides: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[int, ...]:
    """Explicit (begin..., end...) pads from ONNX's pads / auto_pad attributes."""
    rank = len(kernel)
    if auto_pad in ("", "NOTSET"):
        pads = list(pads or [0] * (2 * rank))
        if len(pads) != 2 * rank:
            raise Unsupported(f"pads {pads} do not have {2 * rank} entries")
        return tuple(pads)
    if auto_pad == "VALID":
        return (0,) * (2 * rank)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto_pad!r}")
    totals = [max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
              for size, k, s, d in zip(in_hw, kernel, strides, dilations)]
    return split_same_padding(totals, auto_pad)


def split_same_padding(totals: list[int], auto_pad: str) -> tuple[int, ...]:
    """(begin..., end...) pads that share each total as SAME_UPPER (extra at the end) or SAME_LOWER does."""
    begins, ends = [], []
    for total in totals:
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return tuple(begins + ends)
