"""Converters for the ReduceX family.

ONNX moved `axes` from an attribute to an optional input (ReduceSum at opset
13, the others at 18) and added noop_with_empty_axes with it; both forms become
one graph op with sorted non-negative axes."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.onnx.converters import converter
from hobbit.graph.shapes import normalize_axis


_INTEGER_OK = ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1")
_FLOAT_ONLY = ("ReduceMean", "ReduceL2", "ReduceLogSum")


def _check_dtype(op: str, dtype: np.dtype) -> None:
    """Floats of 32/64 bits for every reducer; integers where no float step (mean, sqrt, log) is involved."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize >= 4:
        return
    if dtype.kind in "iu" and op in _INTEGER_OK:
        return
    raise Unsupported(f"{op} on {dtype.name} tensors")


def _axes(ctx, node, ins, op: str, axes_from_input: bool) -> tuple[int, ...]:
    """Sorted non-negative axes; () when noop_with_empty_axes asks for no reduction."""
    rank = len(ins[0].shape)
    if axes_from_input:
        given = ins[1] if len(ins) > 1 else None
        axes = [] if given is None else [int(v) for v in ctx.const_value(given, f"{op} axes").reshape(-1)]
        noop = int(ctx.attrs(node).get("noop_with_empty_axes", 0))
    else:
        axes, noop = [int(v) for v in ctx.attrs(node).get("axes", [])], 0
    if not axes:
        return () if noop else tuple(range(rank))
    canonical = tuple(sorted(normalize_axis(v, rank, f"{op} axis") for v in axes))
    if len(set(canonical)) != len(canonical):
        raise Unsupported(f"{op} axes {axes} repeat a dimension")
    return canonical


def _convert(op: str, axes_from_input: bool):
    def convert(ctx, node, ins):
        x = widen_half(ctx, ins[0])
        if np.dtype(x.dtype) == np.bool_ and op in ("ReduceMax", "ReduceMin"):
            x = ctx.emit1("Cast", [x], {"to": "uint8"})  # any / all: max / min of the 0/1 bytes
        _check_dtype(op, x.dtype)
        attrs = {"axes": _axes(ctx, node, ins, op, axes_from_input), "keepdims": int(ctx.attrs(node).get("keepdims", 1))}
        return [narrow(ctx, ctx.emit1(op, [x], attrs), ins[0].dtype)]
    return convert


def _log_sum_exp(axes_from_input: bool):
    """max + log(sum(exp(x - max))): the stable form, from existing ops. The max is clipped
    to the finite range so that a row holding an infinity gives that infinity (as in
    onnxruntime), not inf - inf = NaN."""
    def convert(ctx, node, ins):
        x = widen_half(ctx, ins[0])
        _check_dtype("ReduceLogSumExp", x.dtype)
        axes = _axes(ctx, node, ins, "ReduceLogSumExp", axes_from_input)
        keepdims = int(ctx.attrs(node).get("keepdims", 1))
        peak = ctx.emit1("ReduceMax", [x], {"axes": axes, "keepdims": 1})
        largest = float(ml_dtypes.finfo(x.dtype).max)
        peak = ctx.emit1("Clip", [peak], {"min": -largest, "max": largest})
        shifted = ctx.emit1("Exp", [ctx.emit1("Sub", [x, peak])])
        total = ctx.emit1("Log", [ctx.emit1("ReduceSum", [shifted], {"axes": axes, "keepdims": keepdims})])
        if not keepdims:
            peak = ctx.emit1("Reshape", [peak], {"shape": tuple(total.shape)})
        return [narrow(ctx, ctx.emit1("Add", [total, peak]), ins[0].dtype)]
    return convert


converter("ReduceLogSumExp", since=1)(_log_sum_exp(axes_from_input=False))
converter("ReduceLogSumExp", since=18)(_log_sum_exp(axes_from_input=True))
for _op in _INTEGER_OK + _FLOAT_ONLY:
    converter(_op, since=1)(_convert(_op, axes_from_input=False))
    converter(_op, since=13 if _op == "ReduceSum" else 18)(_convert(_op, axes_from_input=True))


def _arg(op: str):
    def convert(ctx, node, ins):
        a = ctx.attrs(node)
        x = ins[0]
        dtype = np.dtype(x.dtype)
        if dtype.kind not in "fiu" and dtype != np.dtype(ml_dtypes.bfloat16):
            raise Unsupported(f"{op} on {np.dtype(x.dtype).name} tensors")
        if not x.shape:
            raise Unsupported(f"{op} of a scalar")
        axis = normalize_axis(int(a.get("axis", 0)), len(x.shape), f"{op} axis")
        return [ctx.emit1(op, [x], {"axis": axis, "keepdims": int(a.get("keepdims", 1)),
                                    "select_last_index": int(a.get("select_last_index", 0))})]
    return convert


for _op in ("ArgMax", "ArgMin"):
    converter(_op, since=1)(_arg(_op))
