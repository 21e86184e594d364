"""CPU kernel of BoundedLoop (hobbit/ops/loop.py): the body's kernels, called in order
once per iteration inside a run-time loop.

Before the first iteration the carried values' initial values are copied to the loop's
outputs, which are the body's carried inputs; each iteration the body writes its
condition and carried values to buffers in the loop's scratch (hobbit/plan/loop.py),
which are then copied back to the outputs, and its scan values straight into row i of
the scan outputs. The loop ends when the trip count or the condition says so; one that
would run past the static bound reports the iteration number in the loop's status
record and stops (a RunError, never a write past a scan buffer). A check that fails in
the body is reported as the loop's."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I1, I64, PTR, KernelBuilder
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.status import STATUS_WORDS, check_range

I8 = ir.IntType(8)
NO_LIMIT = np.iinfo(np.int64).max


def _lower_loop(k: KernelArgs) -> None:
    kb, b, node, plan = k.kb, k.kb.b, k.node, k.plan
    n, bound = node.attrs["carried"], node.attrs["bound"]
    carried, scans, extent = k.outputs[:n], k.outputs[n:-1], k.outputs[-1]

    def scratch(offset: int) -> ir.Value:
        return b.gep(k.scratch, [kb.i64(offset)], source_etype=I8, inbounds=True)

    arena = scratch(plan.arena)
    if plan.body.reset_bytes:
        kb.call_intrinsic("llvm.memset.p0.i64", ir.VoidType(),
                          [b.gep(arena, [kb.i64(plan.body.reset_offset)], source_etype=I8, inbounds=True),
                           ir.Constant(I8, 0), kb.i64(plan.body.reset_bytes), ir.Constant(I1, 0)])
    for out, init, value in zip(carried, k.inputs[2:2 + n], node.outputs[:n]):
        _copy(kb, out, init, value.type.nbytes)

    ins = _table(kb, [scratch(plan.iteration), scratch(plan.cond_in), *carried, *k.inputs[2 + n:]])
    outs = _table(kb, [scratch(plan.cond_out), *[scratch(o) for o in plan.carried]] + [None] * len(scans))
    trip = kb.load(k.inputs[0], node.inputs[0].dtype) if k.inputs[0] is not None else kb.i64(NO_LIMIT)
    cond = kb.local(ir.Constant(I8, 1))
    if k.inputs[1] is not None:
        b.store(kb.load(k.inputs[1], np.bool_), cond)
    count = kb.local(kb.i64(0))

    head, check, run, runaway, done = kb.blocks("loop", "head", "check", "run", "runaway", "done")
    kb.enter(head)
    i = b.load(count, typ=I64)
    going = b.and_(b.icmp_signed("<", i, trip), b.icmp_unsigned("!=", b.load(cond, typ=I8), ir.Constant(I8, 0)))
    b.cbranch(going, check, done)
    b.position_at_end(check)
    b.cbranch(b.icmp_signed(">=", i, kb.i64(bound)), runaway, run)
    b.position_at_end(runaway)
    check_range(kb, i, 0, bound - 1, "Loop iteration")
    b.branch(done)

    b.position_at_end(run)
    b.store(i, scratch(plan.iteration))
    b.store(b.load(cond, typ=I8), scratch(plan.cond_in))
    for j, (buffer, value) in enumerate(zip(scans, node.outputs[n:-1])):
        row = value.type.nbytes // max(bound, 1)
        b.store(b.gep(buffer, [b.mul(i, kb.i64(row))], source_etype=I8, inbounds=True),
                b.gep(outs, [kb.i64(1 + n + j)], source_etype=PTR))
    k.subgraph(b, (ins, outs, ir.Constant(PTR, None), arena))
    for out, offset, value in zip(carried, plan.carried, node.outputs[:n]):
        _copy(kb, out, scratch(offset), value.type.nbytes)
    b.store(b.load(scratch(plan.cond_out), typ=I8), cond)
    b.store(b.add(i, kb.i64(1)), count)
    b.branch(head)

    b.position_at_end(done)
    b.store(b.load(count, typ=I64), extent)
    _report_body_checks(kb, arena, plan.body)


def _copy(kb: KernelBuilder, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
    if nbytes:
        kb.call_intrinsic("llvm.memcpy.p0.p0.i64", ir.VoidType(), [dst, src, kb.i64(nbytes), ir.Constant(I1, 0)])


def _table(kb: KernelBuilder, pointers: list[ir.Value | None]) -> ir.Value:
    """An array of pointers, as the entry point's inputs and outputs are (None: set later)."""
    table = kb.alloca(PTR, max(len(pointers), 1))
    for index, pointer in enumerate(pointers):
        if pointer is not None:
            kb.b.store(pointer, kb.b.gep(table, [kb.i64(index)], source_etype=PTR))
    return table


def _report_body_checks(kb: KernelBuilder, arena: ir.Value, body_plan) -> None:
    """The first check record of the body that is set becomes the loop's record."""
    b = kb.b
    for place in body_plan.status.values():
        record = b.gep(arena, [kb.i64(place.index)], source_etype=I8, inbounds=True)
        found = b.icmp_unsigned("!=", b.load(record, typ=I64), kb.i64(0))
        free = b.icmp_unsigned("==", b.load(kb.status, typ=I64), kb.i64(0))
        with b.if_then(b.and_(found, free)):
            for word in range(len(STATUS_WORDS)):
                value = b.load(b.gep(record, [kb.i64(word)], source_etype=I64), typ=I64)
                b.store(value, b.gep(kb.status, [kb.i64(word)], source_etype=I64))


CPU.register("BoundedLoop", lower=_lower_loop)
