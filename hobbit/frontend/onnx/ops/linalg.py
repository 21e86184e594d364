"""Converters for Einsum (hobbit.frontend.common.einsum) and Det (float16/bfloat16 matrices
are factorised in float32)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.einsum import emit_einsum
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.onnx.converters import converter


@converter("Einsum", since=12)
def einsum(ctx, node, ins):
    return [emit_einsum(ctx, ctx.attrs(node)["equation"], ins)]


@converter("Det", since=11)
def det(ctx, node, ins):
    dtype = np.dtype(ins[0].dtype)
    x = widen_half(ctx, ins[0])
    if np.dtype(x.dtype) not in (np.float32, np.float64):
        raise Unsupported(f"Det of {dtype.name} matrices")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise Unsupported(f"Det of shape {tuple(x.shape)} (needs square matrices in the last two dims)")
    return [narrow(ctx, ctx.emit1("Det", [x]), dtype)]
