"""BoundedNonMaxSuppression: ONNX NonMaxSuppression (opset 10/11) as a bounded op.

How many boxes survive depends on the data, so the op has a static bound shape and
returns the run-time count as its last output (the extent): selected_indices is
int64 [B*C*K, 3], with K = min(N, max_output_boxes_per_class) when that input is a
constant and N when it is read at run time; only rows [0, extent) hold selections.

The semantics are onnxruntime's, which the ONNX text leaves open in places:
- per (batch, class), the candidates are the boxes with score strictly greater than
  score_threshold (every box when it is absent), taken in descending score order,
  equal scores in ascending box index;
- a candidate is dropped when its IoU with an already selected box of that class is
  greater than iou_threshold (0 when absent; outside [0, 1] is an error), IoU in
  float32 with onnxruntime's order of operations and degenerate-box rules;
- at most max_output_boxes_per_class are selected per class; an absent or
  non-positive value selects nothing;
- rows are ordered by batch, then class, then selection order.
Boxes are [y1, x1, y2, x2] with either corner first (center_point_box 0) or
[x_center, y_center, width, height] (center_point_box 1). A NaN score is never
selected (onnxruntime's order for NaN scores is that of its heap, i.e. arbitrary)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.registry import OpDef, register_op
from hobbit.plan.nms import per_class_bound

INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)
MAX_BOXES = 1 << 31  # box indices travel in the low 32 bits of the kernel's sort keys


def _scalar(value: Value | None, kinds: str, what: str) -> None:
    if value is not None and (value.type.size != 1 or np.dtype(value.dtype).kind not in kinds):
        raise ShapeError(f"NonMaxSuppression {what} must be a one-element tensor, got {value.type}")


def _infer(node: Node) -> list[TensorType]:
    boxes, scores = node.inputs[:2]
    optional = list(node.inputs[2:]) + [None] * (6 - len(node.inputs))
    if len(boxes.shape) != 3 or boxes.shape[2] != 4 or len(scores.shape) != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1] \
            or np.dtype(boxes.dtype) != FLOAT32 or np.dtype(scores.dtype) != FLOAT32:
        raise ShapeError(f"NonMaxSuppression needs float32 boxes [B, N, 4] and scores [B, C, N], "
                         f"got {boxes.type}, {scores.type}")
    if boxes.shape[1] >= MAX_BOXES:
        raise ShapeError(f"NonMaxSuppression of {boxes.shape[1]} boxes: at most {MAX_BOXES - 1} are supported")
    if node.attrs["center_point_box"] not in (0, 1):
        raise ShapeError(f"NonMaxSuppression center_point_box must be 0 or 1, got {node.attrs['center_point_box']}")
    _scalar(optional[0], "iu", "max_output_boxes_per_class")
    _scalar(optional[1], "f", "iou_threshold")
    _scalar(optional[2], "f", "score_threshold")
    _scalar(optional[3], "i", "box count")
    rows = boxes.shape[0] * scores.shape[1] * per_class_bound(node)
    return [TensorType(INT64, (rows, 3)), TensorType(INT64, ())]


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(x_min, x_max, y_min, y_max, area) of every box, in float32 as onnxruntime computes them."""
    if center_point_box:
        half_w, half_h = boxes[:, 2] / np.float32(2), boxes[:, 3] / np.float32(2)
        x_min, x_max = boxes[:, 0] - half_w, boxes[:, 0] + half_w
        y_min, y_max = boxes[:, 1] - half_h, boxes[:, 1] + half_h
    else:
        # MaxMin(lhs, rhs): lhs >= rhs puts rhs at the minimum (NaNs go to the maximum's side).
        x_first = boxes[:, 1] >= boxes[:, 3]
        x_min, x_max = np.where(x_first, boxes[:, 3], boxes[:, 1]), np.where(x_first, boxes[:, 1], boxes[:, 3])
        y_first = boxes[:, 0] >= boxes[:, 2]
        y_min, y_max = np.where(y_first, boxes[:, 2], boxes[:, 0]), np.where(y_first, boxes[:, 0], boxes[:, 2])
    return x_min, x_max, y_min, y_max, (x_max - x_min) * (y_max - y_min)


def suppressed_by(candidate: tuple[np.float32, ...], chosen: tuple[np.ndarray, ...],
                  iou_threshold: np.float32) -> np.ndarray:
    """Per chosen box: whether it suppresses the candidate (onnxruntime's SuppressByIOU with
    the candidate as the first box). Every early 'not suppressed' there is a comparison that
    fails on NaN, so it is `not (a <= b)` here."""
    cx0, cx1, cy0, cy1, c_area = candidate
    sx0, sx1, sy0, sy1, s_area = chosen
    with np.errstate(all="ignore"):
        ix0, ix1 = np.where(cx0 < sx0, sx0, cx0), np.where(sx1 < cx1, sx1, cx1)  # std::max, std::min
        iy0, iy1 = np.where(cy0 < sy0, sy0, cy0), np.where(sy1 < cy1, sy1, cy1)
        inter = (ix1 - ix0) * (iy1 - iy0)
        union = (c_area + s_area) - inter
        iou = inter / union
    keep = ~(ix1 <= ix0) & ~(iy1 <= iy0) & ~(inter <= 0) & ~(c_area <= 0) & ~(s_area <= 0) & ~(union <= 0)
    return keep & (iou > iou_threshold)


def check_iou_threshold(value: float) -> None:
    if not 0 <= value <= 1:
        raise ShapeError(f"NonMaxSuppression iou_threshold {value} is outside [0, 1]")


def _reference(ins: list[np.ndarray | None], a: dict) -> list[np.ndarray]:
    boxes, scores = (np.asarray(v, FLOAT32) for v in ins[:2])
    limit, iou, score, valid = (list(ins[2:]) + [None] * 4)[:4]
    n = boxes.shape[1]
    if valid is not None:  # boxes bounded along dim 1: only the first `valid` are candidates
        scores = scores[:, :, :int(valid)]
    # The bound as infer gives it for a constant limit: the reference only runs on constants
    # (folding), and tests of run-time limits compare rows [0, extent).
    most = 0 if limit is None else min(n, max(int(np.asarray(limit).reshape(-1)[0]), 0))
    iou_threshold = np.float32(0 if iou is None else np.asarray(iou).reshape(-1)[0])
    check_iou_threshold(float(iou_threshold))
    rows = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], a["center_point_box"])
        for c in range(scores.shape[1]):
            s = scores[b, c]
            keep = ~np.isnan(s) if score is None else s > np.float32(np.asarray(score).reshape(-1)[0])
            candidates = np.flatnonzero(keep)
            order = candidates[np.lexsort((candidates, -s[candidates]))]  # equal scores: lower index first
            chosen: list[int] = []
            picked = tuple(np.empty(most, FLOAT32) for _ in corners)  # the chosen boxes' corners, in order
            for i in order:
                if len(chosen) == most:
                    break
                candidate = tuple(part[i] for part in corners)
                if not suppressed_by(candidate, tuple(p[:len(chosen)] for p in picked), iou_threshold).any():
                    for p, v in zip(picked, candidate):
                        p[len(chosen)] = v
                    chosen.append(int(i))
            rows += [(b, c, i) for i in chosen]
    selected = np.zeros((boxes.shape[0] * scores.shape[1] * most, 3), INT64)
    selected[:len(rows)] = np.asarray(rows, INT64).reshape(-1, 3)
    return [selected, np.asarray(len(rows), INT64)]


register_op(OpDef(
    "BoundedNonMaxSuppression", infer=_infer, reference=_reference, attrs={"center_point_box": 0},
    checks_data=True,
    doc="ONNX NonMaxSuppression with a static bound: selected [batch, class, box] rows padded to "
        "B*C*min(N, max_output_boxes_per_class), then the number of rows selected; an optional "
        "sixth input is the number of valid boxes when boxes and scores are bounded along N"))
