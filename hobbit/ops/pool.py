"""2-D pooling ops (NCHW): MaxPool and AveragePool.

Canonical attributes: kernel_shape (kh, kw), strides, dilations, explicit pads
(top, left, bottom, right), ceil_mode, and for AveragePool count_include_pad
(padding counts only within the explicit pads, never in the ceil_mode
overhang). Global pools and 1-D pools are expressed with these or with
reductions by the converters."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample
from hobbit.graph.shapes import Window, pool_out_size


def _out_hw(shape: tuple[int, ...], a: dict) -> tuple[int, int]:
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    ceil = bool(a["ceil_mode"])
    return (pool_out_size(shape[2], kh, sh, dh, pt, pb, ceil), pool_out_size(shape[3], kw, sw, dw, pl, pr, ceil))


def _infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    if len(x.shape) != 4:
        raise ShapeError(f"{node.op} expects a 4-D NCHW input, got {x.type}")
    oh, ow = _out_hw(tuple(x.shape), node.attrs)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"{node.op} output would be empty ({oh}x{ow}) for input {x.type}")
    return [TensorType(x.dtype, (x.shape[0], x.shape[1], oh, ow))]


def _windows(node: Node) -> dict[int, Window]:
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["kernel_shape"], a["strides"], a["dilations"], a["pads"]
    ceil = bool(a["ceil_mode"])
    return {2: Window(kh, sh, dh, pt, pb, ceil), 3: Window(kw, sw, dw, pl, pr, ceil)}


def _taps(out: int, size: int, k: int, stride: int, dilation: int, pad_begin: int) -> np.ndarray:
    """Input positions read by each window: shape (out, k), possibly outside [0, size)."""
    return np.arange(out)[:, None] * stride - pad_begin + np.arange(k)[None, :] * dilation


def _reference(op: str):
    def reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
        x = ins[0]
        _, _, h, w = x.shape
        oh, ow = _out_hw(x.shape, a)
        (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
        pt, pl, pb, pr = a["pads"]
        rows, cols = _taps(oh, h, kh, sh, dh, pt), _taps(ow, w, kw, sw, dw, pl)
        row_ok, col_ok = (rows >= 0) & (rows < h), (cols >= 0) & (cols < w)
        patches = x[:, :, np.clip(rows, 0, h - 1)[:, :, None, None], np.clip(cols, 0, w - 1)[None, None]]
        mask = row_ok[:, :, None, None] & col_ok[None, None]  # (oh, kh, ow, kw)
        if op == "MaxPool":
            low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
            return [np.where(mask, patches, low).max(axis=(3, 5)).astype(x.dtype)]
        total = np.where(mask, patches.astype(np.float64), 0.0).sum(axis=(3, 5))
        if a["count_include_pad"]:
            count = (rows < h + pb).sum(1)[:, None] * (cols < w + pr).sum(1)[None, :]
        else:
            count = row_ok.sum(1)[:, None] * col_ok.sum(1)[None, :]
        return [(total / count).astype(x.dtype)]
    return reference


_COMMON = {"kernel_shape": (1, 1), "strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "ceil_mode": 0}

register_op(OpDef(
    "MaxPool", infer=_infer, reference=_reference("MaxPool"), attrs=dict(_COMMON),
    per_sample=per_sample.first_input, windows=_windows,
    doc="2-D max pooling, NCHW, explicit pads (top, left, bottom, right); padding never wins"))

register_op(OpDef(
    "AveragePool", infer=_infer, reference=_reference("AveragePool"),
    attrs={**_COMMON, "count_include_pad": 0}, per_sample=per_sample.first_input, windows=_windows,
    doc="2-D average pooling, NCHW; count_include_pad counts explicit pads, not the ceil_mode overhang"))
