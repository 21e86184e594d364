"""Converters for bitwise ONNX ops on integer tensors (BitShift, BitwiseAnd/Or/Xor/Not)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.onnx.converters import converter


def _check_integer(op: str, x) -> None:
    if np.dtype(x.dtype).kind not in "iu":
        raise Unsupported(f"{op} of a {np.dtype(x.dtype).name} tensor (integer types only)")


@converter("BitShift", since=11)
def bit_shift(ctx, node, ins):
    _check_integer("BitShift", ins[0])
    direction = ctx.attrs(node).get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise Unsupported(f"direction={direction!r} (must be 'LEFT' or 'RIGHT')")
    return [ctx.emit1("BitShift", ins, {"left": int(direction == "LEFT")})]


def _bitwise(op: str):
    def convert(ctx, node, ins):
        _check_integer(op, ins[0])
        return [ctx.emit1(op, ins)]
    return convert


for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"):
    converter(_op, since=18)(_bitwise(_op))
