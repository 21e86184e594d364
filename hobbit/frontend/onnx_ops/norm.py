"""Converters for Softmax, LogSoftmax and LayerNormalization.

Before opset 13, Softmax/LogSoftmax coerce the input to 2-D at `axis`
(default 1) and normalise over everything from `axis` on; that is a reshape
(a view) around the one-axis graph op. From opset 13 they normalise over a
single axis (default -1)."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.converters import converter
from hobbit.frontend.onnx import Unsupported
from hobbit.graph.shapes import normalize_axis


def _check_float(op: str, dtype: np.dtype) -> None:
    dtype = np.dtype(dtype)
    if not (dtype.kind == "f" and dtype.itemsize >= 4):
        raise Unsupported(f"{op} on {dtype.name} tensors")


def _coerced(op: str):
    def convert(ctx, node, ins):
        x = ins[0]
        _check_float(op, x.dtype)
        rank = len(x.shape)
        if rank == 0:
            raise Unsupported(f"{op} of a scalar")
        axis = normalize_axis(int(ctx.attrs(node).get("axis", 1)), rank, f"{op} axis")
        if axis == rank - 1:
            return [ctx.emit1(op, [x], {"axis": axis})]
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = ctx.emit1("Reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))})
        y = ctx.emit1(op, [flat], {"axis": 1})
        return [ctx.emit1("Reshape", [y], {"shape": tuple(x.shape)})]
    return convert


def _single_axis(op: str):
    def convert(ctx, node, ins):
        x = ins[0]
        _check_float(op, x.dtype)
        if not x.shape:
            raise Unsupported(f"{op} of a scalar")
        axis = normalize_axis(int(ctx.attrs(node).get("axis", -1)), len(x.shape), f"{op} axis")
        return [ctx.emit1(op, [x], {"axis": axis})]
    return convert


for _op in ("Softmax", "LogSoftmax"):
    converter(_op, since=1)(_coerced(_op))
    converter(_op, since=13)(_single_axis(_op))


@converter("LayerNormalization", since=17)
def layernorm(ctx, node, ins):
    a = ctx.attrs(node)
    x = ins[0]
    _check_float("LayerNormalization", x.dtype)
    if any(name for name in node.output[1:]):
        raise Unsupported("the Mean and InvStdDev outputs of LayerNormalization")
    if not x.shape:
        raise Unsupported("LayerNormalization of a scalar")
    axis = normalize_axis(int(a.get("axis", -1)), len(x.shape), "LayerNormalization axis")
    normalised = tuple(x.shape[axis:])
    params = []
    for v, what in ((ins[1], "Scale"), (ins[2] if len(ins) > 2 else None, "B")):
        if v is None:
            continue
        if v.dtype != x.dtype:
            raise Unsupported(f"{what} of dtype {np.dtype(v.dtype).name} with input {np.dtype(x.dtype).name}")
        if tuple(v.shape) != normalised:
            data = ctx.const_value(v, f"LayerNormalization {what} that needs broadcasting")
            try:
                v = ctx.const(np.ascontiguousarray(np.broadcast_to(data, normalised)))
            except ValueError:
                raise Unsupported(f"{what} of shape {tuple(v.shape)} does not broadcast to {normalised}") from None
        params.append(v)
    return [ctx.emit1("LayerNormalization", [x] + params, {"axis": axis, "epsilon": float(a.get("epsilon", 1e-5))})]
