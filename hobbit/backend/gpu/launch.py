"""One kernel launch of a GPU model, as data: its kernel's name, grid, block and the places
of its pointers. The module builder (hobbit.backend.gpu.module) makes them; the device
runtime, the grid emulation and the export replay them. A module of its own so that a
worker running an unpickled or exported GPU model imports none of the code generator."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.plan.memory import Place


@dataclass(frozen=True)
class Launch:
    kernel: str  # the kernel's function name in the module
    node: str
    op: str
    grid: tuple[int, int, int]
    threads: int
    shared_bytes: int
    args: tuple[Place, ...]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "node": self.node, "op": self.op, "grid": list(self.grid),
                "threads": self.threads, "shared_bytes": self.shared_bytes,
                "args": [[p.kind, p.index, p.offset] for p in self.args]}

    @staticmethod
    def from_json(data: dict) -> "Launch":
        return Launch(data["kernel"], data["node"], data["op"], tuple(data["grid"]), data["threads"],
                      data["shared_bytes"], tuple(Place(*a) for a in data["args"]))
