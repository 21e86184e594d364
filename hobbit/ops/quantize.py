"""Linear (de)quantization as element-wise ops.

QuantizeLinear(x, scale, zero_point) = saturate(round_half_even(x / scale) + zero_point)
in the integer dtype `to`; DequantizeLinear(x, scale, zero_point) = (x - zero_point) *
scale in scale's float dtype. scale and zero_point broadcast into x's shape, so the
converters express per-axis and blocked quantization by reshaping them (and, for
blocks, x). Both take exactly three inputs, so fusion never turns them into epilogue
steps; they can still be producers with fused epilogues."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.graph.shapes import broadcast


def _check_shapes(node: Node) -> tuple[int, ...]:
    x, scale, zero = node.inputs
    shape = tuple(x.shape)
    if broadcast(shape, tuple(scale.shape), tuple(zero.shape)) != shape:
        raise ShapeError(f"{node.op} scale {scale.type} / zero point {zero.type} do not broadcast into {x.type}")
    return shape


def _quantize_infer(node: Node) -> list[TensorType]:
    x, scale, zero = node.inputs
    to = np.dtype(node.attrs["to"])
    if x.dtype != scale.dtype or x.dtype.kind != "f" or zero.dtype != to or to.kind not in "iu":
        raise ShapeError(f"QuantizeLinear of {x.type} by {scale.type} to {to.name} with zero point {zero.type}")
    return [TensorType(to, _check_shapes(node))]


def _quantize_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, scale, zero = ins
    info = np.iinfo(np.dtype(a["to"]))
    q = np.rint(x / scale) + zero.astype(np.float64)
    return [np.clip(np.nan_to_num(q, nan=0.0), info.min, info.max).astype(a["to"])]


register_op(OpDef(
    "QuantizeLinear", infer=_quantize_infer, reference=_quantize_reference,
    kind="elementwise", attrs={"to": "uint8"},
    doc="saturate(round_half_even(x / scale) + zero_point) as integer dtype `to`; inputs x, scale, "
        "zero_point (zero_point has dtype `to`; scale and zero_point broadcast into x)"))


def _dequantize_infer(node: Node) -> list[TensorType]:
    x, scale, zero = node.inputs
    to = np.dtype(node.attrs["to"])
    if x.dtype.kind not in "iu" or zero.dtype != x.dtype or scale.dtype != to or to.kind != "f":
        raise ShapeError(f"DequantizeLinear of {x.type} with scale {scale.type} and zero point {zero.type} "
                         f"to {to.name}")
    return [TensorType(to, _check_shapes(node))]


def _dequantize_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, scale, zero = ins
    return [((x.astype(np.int64) - zero.astype(np.int64)).astype(a["to"]) * scale).astype(a["to"])]


register_op(OpDef(
    "DequantizeLinear", infer=_dequantize_infer, reference=_dequantize_reference,
    kind="elementwise", attrs={"to": "float32"}, fold_at_import=False,
    doc="(x - zero_point) * scale in float dtype `to` (scale's dtype); inputs x, scale, zero_point "
        "(same integer dtype as x; scale and zero_point broadcast into x)"))
