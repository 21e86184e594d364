"""BoundedLoop: an ONNX Loop whose trip count or condition is only known at run time.

Its body is a Graph of its own (attribute `body`), compiled like any model and run once
per iteration by the loop's kernel. Inputs: the trip count (int64, or None for none), the
initial condition (bool, or None), the `carried` initial values, then what the body reads
from outside (captured values and, after the passes, its constants), in the order of the
body's inputs past its first 2 + `carried`. The body's inputs are (iteration number,
condition, carried values, what it reads from outside); its outputs (condition, carried
values, scan values). Carried values have one static type in every iteration.

Outputs: the final carried values, each scan output stacked along a new dim 0 of length
`bound` (rows [0, extent) hold the iterations' values), and the extent: how many
iterations ran. A run that would need more than `bound` iterations is invalid data: the
kernel stops and reports it (checks_data), as the reference raises."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import OpDef, get_op, register_op, with_defaults

I64 = np.dtype(np.int64)


def _infer(node: Node) -> list[TensorType]:
    body, carried, bound = node.attrs["body"], node.attrs["carried"], node.attrs["bound"]
    outs = body.outputs[1:]
    types = [v.type for v in outs[:carried]]
    types += [TensorType(v.dtype, (bound, *v.shape)) for v in outs[carried:]]
    return types + [TensorType(I64, ())]


def evaluate(graph: Graph, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Run `graph` on `feeds` (one per graph input) node by node with the numpy references,
    epilogue steps included."""
    env: dict[int, np.ndarray] = {id(v): np.asarray(f) for v, f in zip(graph.inputs, feeds)}

    def read(v: Value) -> np.ndarray:
        return v.const if v.const is not None else env[id(v)]

    for node in graph.nodes:
        results = list(get_op(node.op).reference([None if v is None else read(v) for v in node.inputs],
                                                 with_defaults(node)))
        for step in node.epilogue:
            args = [results[0]] + ([read(step.operand)] if step.operand is not None else [])
            if step.swap:
                args.reverse()
            opdef = get_op(step.op)
            results[0] = opdef.reference(args, {**opdef.attrs, **step.attrs})[0]
        for out, data in zip(node.outputs, results):
            env[id(out)] = np.asarray(data, dtype=out.dtype)
    return [read(v) for v in graph.outputs]


def _reference(ins: list[np.ndarray | None], a: dict) -> list[np.ndarray]:
    body, n, bound = a["body"], a["carried"], a["bound"]
    trip = int(np.asarray(ins[0]).reshape(-1)[0]) if ins[0] is not None else None
    cond = bool(np.asarray(ins[1]).reshape(-1)[0]) if ins[1] is not None else True
    carried, outside = [np.asarray(v) for v in ins[2:2 + n]], list(ins[2 + n:])
    scan_values = body.outputs[1 + n:]
    scans = [np.zeros((bound, *v.shape), v.dtype) for v in scan_values]
    i = 0
    while cond and (trip is None or i < trip):
        if i >= bound:
            raise ShapeError(f"the Loop would run more than its bound of {bound} iterations")
        outs = evaluate(body, [np.int64(i), np.bool_(cond), *carried, *outside])
        cond = bool(outs[0].reshape(-1)[0])
        carried = outs[1:1 + n]
        for scan, value in zip(scans, outs[1 + n:]):
            scan[i] = value
        i += 1
    return carried + scans + [np.int64(i)]


register_op(OpDef(
    "BoundedLoop", infer=_infer, reference=_reference, checks_data=True,
    attrs={"carried": 0, "bound": 0},
    doc="ONNX Loop run at run time: the body graph once per iteration while the trip count "
        "and the condition allow, the scan outputs stacked into `bound` rows with the "
        "iteration count as their extent; more than `bound` iterations is a RunError"))
