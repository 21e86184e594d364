"""The plan of a Det node (hobbit/backend/cpu/linalg.py): each thread factorises one matrix at a
time in its own copy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.target import Target


@dataclass(frozen=True)
class DetPlan:
    matrix: int  # elements of a thread's copy of one matrix (at least one)
    threads: int
    itemsize: int

    @property
    def scratch_bytes(self) -> int:
        return self.threads * self.matrix * self.itemsize


def det_plan(node: Node, target: Target, threads: int) -> DetPlan:
    n = node.inputs[0].shape[-1]
    return DetPlan(max(n * n, 1), threads, np.dtype(node.inputs[0].dtype).itemsize)
