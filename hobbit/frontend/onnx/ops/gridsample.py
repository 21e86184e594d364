"""Converter for GridSample (opset 16 mode names bilinear/bicubic, opset 20 linear/cubic)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.onnx.converters import converter

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}


@converter("GridSample", since=16)
def grid_sample(ctx, node, ins):
    a = ctx.attrs(node)
    x, grid = ins
    mode = _MODES.get(a.get("mode", "bilinear"))
    padding = a.get("padding_mode", "zeros")
    if mode is None:
        raise Unsupported(f"mode={a.get('mode')!r}")
    if padding not in ("zeros", "border", "reflection"):
        raise Unsupported(f"padding_mode={padding!r}")
    rank = len(x.shape) - 2
    if rank not in (2, 3) or (mode == "cubic" and rank != 2):
        raise Unsupported(f"{mode} GridSample of a rank-{len(x.shape)} input")
    if np.dtype(x.dtype).kind != "f" or np.dtype(grid.dtype).kind != "f":
        raise Unsupported(f"GridSample of {np.dtype(x.dtype).name} data with a {np.dtype(grid.dtype).name} grid")
    return [ctx.emit1("GridSample", [x, grid], {"mode": mode, "padding_mode": padding,
                                                "align_corners": int(a.get("align_corners", 0))})]
