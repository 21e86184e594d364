"""Converter for Det (float16/bfloat16 matrices are factorised in float32)."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.onnx.converters import converter
from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen_half


@converter("Det", since=11)
def det(ctx, node, ins):
    dtype = np.dtype(ins[0].dtype)
    x = widen_half(ctx, ins[0])
    if np.dtype(x.dtype) not in (np.float32, np.float64):
        raise Unsupported(f"Det of {dtype.name} matrices")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise Unsupported(f"Det of shape {tuple(x.shape)} (needs square matrices in the last two dims)")
    return [narrow(ctx, ctx.emit1("Det", [x]), dtype)]
