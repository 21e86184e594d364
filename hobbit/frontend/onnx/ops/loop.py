"""ONNX Loop on run-time data as a BoundedLoop (hobbit.ops.loop): `while x.sum() < t:
x = x * 2`, or a trip count computed from the data.

The body is converted with the same converters into a Graph of its own, bound to fresh
inputs (iteration number, condition, carried values); the values it reads from the
enclosing graph become further inputs, fed by the loop node. Scan outputs are stacked
into `bound` rows and marked bounded by the iteration count (hobbit.frontend.common.bounded);
the carried values keep their static types, which must be the same in every iteration."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.bounded import known_of, mark_bounded, new_extent
from hobbit.graph.ir import Graph, TensorType, Value

# The iterations a loop may run when its trip count is not a constant at most this (and
# their rows in each scan output's buffer). Equal to the unroll limit, so every loop the
# unrolled form accepts runs in the bounded form too; a scan output of S bytes per
# iteration then takes 1024 * S bytes of arena (1 MiB for a 1 KiB row). A loop that
# would run longer stops with a RunError rather than run away.
MAX_TRIPS = 1024


def bounded_loop(ctx, node, ins: list) -> list:
    """The BoundedLoop of an ONNX Loop node: its final carried values, then its scan
    outputs (bounded along dim 0 by the number of iterations that ran)."""
    body_proto = ctx.attrs(node)["body"]
    name = ctx.node_name
    trip = ins[0] if len(ins) > 0 else None
    cond = ins[1] if len(ins) > 1 else None
    carried = list(ins[2:])
    for v in [trip, cond, *carried]:
        if v is not None and not isinstance(v, Value):
            raise Unsupported("a Loop carrying a sequence at run time")
        if v is not None and v.bounded is not None:
            raise Unsupported(f"a Loop on '{v.name}', which has a data-dependent dim")
    for v, what in ((trip, "trip count"), (cond, "condition")):
        if v is not None and v.type.size != 1:
            raise Unsupported(f"a Loop {what} of shape {v.shape}")
    bound = _bound(ctx, trip)

    iteration = Value(f"{name}/iteration", TensorType(np.dtype(np.int64), ()))
    cond_in = Value(f"{name}/cond", TensorType(np.dtype(np.bool_), ()))
    carried_in = [Value(f"{name}/carried{k}", v.type) for k, v in enumerate(carried)]
    outer_nodes, ctx.nodes = ctx.nodes, []
    try:
        outs = ctx.inline(body_proto, [iteration, cond_in, *carried_in], f"{name}/body")
        body_nodes = ctx.nodes
    finally:
        ctx.nodes = outer_nodes
    ctx.node_name = name
    _check_outputs(outs, carried_in)
    inputs = [iteration, cond_in, *carried_in]
    captured = _capture(body_nodes, outs, inputs)
    body = Graph(f"{name}/body", inputs + [inner for _, inner in captured], outs, body_nodes)
    results = ctx.emit("BoundedLoop", [trip, cond, *carried, *[outer for outer, _ in captured]],
                       {"body": body, "carried": len(carried), "bound": bound},
                       n_outputs=len(outs), marks_own=True)
    extent = new_extent(ctx, results[-1], 0, bound)
    scans = [mark_bounded(v, 0, extent) for v in results[len(carried):-1]]
    return results[:len(carried)] + scans


def _bound(ctx, trip: Value | None) -> int:
    """The static bound of the iteration count: a constant trip count, or the largest
    value a trip count computed from extents can take, when that is at most MAX_TRIPS."""
    known = known_of(ctx, trip)
    if known is not None:
        return int(min(max(int(np.max(known.hi)), 0), MAX_TRIPS))
    return MAX_TRIPS


def _check_outputs(outs: list, carried_in: list[Value]) -> None:
    if any(not isinstance(v, Value) for v in outs):
        raise Unsupported("a Loop body producing a sequence at run time")
    if outs[0].type.size != 1 or outs[0].dtype != np.dtype(np.bool_):
        raise Unsupported(f"a Loop body condition of type {outs[0].type}")
    for inner, out in zip(carried_in, outs[1:]):
        if out.type != inner.type:
            raise Unsupported(f"a Loop whose carried value '{inner.name}' changes type from {inner.type} "
                              f"to {out.type} in an iteration (hobbit needs one static shape)")
    for v in outs:
        if v.bounded is not None:
            raise Unsupported(f"a Loop body output '{v.name}' with a data-dependent dim")


def _capture(nodes: list, outs: list[Value], inputs: list[Value]) -> list[tuple[Value, Value]]:
    """The enclosing graph's values the body reads, each as (outer value, body input that
    stands for it); the body's nodes and outputs are rewired to those inputs. Constants stay
    as they are: the pipeline hands them to the loop after the body's passes."""
    own = {id(v) for v in inputs} | {id(o) for n in nodes for o in n.outputs}
    found: dict[int, tuple[Value, Value]] = {}

    def inner(v: Value | None) -> Value | None:
        if v is None or v.const is not None or id(v) in own:
            return v
        if v.bounded is not None:
            raise Unsupported(f"a Loop body reading '{v.name}', which has a data-dependent dim")
        if id(v) not in found:
            found[id(v)] = (v, Value(f"{v.name}/in_loop", v.type))
        return found[id(v)][1]

    for n in nodes:
        n.inputs = [inner(v) for v in n.inputs]
    outs[:] = [inner(v) for v in outs]
    return list(found.values())
