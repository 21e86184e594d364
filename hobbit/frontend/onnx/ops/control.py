"""Control flow (If, Loop, Scan), unrolled at import.

hobbit compiles for known shapes, so control flow whose decisions are known at
compile time is resolved there: If inlines the branch its condition picks,
Loop and Scan inline their body once per iteration. A condition or trip count
computed from small graph inputs makes the model specialise on those inputs'
values (hobbit.runtime.specialize). An If on run-time data whose branches
agree in type becomes a Where over both branches (ONNX ops have no side
effects, so evaluating both is safe); one whose branch has a data-dependent dim
picks that branch's extent at run time (hobbit.frontend.onnx.ops.bounded.select).
A Loop whose trip count or condition comes from run-time data runs at run time, as a
BoundedLoop (hobbit.frontend.onnx.ops.loop)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import NeedsInputValues, Unsupported
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.ops import bounded
from hobbit.frontend.onnx.ops.loop import bounded_loop
from hobbit.graph.ir import Value

# Unrolling multiplies the body; past this many iterations the graph would be absurd.
MAX_ITERATIONS = 1024


@converter("If", since=1)
def if_(ctx, node, ins):
    a = ctx.attrs(node)
    name = ctx.node_name
    try:
        cond = ctx.const_value(ins[0], "If condition")
    except NeedsInputValues:
        then = ctx.inline(a["then_branch"], [], f"{name}/then")
        other = ctx.inline(a["else_branch"], [], f"{name}/else")
        if any(isinstance(v, Value) and v.bounded is not None for v in then + other):
            return [bounded.select(ctx, ins[0], t, e) for t, e in zip(then, other)]
        if any(not isinstance(t, Value) or not isinstance(e, Value) or t.type != e.type
               for t, e in zip(then, other)):
            raise
        return [ctx.emit1("Where", [ins[0], t, e]) for t, e in zip(then, other)]
    branch = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
    return ctx.inline(a[branch], [], f"{name}/{branch.split('_')[0]}")


@converter("Loop", since=1)
def loop(ctx, node, ins):
    """Unrolled when the trip count and every condition are known at compile time, else a
    BoundedLoop (hobbit.frontend.onnx.ops.loop); where the bounded form does not apply
    (a sequence carried, shapes that change per iteration), the unrolled path decides
    (a trip count from small graph inputs then specialises on their values)."""
    decided = all(i >= len(ins) or ins[i] is None or ins[i].const is not None for i in (0, 1))
    if decided:
        mark = len(ctx.nodes)
        try:
            return _unrolled(ctx, node, ins)
        except _RunTimeCondition:
            del ctx.nodes[mark:]
        return bounded_loop(ctx, node, ins)
    try:
        return bounded_loop(ctx, node, ins)
    except Unsupported as exc:
        try:
            return _unrolled(ctx, node, ins)
        except NeedsInputValues:
            raise
        except Unsupported:
            raise exc from None


class _RunTimeCondition(Unsupported):
    """The body computes its condition from run-time data: the loop cannot be unrolled."""


def _unrolled(ctx, node, ins):
    body = ctx.attrs(node)["body"]
    name = ctx.node_name
    trip = int(ctx.const_value(ins[0], "Loop trip count")) if len(ins) > 0 and ins[0] is not None else None
    cond = bool(ctx.const_value(ins[1], "Loop condition")) if len(ins) > 1 and ins[1] is not None else True
    carried = list(ins[2:])
    n_scan = len(body.output) - 1 - len(carried)
    scans: list[list] = [[] for _ in range(n_scan)]
    iteration = 0
    while cond and (trip is None or iteration < trip):
        if iteration >= MAX_ITERATIONS:
            raise Unsupported(f"Loop runs more than {MAX_ITERATIONS} iterations (hobbit unrolls loops)")
        outs = ctx.inline(body, [ctx.const(np.int64(iteration)), ctx.const(np.bool_(cond)), *carried],
                          f"{name}/iter{iteration}")
        if isinstance(outs[0], Value) and outs[0].const is None:
            raise _RunTimeCondition("the Loop condition is computed from run-time data")
        cond = bool(ctx.const_value(outs[0], "Loop condition computed in the body", specialize=False))
        carried = outs[1:1 + len(carried)]
        for collected, value in zip(scans, outs[1 + len(carried):]):
            collected.append(value)
        iteration += 1
    if n_scan and iteration == 0:
        raise Unsupported("a Loop with scan outputs that runs no iteration (their element shape is unknown)")
    return carried + [_stack(ctx, values, 0) for values in scans]


@converter("Scan", since=8)
def scan_batched(ctx, node, ins):
    """Opset 8: every tensor has a leading batch dim, sequences run along axis 1, and an
    optional first input gives per-batch lengths (only full lengths are supported)."""
    a = ctx.attrs(node)
    n_inputs = int(a["num_scan_inputs"])
    lengths, states, xs = ins[0], list(ins[1:len(ins) - n_inputs]), list(ins[len(ins) - n_inputs:])
    batch, steps = xs[0].shape[0], xs[0].shape[1]
    if lengths is not None and (np.asarray(ctx.const_value(lengths, "Scan sequence_lens")) != steps).any():
        raise Unsupported("Scan sequence_lens shorter than the sequence")
    directions = list(a.get("directions") or [0] * n_inputs)
    per_batch = []
    for b in range(batch):
        index = ctx.const(np.int64(b))
        pick = [ctx.emit1("Gather", [v, index], {"axis": 0}) for v in states + xs]
        per_batch.append(_scan(ctx, a["body"], pick[:len(states)], pick[len(states):], [0] * n_inputs, directions,
                               None, None, f"{ctx.node_name}/batch{b}"))
    return [_stack(ctx, [outs[i] for outs in per_batch], 0) for i in range(len(per_batch[0]))]


@converter("Scan", since=9)
def scan(ctx, node, ins):
    a = ctx.attrs(node)
    n_inputs = int(a["num_scan_inputs"])
    states, xs = list(ins[:len(ins) - n_inputs]), list(ins[len(ins) - n_inputs:])
    return _scan(ctx, a["body"], states, xs, _axes(a.get("scan_input_axes"), xs),
                 list(a.get("scan_input_directions") or [0] * n_inputs),
                 a.get("scan_output_axes"), a.get("scan_output_directions"), ctx.node_name)


def _scan(ctx, body, states: list, xs: list, in_axes: list[int], in_dirs: list[int], out_axes, out_dirs,
          name: str) -> list:
    """Unroll the body over the scan axis: final states, then the stacked scan outputs."""
    length = int(xs[0].shape[in_axes[0]])
    if length > MAX_ITERATIONS:
        raise Unsupported(f"Scan over {length} steps (hobbit unrolls scans up to {MAX_ITERATIONS})")
    n_out = len(body.output) - len(states)
    scans: list[list] = [[] for _ in range(n_out)]
    for step in range(length):
        slices = [ctx.emit1("Gather", [x, ctx.const(np.int64(length - 1 - step if d else step))], {"axis": axis})
                  for x, axis, d in zip(xs, in_axes, in_dirs)]
        outs = ctx.inline(body, [*states, *slices], f"{name}/step{step}")
        states = outs[:len(states)]
        for collected, value in zip(scans, outs[len(states):]):
            collected.append(value)
    stacked = []
    for values, axis, direction in zip(scans, list(out_axes or [0] * n_out), list(out_dirs or [0] * n_out)):
        ordered = values[::-1] if direction else values
        stacked.append(_stack(ctx, ordered, axis % (len(values[0].shape) + 1)))
    return states + stacked


def _axes(axes, values) -> list[int]:
    return [int(ax) % len(v.shape) for ax, v in zip(axes or [0] * len(values), values)]


def _stack(ctx, values: list, axis: int):
    """Stack equal-shaped values along a new axis (Reshape each, then one Concat)."""
    shapes = {tuple(v.shape) for v in values}
    if len(shapes) != 1:
        raise Unsupported(f"loop iterations produce different shapes {sorted(shapes)}")
    shape = list(values[0].shape)
    expanded = tuple(shape[:axis] + [1] + shape[axis:])
    parts = [ctx.emit1("Reshape", [v], {"shape": expanded}) for v in values]
    return parts[0] if len(parts) == 1 else ctx.emit1("Concat", parts, {"axis": axis})
