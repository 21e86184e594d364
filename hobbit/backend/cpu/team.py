"""The team walk: how several threads run one inference's kernels in order.

The entry point hands `hobbit_team` to the thread runtime (hobbit.runtime.pool),
which runs it on the calling thread (thread 0) and on the pool's workers that
join. Every thread walks the same list of steps. A step is one kernel (or a run
of kernels that do not share their work, merged into one): its ids 0 .. n-1
(n = threads for a kernel that shares work, 1 for one that does not) are
claimed by whichever thread gets to them first, own id first, and each claimed
id is one call of the kernel. The thread that finishes a step's last id
publishes the step as done; every thread waits for that before the next step.

So a thread waits for work to be done, never for another thread to arrive: a
worker the host has descheduled misses the steps that ran meanwhile (the others
took its ids) and, when it runs again, passes through them without waiting. The
only wait that involves it is for an id it claimed and is still running.

Workers take a reference on the job for each step they are in (enter/leave), so
the caller knows when no worker can touch this inference's arena any more; a
worker waits between steps without one, on the runtime's own memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from hobbit.backend.cpu.profile import KernelTimer
from hobbit.graph.ir import Node
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.backend.cpu.parallel import runtime_function

TEAM = "hobbit_team"

ArgsFn = Callable[[ir.IRBuilder, tuple], list[ir.Value]]  # (builder, entry tables) -> a kernel's pointers


@dataclass
class KernelCall:
    node: Node
    fn: ir.Function
    parallel: bool  # the kernel shares its work (one call per id) or runs as one call
    args: ArgsFn


@dataclass
class Step:
    calls: list[KernelCall]
    parallel: bool
    first: int  # index of its first kernel in the entry's list (for the profile timers)


def team_steps(calls: list[KernelCall], merge_serial: bool = True) -> list[Step]:
    """Kernels in steps: each sharing kernel alone, consecutive non-sharing ones together
    (one thread runs them back to back: no wait between them)."""
    steps: list[Step] = []
    for index, call in enumerate(calls):
        last = steps[-1] if steps else None
        if merge_serial and last is not None and not last.parallel and not call.parallel:
            last.calls.append(call)
        else:
            steps.append(Step([call], call.parallel, index))
    return steps


def emit_team(module: ir.Module, steps: list[Step], threads: int, state_of: Callable[[ir.IRBuilder, tuple, Step], ir.Value],
              timer_slots: int | None = None) -> ir.Function:
    """`hobbit_team(ctx, thread, job)`: ctx holds the entry's four tables; job is the
    runtime's job number (0: this thread runs alone and never waits). `state_of` gives a
    step's zeroed state in the arena (done count, then one claim bit per id)."""
    team = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name=TEAM)
    team.linkage = "internal"
    ctx, thread, job = team.args
    ctx.name, thread.name, job.name = "ctx", "thread", "job"
    kb = KernelBuilder(team)
    b = kb.b
    tables = tuple(b.load(b.gep(ctx, [kb.i64(i)], source_etype=PTR), typ=PTR) for i in range(4))
    pooled = b.icmp_unsigned("!=", job, kb.i64(0))
    worker = b.icmp_unsigned("!=", thread, kb.i64(0))
    timer = KernelTimer(module, b, timer_slots) if timer_slots else None
    for k, step in enumerate(steps):
        start = timer.now() if timer else None
        _claim_ids(kb, step, threads if step.parallel else 1, state_of(b, tables, step), tables, job, pooled, k)
        _after_step(kb, job, pooled, worker, k, last=k == len(steps) - 1)
        if timer:
            with b.if_then(b.not_(worker)):
                timer.add(step.first, start)
    kb.finish()
    return team


def _claim_ids(kb: KernelBuilder, step: Step, units: int, state: ir.Value, tables: tuple,
               job: ir.Value, pooled: ir.Value, k: int) -> None:
    """Claim the step's ids, this thread's own first, and run each claimed one; the id that
    completes the step publishes it (when there is a job to publish it to)."""
    b = kb.b
    thread = kb.fn.args[1]
    with kb.loop(0, units, name=f"step{k}.id") as j:
        v = b.urem(b.add(thread, j), kb.i64(units)) if units > 1 else kb.i64(0)
        word = b.gep(state, [b.add(kb.i64(1), b.lshr(v, kb.i64(6)))], source_etype=I64)
        bit = b.shl(kb.i64(1), b.and_(v, kb.i64(63)))
        seen = b.load_atomic(word, "monotonic", 8, typ=I64)
        with b.if_then(b.icmp_unsigned("==", b.and_(seen, bit), kb.i64(0))):
            old = b.atomic_rmw("or", word, bit, "acq_rel")
            with b.if_then(b.icmp_unsigned("==", b.and_(old, bit), kb.i64(0))):
                for call in step.calls:
                    b.call(call.fn, call.args(b, tables) + [v, kb.i64(units)])
                finished = b.add(b.atomic_rmw("add", state, kb.i64(1), "seq_cst"), kb.i64(1))
                with b.if_then(b.and_(pooled, b.icmp_unsigned("==", finished, kb.i64(units)))):
                    b.call(runtime_function(b.module, "hobbit_team_step"), [job, kb.i64(k + 1)])


def _after_step(kb: KernelBuilder, job: ir.Value, pooled: ir.Value, worker: ir.Value, k: int, last: bool) -> None:
    """In a team: a worker drops its reference, everyone waits for step k to be done, and a
    worker takes a new reference for step k + 1 (it returns when the job is over). After
    the last step a worker simply leaves; the caller waits for it to be done."""
    b = kb.b
    module = b.module
    with b.if_then(pooled):
        with b.if_then(worker):
            b.call(runtime_function(module, "hobbit_team_leave"), [])
            if last:
                b.ret_void()
        ok = b.call(runtime_function(module, "hobbit_team_wait"), [job, kb.i64(k + 1)])
        if last:
            return
        with b.if_then(b.not_(ok)):
            b.ret_void()
        with b.if_then(worker):
            entered = b.call(runtime_function(module, "hobbit_team_enter"), [job])
            with b.if_then(b.not_(entered)):
                b.ret_void()
