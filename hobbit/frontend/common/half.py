"""float16 and bfloat16 in converters: most ops compute them in float32 (as onnxruntime's
CPU kernels do) between a widening Cast and a narrowing one, so results round once."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import Unsupported

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _check_float(op: str, dtype: np.dtype) -> None:
    dtype = np.dtype(dtype)
    if not (dtype.kind == "f" and dtype.itemsize >= 4):
        raise Unsupported(f"{op} on {dtype.name} tensors")


def widen_half(ctx, x):
    """float16 and bfloat16 tensors are computed in float32 (as onnxruntime's CPU kernels do),
    so results round once, when `narrow` casts them back; other dtypes stay as they are."""
    return ctx.emit1("Cast", [x], {"to": "float32"}) if np.dtype(x.dtype) in _HALF else x


def widen(ctx, op: str, x):
    """`widen_half` for ops that take only float32/float64 otherwise."""
    x = widen_half(ctx, x)
    _check_float(op, x.dtype)
    return x


def narrow(ctx, y, dtype: np.dtype):
    """Back to the model's dtype after `widen`."""
    return y if np.dtype(y.dtype) == np.dtype(dtype) else ctx.emit1("Cast", [y], {"to": np.dtype(dtype).name})
