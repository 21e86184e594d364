"""The plan of a BoundedNonMaxSuppression node (hobbit/backend/cpu/nms.py): its scratch.

Each (batch, class) pair is one piece of work. The pieces write their rows at their
own slot of the output (pair p at row p*K, K the per-class bound) and their counts to
a shared table; one pass then packs the slots together. A pair needs, in its thread's
region, the sort keys of its candidates (one u64 per box) and the chosen boxes'
corners and areas as five float32 columns, each padded to whole vectors so the IoU
test reads full vectors past the last chosen box."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.target import Target

LINE = 64
COLUMNS = 5  # x_min, x_max, y_min, y_max, area of the chosen boxes


def per_class_bound(node: Node) -> int:
    """K: the most boxes one (batch, class) can select, as the static shapes and a constant
    max_output_boxes_per_class allow (the op's bound shape is [B*C*K, 3])."""
    boxes = node.inputs[0].shape[1]
    limit = node.inputs[2] if len(node.inputs) > 2 else None
    if limit is None:
        return 0
    if limit.const is None:
        return boxes
    return min(boxes, max(int(np.asarray(limit.const).reshape(-1)[0]), 0))


def _lines(size: int) -> int:
    return -(-size // LINE) * LINE


@dataclass(frozen=True)
class NmsPlan:
    pairs: int     # batches * classes
    boxes: int     # N
    bound: int     # K: boxes one pair may select
    lanes: int     # float32 lanes of the IoU test
    threads: int   # thread regions

    @property
    def column(self) -> int:
        """Elements of one chosen-box column: K rounded up to whole vectors."""
        return -(-self.bound // self.lanes) * self.lanes

    @property
    def counts_bytes(self) -> int:
        return _lines(8 * self.pairs)

    @property
    def keys_bytes(self) -> int:
        return _lines(8 * self.boxes)

    @property
    def region_bytes(self) -> int:
        """One thread's keys and columns."""
        return self.keys_bytes + COLUMNS * _lines(4 * self.column)

    @property
    def scratch_bytes(self) -> int:
        return 0 if self.bound == 0 else self.counts_bytes + self.threads * self.region_bytes


def nms_plan(node: Node, target: Target, threads: int) -> NmsPlan:
    boxes, scores = node.inputs[:2]
    return NmsPlan(boxes.shape[0] * scores.shape[1], boxes.shape[1], per_class_bound(node), 2 * target.lanes(4),
                   threads)
