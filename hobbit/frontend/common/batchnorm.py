"""Batch normalisation with per-channel parameters known only at run time, as graph ops:
ONNX's BatchNormalization in its runtime-statistics and training forms, and TensorFlow's
FusedBatchNorm. (Constant parameters fold into the preceding convolution later, in
hobbit.passes.batchnorm.) float16/bfloat16 inputs are computed in float32."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.common.half import narrow, widen


def per_channel(ctx, v, rank: int):
    """A per-channel parameter ([C] or [1, C, 1, ...]) as [C, 1, ...], which broadcasts over NC..."""
    channels = v.type.size
    return ctx.emit1("Reshape", [v], {"shape": (channels,) + (1,) * (rank - 2)})


def batchnorm_from_statistics(ctx, x, scale, bias, mean, var, epsilon: float):
    """(x - mean) * scale / sqrt(var + epsilon) + bias with per-channel runtime parameters."""
    dtype = np.dtype(x.dtype)
    x, scale, bias, mean, var = (widen(ctx, "BatchNormalization", v) for v in (x, scale, bias, mean, var))
    rank = len(x.shape)
    scale, bias, mean, var = (per_channel(ctx, v, rank) for v in (scale, bias, mean, var))
    std = ctx.emit1("Sqrt", [ctx.emit1("Add", [var, ctx.const(epsilon, x.dtype)])])
    y = ctx.emit1("Mul", [ctx.emit1("Sub", [x, mean]), ctx.emit1("Div", [scale, std])])
    return narrow(ctx, ctx.emit1("Add", [y, bias]), dtype)
