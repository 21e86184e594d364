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
from hobbit.emit.builder import I1, I64, PTR, KernelBuilder
from hobbit.backend.cpu.parallel import runtime_function

TEAM = "hobbit_team"

ArgsFn = Callable[[ir.IRBuilder, tuple], list[ir.Value]]  # (builder, entry tables) -> a kernel's pointers


@dataclass
class KernelCall:
    node: Node
    fn: ir.Function
    parallel: bool  # the kernel shares its work (one call per id) or runs as one call
    args: ArgsFn
    body: ir.Function | None = None  # the body fn forwards to, where fn is a node's wrapper of a shared one


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


# Steps per function of the team walk. One function for every step grew with the model
# (NASNetMobile: 42,000 instructions, 8.4 s of LLVM on one thread at the end of its compile,
# LoopRotate alone 2.7 s); in functions of this many steps each is optimised alone, and on
# LLVM's threads with the kernels (ChunkDone).
CHUNK_STEPS = 16

# on_chunk(function, steps): a function of the team walk is finished (hobbit.backend.cpu.module
# hands it to LLVM's threads where it may)
ChunkDone = Callable[[ir.Function, list[Step]], None]


def emit_team(module: ir.Module, steps: list[Step], threads: int, state_of: Callable[[ir.IRBuilder, tuple, Step], ir.Value],
              timer_slots: int | None = None, on_chunk: ChunkDone | None = None) -> ir.Function:
    """`hobbit_team(ctx, thread, job)`: ctx holds the entry's four tables; job is the
    runtime's job number (0: this thread runs alone and never waits). `state_of` gives a
    step's zeroed state in the arena (done count, then one claim bit per id).

    It calls the steps' functions in turn, CHUNK_STEPS steps each (every step in one where
    the steps are timed: the profile's counters and clock are the one function's), each
    answering whether this thread goes on (a worker leaves when the job is over)."""
    team = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name=TEAM)
    team.linkage = "internal"
    for arg, name in zip(team.args, ("ctx", "thread", "job")):
        arg.name = name
    kb = KernelBuilder(team)
    size = len(steps) if timer_slots else CHUNK_STEPS
    for first in range(0, len(steps), size):
        chunk = _emit_chunk(module, steps, first, min(first + size, len(steps)), threads, state_of, timer_slots)
        if on_chunk is not None:
            on_chunk(chunk, steps[first:first + size])
        with kb.b.if_then(kb.b.not_(kb.b.call(chunk, list(team.args)))):
            kb.b.ret_void()
    kb.finish()
    return team


def _emit_chunk(module: ir.Module, steps: list[Step], first: int, end: int, threads: int,
                state_of: Callable[[ir.IRBuilder, tuple, Step], ir.Value], timer_slots: int | None) -> ir.Function:
    """Steps first .. end - 1 of the team walk as `hobbit_team.FIRST(ctx, thread, job)`, which
    returns false where the thread leaves the walk. Never inlined into hobbit_team: that
    would make the one large function again."""
    chunk = ir.Function(module, ir.FunctionType(I1, [PTR, I64, I64]), name=f"{TEAM}.{first}")
    chunk.linkage = "internal"
    chunk.attributes.add("noinline")
    ctx, thread, job = chunk.args
    ctx.name, thread.name, job.name = "ctx", "thread", "job"
    kb = KernelBuilder(chunk)
    b = kb.b
    tables = tuple(b.load(b.gep(ctx, [kb.i64(i)], source_etype=PTR), typ=PTR) for i in range(4))
    pooled = b.icmp_unsigned("!=", job, kb.i64(0))
    worker = b.icmp_unsigned("!=", thread, kb.i64(0))
    timer = KernelTimer(module, b, timer_slots) if timer_slots else None
    for k in range(first, end):
        step = steps[k]
        start = timer.now() if timer else None
        _claim_ids(kb, step, threads if step.parallel else 1, state_of(b, tables, step), tables, job, pooled, k)
        _after_step(kb, job, pooled, worker, k, last=k == len(steps) - 1)
        if timer:
            with b.if_then(b.not_(worker)):
                timer.add(step.first, start)
    b.ret(ir.Constant(I1, 1))
    kb.seal()
    return chunk


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
                b.ret(ir.Constant(I1, 0))
        ok = b.call(runtime_function(module, "hobbit_team_wait"), [job, kb.i64(k + 1)])
        if last:
            return
        with b.if_then(b.not_(ok)):
            b.ret(ir.Constant(I1, 0))
        with b.if_then(worker):
            entered = b.call(runtime_function(module, "hobbit_team_enter"), [job])
            with b.if_then(b.not_(entered)):
                b.ret(ir.Constant(I1, 0))
