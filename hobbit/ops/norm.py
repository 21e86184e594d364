"""Normalisation ops: Softmax, LogSoftmax (over one non-negative `axis`) and
LayerNormalization (over dims [axis, rank), with Scale and optional B of
exactly the normalised shape; the converter broadcasts constant ones)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample


def axis_infer(node: Node) -> list[TensorType]:
    """Same type as the input, for ops along one (already normalised) `axis` attribute."""
    x = node.inputs[0]
    if not 0 <= node.attrs["axis"] < len(x.shape):
        raise ShapeError(f"{node.op} axis {node.attrs['axis']} does not fit rank {len(x.shape)}")
    return [x.type]


def _softmax_reference(log: bool):
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        x = ins[0]
        shifted = x.astype(np.float64) - np.max(x, axis=a["axis"], keepdims=True)
        total = np.sum(np.exp(shifted), axis=a["axis"], keepdims=True)
        y = shifted - np.log(total) if log else np.exp(shifted) / total
        return [y.astype(x.dtype)]
    return reference


for _name, _log in (("Softmax", False), ("LogSoftmax", True)):
    register_op(OpDef(
        _name, infer=axis_infer, reference=_softmax_reference(_log),
        attrs={"axis": 0}, per_sample=per_sample.axis_not_batch(), doc=f"{_name} over one axis, max-subtracted for stability"))


def _layernorm_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axis = node.attrs["axis"]
    if not 0 <= axis < len(x.shape):
        raise ShapeError(f"LayerNormalization axis {axis} does not fit rank {len(x.shape)}")
    normalised = tuple(x.shape[axis:])
    for v in node.inputs[1:]:
        if v is not None and tuple(v.shape) != normalised:
            raise ShapeError(f"LayerNormalization scale/bias {v.type} must have the normalised shape {normalised}")
    stats = TensorType(x.dtype, tuple(x.shape[:axis]) + (1,) * len(normalised))
    return [x.type, stats, stats]


def _layernorm_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x = ins[0]
    axes = tuple(range(a["axis"], x.ndim))
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    var = ((wide - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (wide - mean) / np.sqrt(var + a["epsilon"]) * ins[1]
    if len(ins) > 2 and ins[2] is not None:
        y = y + ins[2]
    inv_std = 1.0 / np.sqrt(var + a["epsilon"])
    return [y.astype(x.dtype), mean.astype(x.dtype), inv_std.astype(x.dtype)]


register_op(OpDef(
    "LayerNormalization", infer=_layernorm_infer, reference=_layernorm_reference,
    attrs={"axis": 0, "epsilon": 1e-5}, per_sample=per_sample.axis_not_batch(),
    doc="LayerNormalization over dims [axis, rank); inputs X, Scale[, B]; outputs Y[, Mean, InvStdDev] "
        "(the statistics keep the normalised dims as 1s)"))
