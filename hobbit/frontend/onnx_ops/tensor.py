"""Converters for shape and data-movement ONNX ops."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from hobbit.frontend.converters import converter
from hobbit.frontend.onnx import Unsupported


@converter("Constant", since=1)
def constant(ctx, node, ins):
    a = ctx.attrs(node)
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if key in a:
            value = a[key]
            dtype = np.float32 if "float" in key else (np.int64 if "int" in key else None)
            return [ctx.const(np.asarray(value, dtype=dtype))]
    raise Unsupported(f"Constant with attributes {sorted(a)}")


@converter("Shape", since=1)
def shape(ctx, node, ins):
    a = ctx.attrs(node)
    dims = np.array(ins[0].shape, dtype=np.int64)
    start, end = a.get("start", 0), a.get("end", len(dims))
    return [ctx.const(dims[start:end])]


@converter("Reshape", since=5)
def reshape(ctx, node, ins):
    x = ins[0]
    target = [int(d) for d in ctx.const_value(ins[1], "Reshape shape")]
    allowzero = ctx.attrs(node).get("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        out.append(x.shape[i] if d == 0 and not allowzero else d)
    if out.count(-1) > 1:
        raise Unsupported(f"Reshape shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = x.type.size // known if known else 0
    return [ctx.emit1("Reshape", [x], {"shape": tuple(out)})]


@converter("Flatten", since=1)
def flatten(ctx, node, ins):
    x = ins[0]
    axis = ctx.attrs(node).get("axis", 1) % (len(x.shape) + 1) if x.shape else 0
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [ctx.emit1("Reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))})]
