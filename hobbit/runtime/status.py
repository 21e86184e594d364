"""The entry point's status -> a RunError naming the node and the invalid value.

Generated code records invalid run-time data in per-kernel records in the arena
(hobbit.emit.status) and returns 1 + the number of the first record that is
set; the module carries the table of records (node, op, arena offset) as a JSON
C string, so the same status works for a JIT'd model and an exported library."""

from __future__ import annotations

import ctypes
import json

import numpy as np

from hobbit.errors import RunError
from hobbit.emit.status import CHECK_KINDS, STATUS_WORDS


def read_status_table(address: int) -> list[tuple[int, str, str]]:
    """The module's table of check records, from the address of its C string."""
    return [tuple(row) for row in json.loads(ctypes.string_at(address).decode())] if address else []


def status_error(status: int, table: list[tuple[int, str, str]], arena: np.ndarray) -> RunError:
    """The RunError for a non-zero status, read from the record in this run's arena."""
    offset, node, op = table[status - 1]
    words = dict(zip(STATUS_WORDS, arena[offset: offset + 8 * len(STATUS_WORDS)].view(np.int64).tolist()))
    what = CHECK_KINDS[words["kind"] - 1]
    if what == "divisor":
        return RunError(f"node '{node}' ({op}): integer division by zero (a divisor is 0); no outputs were returned")
    where = f" along axis {words['axis']}" if what == "index" else ""
    return RunError(f"node '{node}' ({op}): {what} {words['value']} is out of range "
                    f"[{words['lo']}, {words['hi']}]{where}; no outputs were returned")
