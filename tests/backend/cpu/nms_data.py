"""Detection-like inputs for the NonMaxSuppression tests (tests/backend/cpu, tests/frontend)."""

from __future__ import annotations

import numpy as np


def detections(rng: np.random.Generator, batches: int, classes: int, n: int,
               center_point_box: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of detection sizes on a 600x600 image, a tenth with their corners swapped (or a
    negative width), some exact duplicates; scores on a 0.01 grid, so many tie."""
    centre = rng.uniform(0, 600, (batches, n, 2))
    size = rng.uniform(4, 80, (batches, n, 2))
    if center_point_box:
        boxes = np.concatenate([centre, size], axis=-1)
        boxes[..., 2] *= np.where(rng.random((batches, n)) < 0.02, -1, 1)
    else:
        lo, hi = centre - size / 2, centre + size / 2
        boxes = np.concatenate([lo[..., ::-1], hi[..., ::-1]], axis=-1)  # [y1, x1, y2, x2]
        flip = rng.random((batches, n)) < 0.1
        boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    boxes[:, 1::17] = boxes[:, 0:1]  # duplicates of box 0
    scores = np.round(rng.random((batches, classes, n)), 2)
    return boxes.astype(np.float32), scores.astype(np.float32)
