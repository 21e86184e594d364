"""How a model's flat native outputs make up the outputs run() returns.

Each `output_layout` entry is (name, kind): None for a tensor (one flat output), an int n
for a sequence (the next n flat outputs, returned as a list), or a BoundedOutput for a
tensor with a data-dependent dim (two flat outputs: the data in its bound shape and its
int64 extent; returned cut to the extent, hobbit.graph.ir.Bounded). The compile cache and
exported libraries store the layout as JSON, in `to_json`'s form."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import BoundedOutput

Kind = int | BoundedOutput | None
Layout = list[tuple[str, Kind]]


def width(kind: Kind) -> int:
    """How many flat outputs one entry takes."""
    if kind is None:
        return 1
    return 2 if isinstance(kind, BoundedOutput) else kind


def grouped_layout(layout: Layout | None) -> Layout | None:
    """The layout, kept only when some output is not a plain tensor (else None)."""
    return layout if layout is not None and any(kind is not None for _, kind in layout) else None


def per_output(outputs: list, layout: Layout | None) -> list[tuple[int, object]]:
    """For each output run() returns: its first flat output's position, and its spec when
    out= can take it (a plain tensor), else None."""
    if layout is None:
        return list(enumerate(outputs))
    found, position = [], 0
    for _, kind in layout:
        found.append((position, outputs[position] if kind is None else None))
        position += width(kind)
    return found


def group(flat: list[np.ndarray], layout: Layout) -> list:
    grouped, position = [], 0
    for _, kind in layout:
        if kind is None:
            grouped.append(flat[position])
        elif isinstance(kind, BoundedOutput):
            grouped.append(cut(flat[position], kind.axis, int(flat[position + 1])))
        else:
            grouped.append(flat[position:position + kind])
        position += width(kind)
    return grouped


def cut(data: np.ndarray, axis: int, extent: int) -> np.ndarray:
    """The valid part of a bounded output. The generated code cannot produce an extent past
    the bound (every Bounded op counts what it writes); the check guards a corrupt library."""
    if not 0 <= extent <= data.shape[axis]:
        raise ValueError(f"an extent of {extent} along dim {axis} of a bound of {data.shape[axis]}")
    return np.ascontiguousarray(data[(slice(None),) * axis + (slice(0, extent),)])


def to_json(layout: Layout) -> list:
    return [[name, {"bounded_axis": kind.axis} if isinstance(kind, BoundedOutput) else kind]
            for name, kind in layout]


def from_json(items: list) -> Layout:
    layout: Layout = []
    for name, kind in items:
        if isinstance(kind, dict):
            layout.append((str(name), BoundedOutput(int(kind["bounded_axis"]))))
        else:
            layout.append((str(name), None if kind is None else int(kind)))
    return layout
