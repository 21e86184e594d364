"""Converters for TensorFlow's pads: Pad, PadV2 (a constant value) and MirrorPad (REFLECT is
hobbit's reflect pad, SYMMETRIC is built per dim from reversed slices)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.tf.converters import tf_converter
from hobbit.frontend.tf.tf_ops.operands import const_ints, padded


def _paddings(ctx, x, value) -> list[tuple[int, int]]:
    flat = const_ints(ctx, value, "paddings")
    rank = len(x.shape)
    if len(flat) != 2 * rank:
        raise Unsupported(f"paddings {flat} do not fit {x.type}")
    return [(flat[2 * d], flat[2 * d + 1]) for d in range(rank)]


@tf_converter("Pad")
def pad(ctx, node, ins):
    return [padded(ctx, ins[0], _paddings(ctx, ins[0], ins[1]))]


@tf_converter("PadV2")
def pad_v2(ctx, node, ins):
    x, paddings, constant = ins
    data = ctx.const_value(constant, "PadV2's constant_values")
    return [padded(ctx, x, _paddings(ctx, x, paddings), "constant", float(np.asarray(data).reshape(-1)[0]))]


@tf_converter("MirrorPad")
def mirror_pad(ctx, node, ins):
    """REFLECT is hobbit's reflect pad; SYMMETRIC (the edge repeated) is built per dim as
    Concat(reversed head, x, reversed tail)."""
    x = ins[0]
    pairs = _paddings(ctx, x, ins[1])
    mode = node.attrs.get("mode", "REFLECT")
    if mode == "REFLECT":
        return [padded(ctx, x, pairs, "reflect")]
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
