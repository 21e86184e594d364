"""Bitwise ops on integer tensors: BitShift and BitwiseAnd/Or/Xor/Not, element-wise."""

from __future__ import annotations

import numpy as np

from hobbit.ops.elementwise import binary, binary_with_attrs, unary


def _np_shift(x: np.ndarray, amount: np.ndarray, attrs: dict) -> np.ndarray:
    """ONNX BitShift: an amount outside [0, bits) shifts every bit out (sign fill for RIGHT)."""
    bits = x.dtype.itemsize * 8
    x, amount = np.broadcast_arrays(x, amount)
    in_range = (amount >= 0) & (amount < bits)
    safe = np.where(in_range, amount, 0).astype(x.dtype)
    if attrs["left"]:
        return np.where(in_range, np.left_shift(x, safe), 0).astype(x.dtype)
    fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
    return np.where(in_range, np.right_shift(x, safe), fill).astype(x.dtype)


binary_with_attrs("BitShift", _np_shift, {"left": 1})
binary("BitwiseAnd", np.bitwise_and)
binary("BitwiseOr", np.bitwise_or)
binary("BitwiseXor", np.bitwise_xor)
unary("BitwiseNot", lambda x, a: np.invert(x))
