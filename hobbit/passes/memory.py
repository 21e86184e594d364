"""Liveness-based memory planning.

Every runtime tensor gets a place: a graph input or output buffer, the weights
blob (constants), or an offset in one arena. View ops (Reshape, Flatten, ...)
share their input's place. Arena tensors whose lifetimes do not overlap share
bytes, placed greedily largest-first at the lowest offset that fits. A kernel's scratch
is what its plan (hobbit.plan.planners) says; the plan is kept here for the emitter."""

from __future__ import annotations

from hobbit.target import Target, host_target
from hobbit.graph.extents import DIMS_INPUT
from hobbit.graph.ir import Graph, Node, Value
from hobbit.ops.registry import get_op
from hobbit.plan.arena import STATUS_BYTES, claim_bytes
from hobbit.plan.planners import KernelPlanner, kernel_plan
from hobbit.plan.loop import LoopPlan, loop_plan
from hobbit.plan.memory import MemoryPlan, Place

ALIGN = 64


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def is_view(node: Node) -> bool:
    return get_op(node.op).kind == "view"


def needs_code(node: Node) -> bool:
    """Views and in-place Concats (whose producers write their slices) generate no kernel."""
    return not (is_view(node) or node.attrs.get("in_place"))


def alias_root(value: Value) -> Value:
    """The value whose storage `value` shares, following chains of view ops."""
    return storage(value)[0]


def storage(value: Value) -> tuple[Value, int]:
    """(root value, byte offset) of the memory `value` lives in: through views, and from an
    in-place Concat's input into its slice of the Concat's output."""
    offset = 0
    while value.producer is not None:
        if is_view(value.producer):
            value = value.producer.inputs[0]
            continue
        if value.slice_of is None:
            break
        value, delta = value.slice_of
        offset += delta
    return value, offset


def plan_memory(graph: Graph, target: Target | None = None, threads: int = 1,
                planner: KernelPlanner = kernel_plan) -> MemoryPlan:
    """Every value's place, each kernel's plan (from `planner`, a backend's: by default the
    one the target picks, hobbit.plan.planners.kernel_plan) and its scratch, and the arena."""
    target = target or host_target()
    plan = MemoryPlan()
    for i, v in enumerate(graph.inputs):
        plan.places[id(v)] = Place("input", i)
        if v.name == DIMS_INPUT:
            plan.dims_input = i
    for i, v in enumerate(graph.outputs):
        plan.places[id(v)] = Place("output", i)

    weights_offset = 0
    for const in graph.constants():
        if id(const) in plan.places:  # a loop body's constant, an input fed by the loop
            continue
        plan.places[id(const)] = Place("const", weights_offset)
        weights_offset = _align(weights_offset + const.const.nbytes)
    plan.weights_bytes = weights_offset

    # Lifetimes of arena roots, in node positions; views extend their root's life.
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    roots: dict[int, Value] = {}
    for pos, node in enumerate(graph.nodes):
        for out in node.outputs:
            root = alias_root(out)
            if id(root) not in plan.places:
                roots[id(root)] = root
                first.setdefault(id(root), pos)
                last[id(root)] = max(last.get(id(root), pos), pos)
        for v in node.operands():
            root = alias_root(v)
            if id(root) in roots:
                last[id(root)] = pos

    requests: list[tuple[int, int, int, object]] = []  # (bytes, start, end, key)
    for key, root in roots.items():
        requests.append((_align(root.type.nbytes), first[key], last[key], ("value", key)))
    for pos, node in enumerate(graph.nodes):
        kernel = _body_plan(node, target, planner) if node.op == "BoundedLoop" else \
            planner(node, target, threads, get_op(node.op).kind == "elementwise") if needs_code(node) else None
        if kernel is None:
            continue
        plan.kernels[id(node)] = kernel
        size = kernel.scratch_bytes
        if size:
            requests.append((_align(size), pos, pos, ("scratch", id(node))))

    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    for size, start, end, key in sorted(requests, key=lambda r: (-r[0], r[1])):
        offset = _first_fit(placed, size, start, end)
        placed.append((offset, size, start, end))
        plan.arena_bytes = max(plan.arena_bytes, offset + size)
        kind, ident = key
        table = plan.places if kind == "value" else plan.scratch
        table[ident] = Place("arena", offset)

    per_kernel = claim_bytes(threads)
    plan.reset_offset = offset = _align(plan.arena_bytes)
    for node in graph.nodes:
        if per_kernel and needs_code(node):
            plan.claims[id(node)] = Place("arena", offset)
            offset += per_kernel
    for node in graph.nodes:
        if get_op(node.op).checks_data and needs_code(node):
            plan.status[id(node)] = Place("arena", offset)
            offset += STATUS_BYTES
    plan.reset_bytes = offset - plan.reset_offset
    plan.arena_bytes = max(plan.arena_bytes, offset)

    for node in graph.nodes:
        for out in node.outputs:
            if id(out) not in plan.places:
                root, offset = storage(out)
                base = plan.places[id(root)]
                plan.places[id(out)] = Place(base.kind, base.index, base.offset + offset)
    return plan


def _body_plan(node: Node, target: Target, planner: KernelPlanner) -> LoopPlan:
    """A loop's body is planned as a graph of its own, run by one thread (the loop's kernel
    calls its kernels in order), its arena inside the loop's scratch."""
    return loop_plan(node, plan_memory(node.attrs["body"], target, 1, planner))


def _first_fit(placed: list[tuple[int, int, int, int]], size: int, start: int, end: int) -> int:
    """Lowest offset where [offset, offset+size) overlaps no live block."""
    live = sorted((o, o + s) for o, s, a, b in placed if a <= end and start <= b)
    offset = 0
    for lo, hi in live:
        if offset + size <= lo:
            break
        offset = max(offset, hi)
    return offset
