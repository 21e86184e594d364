"""QRequantize: a quantized tensor moved to another scale and zero point, the part of a
quantized Concat (hobbit/passes/int8.py) whose input's parameters differ from the output's.

It runs as an element-wise kernel, bytes in and bytes out, and writes straight into its slice
of the Concat when the Concat is in place (hobbit/passes/concat.py). The arithmetic is the
DequantizeLinear -> QuantizeLinear pair's in float32, (x - x_zero) * x_scale, divided by
y_scale, rounded half to even, plus y_zero, clamped: onnxruntime's QLinearConcat looks the
result up in a table it builds with those same operations, so the two agree bit for bit.
Folding x_scale / y_scale into one multiplier would be a multiply cheaper, but moves values
within an ulp of a rounding tie to the other side."""

from __future__ import annotations

import numpy as np

from hobbit.lower.elementwise import lower_elementwise
from hobbit.lower.kernels import CPU
from hobbit.lower.scalar import Emit


def _qrequantize_scalar(e: Emit, args: list, a: dict):
    f = Emit(e.kb, np.dtype(np.float32), e.width)
    wide = Emit(e.kb, np.dtype(np.int32), e.width)
    centred = wide.sub(e.convert(args[0], np.int32), wide.c(a["x_zero"]))
    real = f.mul(wide.convert(centred, np.float32), f.c(a["x_scale"]))
    q = f.add(f.round_even(f.div(real, f.c(a["y_scale"]))), f.c(a["y_zero"]))
    return f.convert(f.clamp(q, a["lo"], a["hi"]), np.dtype(a["to"]))


CPU.register("QRequantize", lower=lower_elementwise, scalar=_qrequantize_scalar)
