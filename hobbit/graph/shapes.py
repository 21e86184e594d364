"""Shape helpers shared by op inference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major element strides of a contiguous tensor."""
    return [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]


def conv_out_size(size: int, k: int, stride: int, dilation: int, pad_total: int) -> int:
    """Output length of a convolution window sliding over `size` padded by `pad_total`."""
    return (size + pad_total - dilation * (k - 1) - 1) // stride + 1


@dataclass(frozen=True)
class Window:
    """A window sliding along one axis (a conv's or a pool's): its output length is
    pool_out_size of the input's. Run-time dims use it to carry a window's floor division
    through to the output's extent (hobbit.graph.extents.Extent.window)."""

    k: int
    stride: int
    dilation: int
    pad_begin: int
    pad_end: int
    ceil_mode: bool = False

    def out_size(self, size: int) -> int:
        return pool_out_size(size, self.k, self.stride, self.dilation, self.pad_begin, self.pad_end, self.ceil_mode)


def pool_out_size(size: int, k: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
                  ceil_mode: bool) -> int:
    """ONNX's output length; with ceil_mode the last window must start inside input + begin pad."""
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    """Element strides of a row-major tensor of `shape` read at `out_shape` indices."""
    rank = len(out_shape)
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    strides = [0] * rank
    step = 1
    for d in range(rank - 1, -1, -1):
        strides[d] = step if padded[d] != 1 else 0
        step *= padded[d]
    return strides


def view_groups(out_shape: tuple[int, ...], view: tuple[int, ...]) -> list[list[int]] | None:
    """Which consecutive output dims each view dim merges, or None if `view` is not such a merge."""
    groups: list[list[int]] = []
    d = 0
    for extent in view:
        group: list[int] = []
        size = 1
        while d < len(out_shape) and size < extent:
            group.append(d)
            size *= out_shape[d]
            d += 1
        if size != extent:
            return None
        groups.append(group)
    if any(out_shape[rest] != 1 for rest in range(d, len(out_shape))):
        return None
    return groups


def view_strides(shape: tuple[int, ...], out_shape: tuple[int, ...], view: tuple[int, ...]) -> list[int] | None:
    """Strides of an operand broadcast to `out_shape`, expressed in `view` dims,
    or None when the broadcast cannot be expressed as one stride per view dim."""
    groups = view_groups(out_shape, view)
    if groups is None:
        return None
    full = broadcast_strides(shape, out_shape)
    result = []
    for group in groups:
        dims = [d for d in group if out_shape[d] != 1]
        if not dims:
            result.append(0)
            continue
        for a, b in zip(dims, dims[1:]):
            if full[a] != full[b] * out_shape[b]:
                return None
        result.append(full[dims[-1]])
    return result
