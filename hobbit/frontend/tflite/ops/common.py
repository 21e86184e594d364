"""What several TFLite translations share: the fused activation as its own node, padding
and stride options, filters rearranged to TensorFlow's layouts (a transposed constant, else
a Transpose), reshapes, the optional bias, and a tensor's declared dims."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext


def activation(c: OpContext, x: TensorRef, code: int) -> TensorRef:
    """The fused activation `code` (ActivationFunctionType) applied to x, as its own node."""
    dtype = c.dtype(0)
    name = S.ACTIVATIONS[code] if 0 <= code < len(S.ACTIVATIONS) else f"ACTIVATION_{code}"
    if name == "NONE":
        return x
    if name == "RELU":
        return c.node("Relu", [x], T=dtype)
    if name == "RELU6":
        return c.node("Relu6", [x], T=dtype)
    if name == "TANH":
        return c.node("Tanh", [x], T=dtype)
    if name == "RELU_N1_TO_1":
        return clip(c, x, -1.0, 1.0)
    return c.node(f"TFLite:fused_activation:{name}", [x], tflite_operator=c.op.index)


def clip(c: OpContext, x: TensorRef, low: float, high: float) -> TensorRef:
    dtype = c.dtype(0)
    upper = c.node("Minimum", [x, c.const(high, dtype, "high")], T=dtype)
    return c.node("Maximum", [upper, c.const(low, dtype, "low")], T=dtype)


def padding(c: OpContext, field: int) -> str:
    code = c.enum_option(field)
    return S.PADDING[code] if 0 <= code < len(S.PADDING) else f"PADDING_{code}"


def strides(c: OpContext, h_field: int, w_field: int) -> list[int]:
    return [1, c.int_option(h_field), c.int_option(w_field), 1]


def rearranged(c: OpContext, i: int, perm: tuple[int, ...], suffix: str) -> TensorRef:
    """Input i transposed by `perm`: a transposed view of a constant, else a Transpose."""
    value = c.constant(i)
    if value is not None:
        return c.const(np.transpose(value, perm), value.dtype, suffix)
    return c.node("Transpose", [c.input(i), c.const(perm)], T=c.dtype(i), Tperm=np.dtype(np.int32))


def reshaped(c: OpContext, x: TensorRef, shape: list[int], dtype) -> TensorRef:
    return c.node("Reshape", [x, c.const(shape)], T=dtype, Tshape=np.dtype(np.int32))


def bias_add(c: OpContext, x: TensorRef, i: int) -> TensorRef:
    if not c.has_input(i):
        return x
    return c.node("BiasAdd", [x, c.input(i)], T=c.dtype(0), data_format="NHWC")


def declared_dims(c: OpContext, tensor) -> list[int] | None:
    """A tensor's dims with -1 for the unknown one, None when more than one is unknown."""
    if tensor.signature is None:
        return None
    dims = [-1 if d is None else d for d in tensor.signature]
    return dims if dims.count(-1) <= 1 else None
