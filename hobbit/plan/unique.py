"""The plan of a BoundedUnique node (hobbit/lower/unique.py): two int64 arrays of the
compared length in scratch, the merge sort's permutation and its spare (which later
holds the groups' first indices and their renumbering)."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.graph.ir import Node
from hobbit.ops.unique import unique_length
from hobbit.target import Target


@dataclass(frozen=True)
class UniquePlan:
    length: int  # elements (flattened) or slices (along the axis) compared

    @property
    def scratch_bytes(self) -> int:
        return 2 * self.length * 8


def unique_plan(node: Node, target: Target, threads: int) -> UniquePlan:
    return UniquePlan(unique_length(tuple(node.inputs[0].shape), node.attrs["axis"]))
