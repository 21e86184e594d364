"""The plan of a BoundedUnique node (hobbit/backend/cpu/unique.py): two int64 arrays of the
compared length in scratch, the merge sort's permutation and its spare (which later
holds the groups' first indices and their renumbering)."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.graph.ir import Node
from hobbit.target import Target


@dataclass(frozen=True)
class UniquePlan:
    length: int  # elements (flattened) or slices (along the axis) compared

    @property
    def scratch_bytes(self) -> int:
        return 2 * self.length * 8


def unique_plan(node: Node, target: Target, threads: int) -> UniquePlan:
    """The bound length is that of the indices output (hobbit.ops.unique.unique_length)."""
    return UniquePlan(node.outputs[1].shape[0])
