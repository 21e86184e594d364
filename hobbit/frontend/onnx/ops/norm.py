"""Converters for Softmax, LogSoftmax, LayerNormalization, Hardmax, LpNormalization,
InstanceNormalization and the training form of BatchNormalization (its runtime-statistics
form, shared with TensorFlow, is hobbit.frontend.common.batchnorm). float16 tensors are
computed in float32 and cast back.

Before opset 13, Softmax/LogSoftmax coerce the input to 2-D at `axis`
(default 1) and normalise over everything from `axis` on; that is a reshape
(a view) around the one-axis graph op. From opset 13 they normalise over a
single axis (default -1)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.batchnorm import batchnorm_from_statistics, per_channel
from hobbit.frontend.common.half import narrow, widen
from hobbit.frontend.onnx.converters import converter
from hobbit.graph.shapes import normalize_axis



def _coerced(op: str):
    def convert(ctx, node, ins):
        x = widen(ctx, op, ins[0])
        rank = len(x.shape)
        if rank == 0:
            raise Unsupported(f"{op} of a scalar")
        axis = normalize_axis(int(ctx.attrs(node).get("axis", 1)), rank, f"{op} axis")
        if axis == rank - 1:
            return [narrow(ctx, ctx.emit1(op, [x], {"axis": axis}), ins[0].dtype)]
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = ctx.emit1("Reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))})
        y = ctx.emit1(op, [flat], {"axis": 1})
        return [narrow(ctx, ctx.emit1("Reshape", [y], {"shape": tuple(x.shape)}), ins[0].dtype)]
    return convert


def _single_axis(op: str):
    def convert(ctx, node, ins):
        x = widen(ctx, op, ins[0])
        if not x.shape:
            raise Unsupported(f"{op} of a scalar")
        axis = normalize_axis(int(ctx.attrs(node).get("axis", -1)), len(x.shape), f"{op} axis")
        return [narrow(ctx, ctx.emit1(op, [x], {"axis": axis}), ins[0].dtype)]
    return convert


for _op in ("Softmax", "LogSoftmax"):
    converter(_op, since=1)(_coerced(_op))
    converter(_op, since=13)(_single_axis(_op))


@converter("LayerNormalization", since=17)
def layernorm(ctx, node, ins):
    a = ctx.attrs(node)
    dtype = np.dtype(ins[0].dtype)
    x = widen(ctx, "LayerNormalization", ins[0])
    stats = any(name for name in node.output[1:])
    stash = np.dtype(np.float32) if int(a.get("stash_type", 1)) == 1 else None
    if stats and stash is None and dtype != x.dtype:
        raise Unsupported(f"Mean and InvStdDev outputs of a {dtype.name} LayerNormalization with stash_type "
                          f"{a.get('stash_type')}")
    if not x.shape:
        raise Unsupported("LayerNormalization of a scalar")
    axis = normalize_axis(int(a.get("axis", -1)), len(x.shape), "LayerNormalization axis")
    normalised = tuple(x.shape[axis:])
    params = []
    for v, what in ((ins[1], "Scale"), (ins[2] if len(ins) > 2 else None, "B")):
        if v is None:
            continue
        if v.dtype != dtype:
            raise Unsupported(f"{what} of dtype {np.dtype(v.dtype).name} with input {dtype.name}")
        v = widen(ctx, "LayerNormalization", v)
        if tuple(v.shape) != normalised:
            data = ctx.const_value(v, f"LayerNormalization {what} that needs broadcasting")
            try:
                v = ctx.const(np.ascontiguousarray(np.broadcast_to(data, normalised)))
            except ValueError:
                raise Unsupported(f"{what} of shape {tuple(v.shape)} does not broadcast to {normalised}") from None
        params.append(v)
    attrs = {"axis": axis, "epsilon": float(a.get("epsilon", 1e-5))}
    outs = ctx.emit("LayerNormalization", [x] + params, attrs, n_outputs=3 if stats else 1)
    return [narrow(ctx, outs[0], dtype)] + [narrow(ctx, v, stash or dtype) for v in outs[1:]]


def batchnorm_training(ctx, x, scale, bias, mean, var, epsilon: float, momentum: float) -> list:
    """Opset >= 14 training mode: normalise with the batch statistics (population variance)
    and return Y and the running mean/variance updated with `momentum`."""
    dtype = np.dtype(x.dtype)
    x, mean, var = (widen(ctx, "BatchNormalization", v) for v in (x, mean, var))
    rank = len(x.shape)
    axes = (0,) + tuple(range(2, rank))
    channels = (x.shape[1],)
    batch_mean = ctx.emit1("ReduceMean", [x], {"axes": axes, "keepdims": 1})
    deviation = ctx.emit1("Sub", [x, batch_mean])
    batch_var = ctx.emit1("ReduceMean", [ctx.emit1("Mul", [deviation, deviation])], {"axes": axes, "keepdims": 1})
    y = batchnorm_from_statistics(ctx, x, scale, bias, batch_mean, batch_var, epsilon)
    keep, take = ctx.const(momentum, x.dtype), ctx.const(1.0 - momentum, x.dtype)
    running = []
    for old, new in ((mean, batch_mean), (var, batch_var)):
        new = ctx.emit1("Reshape", [new], {"shape": channels})
        updated = ctx.emit1("Add", [ctx.emit1("Mul", [old, keep]), ctx.emit1("Mul", [new, take])])
        running.append(narrow(ctx, updated, dtype))
    return [narrow(ctx, y, dtype)] + running


def _hardmax(ctx, x, axis: int, dtype: np.dtype):
    """1 where the first maximum along `axis` lies: ArgMax compared with an index ramp."""
    peak = ctx.emit1("ArgMax", [x], {"axis": axis, "keepdims": 1, "select_last_index": 0})
    length = x.shape[axis]
    ramp = ctx.const(np.arange(length, dtype=np.int64).reshape((length,) + (1,) * (len(x.shape) - axis - 1)))
    return ctx.emit1("Cast", [ctx.emit1("Equal", [ramp, peak])], {"to": np.dtype(dtype).name})


@converter("Hardmax", since=1)
def hardmax_coerced(ctx, node, ins):
    """Before opset 13: over everything from `axis` on (the input seen as 2-D)."""
    x = widen(ctx, "Hardmax", ins[0])
    if not x.shape:
        raise Unsupported("Hardmax of a scalar")
    axis = normalize_axis(int(ctx.attrs(node).get("axis", 1)), len(x.shape), "Hardmax axis")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    flat = ctx.emit1("Reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))})
    return [ctx.emit1("Reshape", [_hardmax(ctx, flat, 1, ins[0].dtype)], {"shape": tuple(x.shape)})]


@converter("Hardmax", since=13)
def hardmax(ctx, node, ins):
    x = widen(ctx, "Hardmax", ins[0])
    if not x.shape:
        raise Unsupported("Hardmax of a scalar")
    axis = normalize_axis(int(ctx.attrs(node).get("axis", -1)), len(x.shape), "Hardmax axis")
    return [_hardmax(ctx, x, axis, ins[0].dtype)]


@converter("LpNormalization", since=1)
def lp_normalization(ctx, node, ins):
    """x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0."""
    a = ctx.attrs(node)
    x = widen(ctx, "LpNormalization", ins[0])
    if not x.shape:
        raise Unsupported("LpNormalization of a scalar")
    p = int(a.get("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization with p={p} (only 1 and 2 exist)")
    axis = normalize_axis(int(a.get("axis", -1)), len(x.shape), "LpNormalization axis")
    norm = ctx.emit1("ReduceL1" if p == 1 else "ReduceL2", [x], {"axes": (axis,), "keepdims": 1})
    zero = ctx.const(0, x.dtype)
    vanished = ctx.emit1("Equal", [norm, zero])  # an all-zero vector stays 0 rather than 0/0
    y = ctx.emit1("Where", [vanished, zero, ctx.emit1("Div", [x, norm])])
    return [narrow(ctx, y, ins[0].dtype)]


@converter("InstanceNormalization", since=1)
def instance_normalization(ctx, node, ins):
    """Per (sample, channel) statistics over the spatial dims: the LayerNormalization kernel on
    the [N, C, spatial] view with unit scale, then the per-channel scale and bias."""
    x, scale, bias = (widen(ctx, "InstanceNormalization", v) for v in ins[:3])
    rank = len(x.shape)
    if rank < 3:
        raise Unsupported(f"InstanceNormalization of a rank-{rank} input (needs N, C and spatial dims)")
    n, c = x.shape[:2]
    spatial = x.type.size // max(n * c, 1)
    view = ctx.emit1("Reshape", [x], {"shape": (n, c, spatial)})
    ones = ctx.const(np.ones(spatial, dtype=x.dtype))
    epsilon = float(ctx.attrs(node).get("epsilon", 1e-5))
    normal = ctx.emit1("LayerNormalization", [view, ones], {"axis": 2, "epsilon": epsilon})
    y = ctx.emit1("Reshape", [normal], {"shape": tuple(x.shape)})
    y = ctx.emit1("Mul", [y, per_channel(ctx, scale, rank)])
    return [narrow(ctx, ctx.emit1("Add", [y, per_channel(ctx, bias, rank)]), ins[0].dtype)]
