"""Reading what a TensorFlow op takes as data but hobbit needs at compile time: axes,
shapes, paddings and sizes arrive as tensor inputs (usually Const nodes, or shape
arithmetic the importer has folded); and the few graph ops several converters emit the
same way (reshape, cast, sliced, padded), each skipped when it would change nothing."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported


def const_ints(ctx, value, what: str) -> list[int]:
    """The integer values of an input that must be known at compile time, flattened."""
    data = ctx.const_value(value, what)
    if np.dtype(data.dtype).kind not in "iu":
        raise Unsupported(f"{what} must be integers, got {np.dtype(data.dtype).name}")
    return [int(v) for v in np.asarray(data).reshape(-1)]


def const_int(ctx, value, what: str) -> int:
    values = const_ints(ctx, value, what)
    if len(values) != 1:
        raise Unsupported(f"{what} must be a single integer, got {values}")
    return values[0]


def axis(index: int, rank: int, what: str = "axis") -> int:
    """A TensorFlow axis (negative counts from the end) as a non-negative one."""
    if not -rank <= index < max(rank, 1):
        raise Unsupported(f"{what} {index} is out of range for a rank-{rank} tensor")
    return index + rank if index < 0 else index


def reshape(ctx, x, shape: tuple[int, ...]):
    shape = tuple(int(d) for d in shape)
    return x if tuple(x.shape) == shape else ctx.emit1("Reshape", [x], {"shape": shape})


def cast(ctx, x, dtype) -> object:
    dtype = np.dtype(dtype)
    return x if np.dtype(x.dtype) == dtype else ctx.emit1("Cast", [x], {"to": dtype.name})


def sliced(ctx, x, starts: list[int], steps: list[int], sizes: list[int]):
    """x[starts : starts + sizes*steps : steps] per dim, or x itself when that is all of it."""
    if steps == [1] * len(steps) and starts == [0] * len(starts) and tuple(sizes) == tuple(x.shape):
        return x
    return ctx.emit1("Slice", [x], {"starts": tuple(starts), "steps": tuple(steps), "sizes": tuple(sizes)})


def padded(ctx, x, pairs, mode: str = "constant", value: float = 0.0):
    """x padded by (before, after) per dim, or x itself when every pair is (0, 0)."""
    if all(p == (0, 0) for p in pairs):
        return x
    pads = tuple(b for b, _ in pairs) + tuple(e for _, e in pairs)
    return ctx.emit1("Pad", [x], {"pads": pads, "mode": mode, "value": value})
