"""Converter for NonMaxSuppression (opset 10; opset 11 only clarified the corner order,
which onnxruntime and hobbit.ops.nms already accept either way).

How many boxes it selects depends on the data, so a model computing its inputs at run
time gets BoundedNonMaxSuppression, whose selected_indices is marked bounded along its
rows (hobbit.frontend.common.bounded); constant inputs fold to the exact selection."""

from __future__ import annotations

from hobbit.errors import Unsupported
from hobbit.frontend.common.bounded import mark_bounded, new_extent
from hobbit.frontend.onnx.converters import converter


@converter("NonMaxSuppression", since=10)
def non_max_suppression(ctx, node, ins):
    inputs = (list(ins) + [None] * 5)[:5]
    inputs.append(_box_count(inputs))
    for value in inputs[2:5]:
        if value is not None and value.bounded is not None:
            raise Unsupported(f"NonMaxSuppression of '{value.name}', which has a data-dependent dim")
    attrs = {"center_point_box": int(ctx.attrs(node).get("center_point_box", 0))}
    selected, extent = ctx.emit("BoundedNonMaxSuppression", inputs, attrs, n_outputs=2, marks_own=True)
    if selected.const is not None:
        return [ctx.const(selected.const[:int(extent.const)])]
    return [mark_bounded(selected, 0, new_extent(ctx, extent, 0, selected.shape[0]))]


def _box_count(inputs: list) -> object:
    """The run-time number of boxes when boxes and scores are bounded along N (a detector's
    candidates after its score filter and per-class TopK): the kernel ranks only those."""
    boxes, scores = inputs[:2]
    if boxes.bounded is None and scores.bounded is None:
        return None
    if boxes.bounded is None or scores.bounded is None or boxes.bounded.axis != 1 or scores.bounded.axis != 2 \
            or boxes.bounded.extent is not scores.bounded.extent:
        raise Unsupported("NonMaxSuppression with data-dependent dims other than one box count "
                          "shared by boxes and scores")
    return boxes.bounded.extent
