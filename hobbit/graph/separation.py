"""The answer of the batch-separability analysis (hobbit.ops.separable), kept apart from it:
a SpecializingModel holds one, and a worker that unpickles the model reads it without
importing the op registry the analysis needs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Separation:
    """`rows`: per graph output, rows per sample (None when not separable, see `reason`)."""

    rows: tuple[int, ...] | None
    reason: str = ""

    @property
    def separable(self) -> bool:
        return self.rows is not None
