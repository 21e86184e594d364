"""Col2Im: column blocks [N, C*prod(block), L] summed back into images [N, C, *image].

Attributes are canonical and complete: `image`, `block`, `strides`, `dilations`
and `pads` (begins then ends) with one entry per spatial dim."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op


@dataclass(frozen=True)
class Geometry:
    """Spatial sizes of one Col2Im: per dim image size, block size, block count and the
    stride, dilation and leading pad that map (offset, position) to an image coordinate."""

    image: tuple[int, ...]
    block: tuple[int, ...]
    blocks: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]

    def valid(self, d: int, offset: int) -> range:
        """Positions along dim d whose coordinate for block offset `offset` lies in the image."""
        shift = offset * self.dilations[d] - self.pads_begin[d]
        stride = self.strides[d]
        lo = max(0, -(shift // stride))  # ceil(-shift / stride)
        hi = min(self.blocks[d], -((shift - self.image[d]) // stride))  # ceil((image - shift) / stride)
        return range(lo, max(lo, hi))


def geometry(a: dict) -> Geometry:
    rank = len(a["image"])
    pads = tuple(a["pads"])
    blocks = tuple((a["image"][d] + pads[d] + pads[d + rank] - a["dilations"][d] * (a["block"][d] - 1) - 1)
                   // a["strides"][d] + 1 for d in range(rank))
    return Geometry(tuple(a["image"]), tuple(a["block"]), blocks, tuple(a["strides"]), tuple(a["dilations"]),
                    pads[:rank])


def _infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    g = geometry(node.attrs)
    count = int(np.prod(g.block, dtype=np.int64))
    if len(x.shape) != 3 or count == 0 or x.shape[1] % count or min(g.blocks, default=1) < 1 \
            or x.shape[2] != int(np.prod(g.blocks, dtype=np.int64)):
        raise ShapeError(f"Col2Im input {x.type} does not fit image {g.image}, block {g.block} "
                         f"({g.blocks} sliding blocks)")
    return [TensorType(x.dtype, (x.shape[0], x.shape[1] // count) + g.image)]


def _reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    """Add each block offset's columns into a padded image with strided slices, then crop."""
    x = ins[0]
    g = geometry(a)
    rank = len(g.image)
    pads = tuple(a["pads"])
    n, planes = x.shape[0], x.shape[1] // int(np.prod(g.block, dtype=np.int64))
    cols = x.reshape((n, planes) + g.block + g.blocks)
    padded = np.zeros((n, planes) + tuple(g.image[d] + pads[d] + pads[d + rank] for d in range(rank)), x.dtype)
    for offsets in itertools.product(*(range(k) for k in g.block)):
        window = tuple(slice(k * dil, k * dil + s * (b - 1) + 1, s)
                       for k, dil, s, b in zip(offsets, g.dilations, g.strides, g.blocks))
        padded[(slice(None), slice(None)) + window] += cols[(slice(None), slice(None)) + offsets]
    crop = tuple(slice(pads[d], pads[d] + g.image[d]) for d in range(rank))
    return [np.ascontiguousarray(padded[(slice(None), slice(None)) + crop])]


register_op(OpDef(
    "Col2Im", infer=_infer, reference=_reference,
    attrs={"image": (), "block": (), "strides": (), "dilations": (), "pads": ()},
    doc="sum column blocks back into images (torch fold); every loop bound is static"))
