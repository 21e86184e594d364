"""Converter for Det."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.converters import converter
from hobbit.frontend.onnx import Unsupported


@converter("Det", since=11)
def det(ctx, node, ins):
    x = ins[0]
    if np.dtype(x.dtype) not in (np.float32, np.float64):
        raise Unsupported(f"Det of {np.dtype(x.dtype).name} matrices")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise Unsupported(f"Det of shape {tuple(x.shape)} (needs square matrices in the last two dims)")
    return [ctx.emit1("Det", [x])]
