"""Converter for NonMaxSuppression (opset 10; opset 11 only clarified the corner order,
which onnxruntime and hobbit.ops.nms already accept either way).

How many boxes it selects depends on the data, so a model computing its inputs at run
time gets BoundedNonMaxSuppression, whose selected_indices is marked bounded along its
rows (hobbit.frontend.bounded); constant inputs fold to the exact selection."""

from __future__ import annotations

from hobbit.frontend.bounded import mark_bounded, new_extent
from hobbit.frontend.converters import converter
from hobbit.frontend.onnx_types import Unsupported


@converter("NonMaxSuppression", since=10)
def non_max_suppression(ctx, node, ins):
    inputs = (list(ins) + [None] * 5)[:5]
    for value in inputs:
        if value is not None and value.bounded is not None:
            raise Unsupported(f"NonMaxSuppression of '{value.name}', which has a data-dependent dim")
    attrs = {"center_point_box": int(ctx.attrs(node).get("center_point_box", 0))}
    selected, extent = ctx.emit("BoundedNonMaxSuppression", inputs, attrs, n_outputs=2)
    if selected.const is not None:
        return [ctx.const(selected.const[:int(extent.const)])]
    return [mark_bounded(selected, 0, new_extent(ctx, extent, 0, selected.shape[0]))]
