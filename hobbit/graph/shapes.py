"""Shape helpers shared by op inference."""

from __future__ import annotations

from hobbit.errors import ShapeError


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of static shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
