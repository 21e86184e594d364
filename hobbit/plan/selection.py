"""The plan of a BoundedCompress node (hobbit/backend/cpu/selection.py): scratch for the table
of selected positions, which one pass over the condition fills and the slice copies read."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.graph.ir import Node
from hobbit.target import Target


@dataclass(frozen=True)
class CompressPlan:
    positions: int  # the axis length: the most positions the condition can select

    @property
    def scratch_bytes(self) -> int:
        return 8 * self.positions


def compress_plan(node: Node, target: Target, threads: int) -> CompressPlan:
    x, axis = node.inputs[0], node.attrs["axis"]
    return CompressPlan(x.type.size if axis is None else x.shape[axis])
