"""The memory plan's records: where every runtime tensor, scratch area, work-claim counter
and check record lives, and each kernel's frozen plan.

Memory planning (hobbit.passes.memory) fills a MemoryPlan; every backend's module builder
reads it to compute a kernel's pointers, and a GPU launch keeps its arguments' Places."""

from __future__ import annotations

from dataclasses import dataclass, field

from hobbit.graph.ir import Value


@dataclass(frozen=True)
class Place:
    kind: str  # "input", "output", "const", "arena"
    index: int  # input/output position, or byte offset in the weights blob / arena
    offset: int = 0  # bytes into that buffer (a slice of an in-place Concat)

    def __str__(self) -> str:
        return f"{self.kind}[{self.index}]" + (f"+{self.offset}" if self.offset else "")


@dataclass
class MemoryPlan:
    places: dict[int, Place] = field(default_factory=dict)  # id(value) -> place
    scratch: dict[int, Place] = field(default_factory=dict)  # id(node) -> arena place
    claims: dict[int, Place] = field(default_factory=dict)  # id(node) -> its work-claim counters
    status: dict[int, Place] = field(default_factory=dict)  # id(node) -> its run-time check record
    kernels: dict[int, object] = field(default_factory=dict)  # id(node) -> its frozen plan, for those that have one
    # The claim counters and status records of all kernels: arena bytes [offset, offset + bytes),
    # zeroed at the start of every inference.
    reset_offset: int = 0
    reset_bytes: int = 0
    arena_bytes: int = 0
    weights_bytes: int = 0
    # A model with run-time dims: the position of the input that holds their values (int64[n]).
    dims_input: int | None = None

    def place(self, value: Value) -> Place:
        return self.places[id(value)]
