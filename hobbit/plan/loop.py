"""The plan of a BoundedLoop node (hobbit/backend/cpu/loop.py): where its scratch holds what.

The body is a graph of its own with its own memory plan (made by memory planning, which
plans the body before the loop); the loop's scratch holds the body's arena and, beside
it, the body's scalar inputs (iteration number, condition) and the buffers the body
writes its condition and carried values to. Carried values are then copied to the
loop's outputs, which are the body's carried inputs in the next iteration: a body may
read an input after it wrote an output, so the two never share memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hobbit.errors import CodegenError
from hobbit.graph.ir import Node

LINE = 64


def _lines(size: int) -> int:
    return -(-size // LINE) * LINE


@dataclass(frozen=True)
class LoopPlan:
    body: Any  # the body graph's MemoryPlan (hobbit.passes.memory), built for one thread
    iteration: int  # scratch offsets: the iteration number the body reads (int64)
    cond_in: int  # the condition it reads (bool)
    cond_out: int  # the condition it writes
    carried: tuple[int, ...]  # the carried values it writes
    arena: int  # the body's arena
    scratch_bytes: int


def loop_plan(node: Node, body_plan: Any) -> LoopPlan:
    """Lay out the loop's scratch around its body's plan. The body's constants must be
    inputs of the loop (the pipeline hoists them), as nothing else places them."""
    if body_plan.weights_bytes:
        raise CodegenError(f"the body of Loop '{node.name}' has constants that are not inputs of the loop")
    body = node.attrs["body"]
    carried = node.attrs["carried"]
    offset = 0
    slots = []
    for size in [8, 1, 1] + [v.type.nbytes for v in body.outputs[1:1 + carried]]:
        slots.append(offset)
        offset += _lines(max(size, 1))
    return LoopPlan(body_plan, slots[0], slots[1], slots[2], tuple(slots[3:]), offset,
                    offset + _lines(body_plan.arena_bytes))
