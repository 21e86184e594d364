"""The plan of a Recurrence node (RNN, GRU, LSTM: hobbit/backend/cpu/rnn.py): how many batch
rows share each pass over R, and the gate scratch every thread holds for them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.target import Target

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}  # gates per cell, in ONNX's order (LSTM i, o, f, c; GRU z, r, h)
ROW_BLOCK = 8  # batch rows that share each pass over a row of R


@dataclass(frozen=True)
class RecurrencePlan:
    block: int  # batch rows per unit of work
    row_stride: int  # scratch elements of one batch row: its G gate rows plus one for GRU's r (.) h
    threads: int
    itemsize: int

    @property
    def scratch_bytes(self) -> int:
        return self.threads * self.block * self.row_stride * self.itemsize


def recurrence_plan(node: Node, target: Target, threads: int) -> RecurrencePlan:
    block = max(1, min(node.inputs[0].shape[1], ROW_BLOCK))
    row_stride = (GATES[node.attrs["cell"]] + 1) * node.attrs["hidden_size"]
    return RecurrencePlan(block, row_stride, threads, np.dtype(node.inputs[0].dtype).itemsize)
