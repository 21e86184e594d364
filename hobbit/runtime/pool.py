"""The thread runtime generated code runs on: hobbit's own worker pool.

Written in LLVM IR by hobbit and compiled once per process (for the JIT; an
exported library carries the same code), so it needs nothing beyond libc:
pthreads, the futex system call and clock_gettime. It implements RUNTIME_ABI
(hobbit.backend.cpu.parallel) for the team walk (hobbit.backend.cpu.team).

Why not OpenMP (libgomp, which hobbit used before): libgomp's threads spin for
milliseconds at every barrier before they sleep, so on a machine where another
process holds a core, or where two processes share the cores, the spinning
threads take the time the thread they wait for needs (SqueezeNet at 2 threads
ran 47-154 ms instead of 1.3 ms); its barriers wait for every thread to
arrive, even one that the host has descheduled and whose work was done by the
others; and a child made with fork() after the parent used its pool hangs.

What this pool does instead:
- One pool per process, started on first use with as many workers as a model's
  threads need (thread 0 is always the caller, which works too). The caller
  publishes a job (the team function and its context) and wakes sleeping
  workers; workers that join late are fine, they skip the steps already done.
- Waits are for a condition on memory: a check, a short spin with the CPU's
  pause hint, a longer one that yields the core to anyone who wants it, then
  sleeping on a futex-based event count (`event`, bumped by a notify that finds
  sleepers; `sleepers` lets a notify do nothing when nobody sleeps). So a
  waiter never takes a time slice that another thread on its core could use,
  and sleeps once the thread it waits for is plainly descheduled (see SPIN_NS).
- Lifetime: workers hold a reference on the job (`job`: number, open bit,
  count) only while inside a step; the caller closes the job after the last
  step and waits for the count to drop to zero before it returns, so nothing
  touches the inference's arena afterwards. Between steps workers wait on
  `progress` (job number, steps done), which is the pool's own memory.
- The team function is the model's own code, and a worker runs it between
  steps and after its last reference (returning from `leave`), so a model's
  machine code must outlive every worker inside it: `inside` counts the
  workers in a team function, and a JIT'd model unmaps its code only after
  `hobbit_pool_quiet` saw it at zero (`wait_until_idle`). Freeing a model
  while a descheduled worker was still on its way out of it was a SIGSEGV
  (compile, run and drop a model in a loop at threads=4 on 2 busy cores).
- Workers are kept off the CPU of the caller that publishes the job: the caller
  takes its CPU out of their affinity masks where there is a CPU for each thread
  (`place_workers`), and a worker woken onto it anyway moves itself to another
  CPU (`move_off_caller`). After the process idled (a service between requests)
  Linux puts most wakes there, where the worker waits milliseconds for a time
  slice and the pair runs at one thread's speed.
- A second caller while the pool is busy (another Python thread, another
  model) runs its inference alone on its own thread: correct at any number of
  participants, since every id of every step is claimed.
- fork(): a child has none of the parent's threads, so a pthread_atfork
  handler resets the pool in the child; its first parallel run starts new
  workers. Workers block all signals, so signals reach the threads that expect
  them (Python's main thread)."""

from __future__ import annotations

import ctypes.util
import threading
from collections.abc import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from hobbit.backend.llvm import optimize
from hobbit.target import Target
from hobbit.backend.machine import new_target_machine
from hobbit.errors import HobbitError
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.backend.cpu.parallel import RUNTIME_ABI, runtime_function

I32 = ir.IntType(32)
I8 = ir.IntType(8)
VOID = ir.VoidType()

# How a waiting thread spends its time, measured on SqueezeNet / MobileNetV2 / ResNet-18 at
# 2 threads (interleaved A/B, quiet, a busy-loop process on one core, two processes):
# - up to PAUSE_NS it spins with the CPU's pause hint: most waits between kernels are a few
#   microseconds of imbalance, over before a system call would return;
# - then up to SPIN_NS it spins calling sched_yield, which hands the core to any other
#   thread that wants it (another process, or a thread of the team that shares the core):
#   at threads=4 on 2 cores SqueezeNet ran 3.35 ms against 5.45 ms spinning without yields
#   and 3.99 ms sleeping after 100 us (and libgomp's 4.99 ms); quiet and under load the
#   spin length made no measurable difference between 100 us and 3 ms;
# - past SPIN_NS it sleeps on the futex until notified: the thread it waits for is
#   descheduled, and a sleeping waiter lets the scheduler move that thread to its core.
#   Sleeping has a price on a virtual machine (a wake-up took 75 us here), so it is the
#   last resort, not the first.
# A worker waiting for the next inference sleeps sooner (IDLE_SPIN_NS): Python's side of
# back-to-back run() calls is 20-50 us, and a worker that wakes late only misses the first
# pieces of work (the caller starts alone), so spinning longer there would only burn CPU.
PAUSE_NS = 20_000
SPIN_NS = 1_000_000
IDLE_SPIN_NS = 200_000

# The pool's fields: byte offsets into one global, the written-by-many ones on their own cache lines.
OWNER, WORKERS, WANT, FN, CTX, GEN, AT_FORK, CALLER_CPU, PLACED = 0, 4, 8, 16, 24, 32, 40, 44, 48
JOB, PROGRESS, EVENT, SLEEPERS, INSIDE = 64, 128, 192, 256, 320
POOL_BYTES = 384
FIELD_TYPES = {OWNER: I32, WORKERS: I32, WANT: I64, FN: I64, CTX: I64, GEN: I64, AT_FORK: I32, CALLER_CPU: I32,
               PLACED: I64, JOB: I64, PROGRESS: I64, EVENT: I32, SLEEPERS: I32, INSIDE: I32}
PLACED_WORKERS = 256  # workers whose thread handle is kept, so the caller can set where they run (place_workers)
OPEN = 1 << 31  # in `job`: the job takes new references
REFS = OPEN - 1

FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "riscv64": 98}
SIG_BLOCK, SIG_SETMASK = 0, 2
SIGSET_BYTES = 128
CPUSET_BYTES = 128  # glibc's cpu_set_t: 1024 CPUs
CPUSET = ir.ArrayType(I64, CPUSET_BYTES // 8)  # ... as 64-bit words
CLOCK_MONOTONIC = 1


class _Runtime:
    """Emits the runtime module: one method per function, all sharing the pool global."""

    def __init__(self, target: Target):
        arch = target.triple.split("-")[0]
        if arch not in SYS_FUTEX:
            raise HobbitError(f"hobbit's thread runtime does not support {target.triple} yet")
        self.arch = arch
        self.module = ir.Module(name="hobbit_runtime")
        self.module.triple = target.triple
        pool_type = ir.ArrayType(I8, POOL_BYTES)
        self.pool = ir.GlobalVariable(self.module, pool_type, name="hobbit_pool")
        self.pool.initializer = ir.Constant(pool_type, None)
        self.pool.align = 64
        self.pool.linkage = "internal"
        threads_type = ir.ArrayType(I64, PLACED_WORKERS)
        self.threads = ir.GlobalVariable(self.module, threads_type, name="hobbit_pool_threads")
        self.threads.initializer = ir.Constant(threads_type, None)
        self.threads.linkage = "internal"
        self.placed_mask = ir.GlobalVariable(self.module, CPUSET, name="hobbit_pool_placed_mask")
        self.placed_mask.initializer = ir.Constant(CPUSET, None)
        self.placed_mask.linkage = "internal"

    def field(self, b: ir.IRBuilder, offset: int) -> ir.Value:
        """A pointer to the pool field at `offset`, typed as the field (llvmlite checks it)."""
        at = b.gep(b.bitcast(self.pool, ir.PointerType(I8)), [ir.Constant(I64, offset)], source_etype=I8)
        return b.bitcast(at, ir.PointerType(FIELD_TYPES[offset]))

    def load(self, b: ir.IRBuilder, offset: int) -> ir.Value:
        """A sequentially consistent load of a field (pointers are kept as integers)."""
        ty = FIELD_TYPES[offset]
        return b.load_atomic(self.field(b, offset), "seq_cst", ty.width // 8, typ=ty)

    def store(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> None:
        """A sequentially consistent store (an exchange) of a field."""
        b.atomic_rmw("xchg", self.field(b, offset), value, "seq_cst")

    def libc(self, name: str, ret: ir.Type, args: list[ir.Type], var_arg: bool = False) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)

    def function(self, name: str, ret: ir.Type, args: list[ir.Type], internal: bool = True) -> KernelBuilder:
        if name in RUNTIME_ABI:
            fn = runtime_function(self.module, name)
        else:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        if internal:
            fn.linkage = "internal"
        return KernelBuilder(fn)

    # -- primitives ------------------------------------------------------------
    def emit_now(self) -> None:
        kb = self.function("now_ns", I64, [])
        b = kb.b
        ts = kb.alloca(ir.ArrayType(I64, 2))
        b.call(self.libc("clock_gettime", I32, [I32, PTR]), [ir.Constant(I32, CLOCK_MONOTONIC), ts])
        sec = b.load(b.gep(ts, [kb.i64(0), kb.i64(0)], source_etype=ts.allocated_type), typ=I64)
        nsec = b.load(b.gep(ts, [kb.i64(0), kb.i64(1)], source_etype=ts.allocated_type), typ=I64)
        b.ret(b.add(b.mul(sec, kb.i64(1_000_000_000)), nsec))
        kb.seal()

    def futex(self, b: ir.IRBuilder, op: int, value: ir.Value) -> None:
        """syscall(SYS_futex, &event, op, value, NULL, NULL, 0); every variadic argument is
        passed as a full register (syscall() reads each as a long)."""
        syscall = self.libc("syscall", I64, [I64], var_arg=True)
        event = b.ptrtoint(self.field(b, EVENT), I64)
        zero = ir.Constant(I64, 0)
        b.call(syscall, [ir.Constant(I64, SYS_FUTEX[self.arch]), event, ir.Constant(I64, op), value, zero, zero, zero])

    def cpu_word(self, b: ir.IRBuilder, mask: ir.Value, index: ir.Value) -> ir.Value:
        """A pointer to word `index` (an i64) of the CPUSET at `mask`."""
        return b.bitcast(b.gep(mask, [ir.Constant(I64, 0), index], source_etype=CPUSET), ir.PointerType(I64))

    def names_cpu(self, b: ir.IRBuilder, cpu: ir.Value) -> ir.Value:
        """Whether `cpu` (sched_getcpu's i32, -1 on error) has a bit in a CPUSET."""
        return b.and_(b.icmp_signed(">=", cpu, ir.Constant(I32, 0)),
                      b.icmp_signed("<", cpu, ir.Constant(I32, CPUSET_BYTES * 8)))

    def drop_cpu(self, b: ir.IRBuilder, mask: ir.Value, cpu: ir.Value) -> None:
        """Clear `cpu`'s bit in the CPUSET at `mask` (a CPU that names_cpu)."""
        at = b.zext(cpu, I64)
        word = self.cpu_word(b, mask, b.lshr(at, ir.Constant(I64, 6)))
        bit = b.shl(ir.Constant(I64, 1), b.and_(at, ir.Constant(I64, 63)))
        b.store(b.and_(b.load(word, typ=I64), b.xor(bit, ir.Constant(I64, -1))), word)

    def pause(self, b: ir.IRBuilder) -> None:
        """The spin-wait hint: lets the sibling hyper-thread run and saves power."""
        if self.arch == "x86_64":
            fn = self.libc("llvm.x86.sse2.pause", VOID, [])
            b.call(fn, [])
        elif self.arch == "aarch64":
            fn = self.libc("llvm.aarch64.hint", VOID, [I32])
            b.call(fn, [ir.Constant(I32, 1)])  # YIELD

    def emit_notify(self) -> None:
        """Wake every sleeper, if there is one: a waiter counts itself in `sleepers` before it
        reads the event count and checks its condition, and a notifier makes the condition
        true before it reads `sleepers` (all seq_cst), so either the waiter sees the
        condition or the notifier sees the waiter. With nobody asleep a notify is one read of
        a line that is rarely written: no cache line moves between cores."""
        kb = self.function("hobbit_notify", VOID, [], internal=False)
        b = kb.b
        sleepers = self.load(b, SLEEPERS)
        with b.if_then(b.icmp_unsigned("!=", sleepers, ir.Constant(I32, 0))):
            b.atomic_rmw("add", self.field(b, EVENT), ir.Constant(I32, 1), "seq_cst")
            self.futex(b, FUTEX_WAKE_PRIVATE, ir.Constant(I64, 0x7FFFFFFF))
        kb.finish()

    def wait(self, kb: KernelBuilder, done: Callable[[], ir.Value], name: str, spin_ns: int = SPIN_NS) -> None:
        """Emit: wait until done() (an i1 computed afresh at each check): check, spin (with
        sched_yield past PAUSE_NS) up to spin_ns, then sleep on the event count until a
        notify, and check again."""
        b = kb.b
        spin, clock, sleep, nap, out, begin, every = kb.blocks(name, "spin", "clock", "sleep", "nap", "done",
                                                               "begin", "every")
        count = kb.alloca(I64)
        start = kb.alloca(I64)
        b.cbranch(done(), out, begin)
        b.position_at_end(begin)
        b.store(b.call(self.module.globals["now_ns"], []), start)
        b.store(kb.i64(0), count)
        kb.enter(spin)
        self.pause(b)
        n = b.add(b.load(count, typ=I64), kb.i64(1))
        b.store(n, count)
        b.cbranch(done(), out, every)
        b.position_at_end(every)
        b.cbranch(b.icmp_unsigned("==", b.and_(n, kb.i64(63)), kb.i64(0)), clock, spin)
        b.position_at_end(clock)
        spent = b.sub(b.call(self.module.globals["now_ns"], []), b.load(start, typ=I64))
        polite, = kb.blocks(name, "polite")
        b.cbranch(b.icmp_signed(">", spent, kb.i64(spin_ns)), sleep, polite)
        b.position_at_end(polite)
        with b.if_then(b.icmp_signed(">", spent, kb.i64(PAUSE_NS))):
            b.call(self.libc("sched_yield", I32, []), [])
        b.branch(spin)
        b.position_at_end(sleep)
        b.atomic_rmw("add", self.field(b, SLEEPERS), ir.Constant(I32, 1), "seq_cst")
        seen = self.load(b, EVENT)
        awake, = kb.blocks(name, "awake")
        b.cbranch(done(), awake, nap)
        b.position_at_end(nap)
        self.futex(b, FUTEX_WAIT_PRIVATE, b.zext(seen, I64))
        b.atomic_rmw("sub", self.field(b, SLEEPERS), ir.Constant(I32, 1), "seq_cst")
        b.branch(sleep)
        b.position_at_end(awake)
        b.atomic_rmw("sub", self.field(b, SLEEPERS), ir.Constant(I32, 1), "seq_cst")
        b.branch(out)
        b.position_at_end(out)

    # -- the job protocol ------------------------------------------------------
    def emit_enter(self) -> None:
        kb = self.function("hobbit_team_enter", ir.IntType(1), [I64], internal=False)
        b, job = kb.b, kb.fn.args[0]
        head, take, no, yes = kb.blocks("enter", "try", "take", "no", "yes")
        kb.enter(head)
        word = self.load(b, JOB)
        open_ = b.and_(b.icmp_unsigned("==", b.lshr(word, kb.i64(32)), job),
                       b.icmp_unsigned("!=", b.and_(word, kb.i64(OPEN)), kb.i64(0)))
        b.cbranch(open_, take, no)
        b.position_at_end(take)
        swapped = b.cmpxchg(self.field(b, JOB), word, b.add(word, kb.i64(1)), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(swapped, 1), yes, head)
        b.position_at_end(no)
        b.ret(ir.Constant(ir.IntType(1), 0))
        b.position_at_end(yes)
        b.ret(ir.Constant(ir.IntType(1), 1))
        kb.seal()

    def emit_leave(self) -> None:
        """Drop a reference; once the job is closed the caller may be waiting for the last one."""
        kb = self.function("hobbit_team_leave", VOID, [], internal=False)
        b = kb.b
        after = b.sub(b.atomic_rmw("sub", self.field(b, JOB), kb.i64(1), "seq_cst"), kb.i64(1))
        with b.if_then(b.icmp_unsigned("==", b.and_(after, kb.i64(OPEN)), kb.i64(0))):
            b.call(self.module.globals["hobbit_notify"], [])
        kb.finish()

    def emit_step(self) -> None:
        kb = self.function("hobbit_team_step", VOID, [I64, I64], internal=False)
        b = kb.b
        job, steps = kb.fn.args
        self.store(b, b.or_(b.shl(job, kb.i64(32)), steps), PROGRESS)
        b.call(self.module.globals["hobbit_notify"], [])
        kb.finish()

    def emit_team_wait(self) -> None:
        """Wait until `steps` steps of job are done, or the job is no longer the pool's
        (false: a late worker, whose job finished and maybe another began)."""
        kb = self.function("hobbit_team_wait", ir.IntType(1), [I64, I64], internal=False)
        b = kb.b
        job, steps = kb.fn.args
        target = b.or_(b.shl(job, kb.i64(32)), steps)

        def reached() -> ir.Value:
            p = self.load(b, PROGRESS)
            return b.or_(b.icmp_unsigned("!=", b.lshr(p, kb.i64(32)), job), b.icmp_unsigned(">=", p, target))

        self.wait(kb, reached, "step")
        b.ret(b.icmp_unsigned("==", b.lshr(self.load(b, PROGRESS), kb.i64(32)), job))
        kb.seal()

    def emit_wait_at_least(self) -> None:
        kb = self.function("hobbit_wait_at_least", VOID, [PTR, I64], internal=False)
        b = kb.b
        word, target = kb.fn.args
        self.wait(kb, lambda: b.icmp_unsigned(">=", b.load_atomic(word, "acquire", 8, typ=I64), target), "count")
        kb.finish()

    # -- workers ---------------------------------------------------------------
    def emit_worker(self) -> None:
        """A worker's life: wait for a job number it has not seen, join the job (if the job
        wants this many workers and is still open), run the team function, repeat."""
        kb = self.function("hobbit_worker", PTR, [PTR])
        b = kb.b
        index = b.ptrtoint(kb.fn.args[0], I64)
        seen = kb.alloca(I64)
        b.store(kb.i64(0), seen)
        top, = kb.blocks("worker", "idle")
        kb.enter(top)
        self.wait(kb, lambda: b.icmp_unsigned("!=", b.lshr(self.load(b, PROGRESS), kb.i64(32)),
                                              b.load(seen, typ=I64)), "idle", IDLE_SPIN_NS)
        job = b.lshr(self.load(b, PROGRESS), kb.i64(32))
        b.store(job, seen)
        entered = b.call(self.module.globals["hobbit_team_enter"], [job])
        with b.if_then(entered):
            with b.if_else(b.icmp_unsigned(">", index, self.load(b, WANT))) as (extra, member):
                with extra:
                    b.call(self.module.globals["hobbit_team_leave"], [])
                with member:
                    b.call(self.module.globals["move_off_caller"], [])
                    b.atomic_rmw("add", self.field(b, INSIDE), ir.Constant(I32, 1), "seq_cst")
                    team = _callee(b.inttoptr(self.load(b, FN), PTR))
                    b.call(team, [b.inttoptr(self.load(b, CTX), PTR), index, job])
                    b.atomic_rmw("sub", self.field(b, INSIDE), ir.Constant(I32, 1), "seq_cst")
                    b.call(self.module.globals["hobbit_notify"], [])
        b.branch(top)
        kb.seal()

    def emit_move_off_caller(self) -> None:
        """If this worker runs on the CPU of the thread that published the job (place_workers
        keeps workers off it where there is a CPU for each; this covers the rest), move it to
        another CPU it may run on: exclude that CPU from its affinity (the kernel migrates a
        thread whose CPU leaves its mask before the call returns), then give the old mask back
        so the scheduler stays free to move it later.

        Why: Linux places a thread woken from a futex either on its previous CPU or on the
        waker's (wake_affine). After the process idled for 10 ms or more (a service between
        requests), the waker's CPU won 56-59 times in 60 here (a C test: futex wake after a
        sleep, 2-vCPU EPYC guest): the worker then shares the caller's CPU, the pair runs at
        one thread's speed (MobileNetV2 at 2 threads: 7.1 ms after 100 ms idle against
        3.6 ms back to back) until the load balancer separates them, later than most
        inferences end. A thread that shares a CPU with a foreign process instead still gets
        part of a core the caller could not use, so moving never loses."""
        kb = self.function("move_off_caller", VOID, [])
        b = kb.b
        cpu = b.call(self.libc("sched_getcpu", I32, []), [])
        with b.if_then(b.and_(b.icmp_signed("==", cpu, self.load(b, CALLER_CPU)), self.names_cpu(b, cpu))):
            old, fewer = kb.alloca(CPUSET), kb.alloca(CPUSET)
            get = self.libc("sched_getaffinity", I32, [I32, I64, PTR])
            put = self.libc("sched_setaffinity", I32, [I32, I64, PTR])
            me, size = ir.Constant(I32, 0), kb.i64(CPUSET_BYTES)
            got = b.call(get, [me, size, old])
            with b.if_then(b.icmp_signed("==", got, ir.Constant(I32, 0))):
                b.call(get, [me, size, fewer])
                self.drop_cpu(b, fewer, cpu)
                # refused (EINVAL) when the caller's CPU is the only one allowed: nothing moves
                b.call(put, [me, size, fewer])
                b.call(put, [me, size, old])
        kb.finish()

    def emit_place_workers(self) -> None:
        """Before a job is published, let the workers run where the caller may run except on
        the caller's CPU, when there is a CPU for each (threads <= the caller's CPUs); otherwise
        on all of the caller's CPUs. Done again only when the caller's CPU, its mask or the team
        changed since the last time (PLACED, placed_mask): back-to-back runs pay sched_getcpu,
        one sched_getaffinity and a compare.

        Why: a worker woken after the process idled lands on the waker's CPU (see
        move_off_caller) and waits there for a time slice before it can move. With the caller's
        CPU outside its mask the wake itself picks another CPU. Measured with a C test on a
        quiet 2-vCPU EPYC guest (a futex wake after the waker slept, the waker then busy 5 ms,
        40 wakes): after 100 ms idle the wake took 2.1 ms (median; 29 of 40 on the waker's CPU)
        with the full mask, 80 us with the caller's CPU excluded; after 10 ms, 2.8 ms (38 of 40)
        against 71 us; after 3 ms both 40 us. MobileNetV2 at 2 threads after 100 ms idle went
        from 1.38x to 1.14x of its back-to-back latency (SqueezeNet 1.27x to 1.14x; alternating
        processes, 12 rounds), and was unchanged with a busy-loop process on one core.
        Not done when threads exceed CPUs: confining three workers to one of two CPUs would
        leave the caller's CPU to the caller alone."""
        kb = self.function("place_workers", VOID, [I32, I64])
        b = kb.b
        cpu, want = kb.fn.args
        mask = kb.alloca(CPUSET)
        known, moved, done = kb.blocks("place", "known", "moved", "same")
        get = self.libc("sched_getaffinity", I32, [I32, I64, PTR])
        got = b.call(get, [ir.Constant(I32, 0), kb.i64(CPUSET_BYTES), mask])
        b.cbranch(b.icmp_signed("==", got, ir.Constant(I32, 0)), known, done)
        b.position_at_end(known)
        key = b.or_(b.shl(want, kb.i64(32)), b.zext(b.add(cpu, ir.Constant(I32, 1)), I64))
        differs = b.icmp_unsigned("!=", key, self.load(b, PLACED))
        popcount = self.libc("llvm.ctpop.i64", I64, [I64])
        cpus = kb.i64(0)
        bits = [b.load(self.cpu_word(b, mask, kb.i64(w)), typ=I64) for w in range(CPUSET_BYTES // 8)]
        for w, word in enumerate(bits):
            cpus = b.add(cpus, b.call(popcount, [word]))
            placed = b.load(self.cpu_word(b, self.placed_mask, kb.i64(w)), typ=I64)
            differs = b.or_(differs, b.icmp_unsigned("!=", word, placed))
        b.cbranch(differs, moved, done)
        b.position_at_end(moved)
        self.store(b, key, PLACED)
        for w, word in enumerate(bits):
            b.store(word, self.cpu_word(b, self.placed_mask, kb.i64(w)))
        with b.if_then(b.and_(self.names_cpu(b, cpu), b.icmp_signed("<", want, cpus))):
            self.drop_cpu(b, mask, cpu)
        workers = b.zext(self.load(b, WORKERS), I64)
        count = b.select(b.icmp_signed("<", workers, kb.i64(PLACED_WORKERS - 1)), workers, kb.i64(PLACED_WORKERS - 1))
        put = self.libc("pthread_setaffinity_np", I32, [I64, I64, PTR])
        with kb.loop(1, b.add(count, kb.i64(1)), name="worker") as index:
            slot = b.gep(self.threads, [kb.i64(0), index], source_etype=self.threads.value_type)
            handle = b.load(b.bitcast(slot, ir.PointerType(I64)), typ=I64)
            with b.if_then(b.icmp_unsigned("!=", handle, kb.i64(0))):
                b.call(put, [handle, kb.i64(CPUSET_BYTES), mask])
        b.branch(done)
        b.position_at_end(done)
        b.ret_void()
        kb.seal()

    def emit_spawn(self) -> None:
        """Start worker `index` with every signal blocked (it inherits the mask)."""
        kb = self.function("spawn_worker", ir.IntType(1), [I64])
        b = kb.b
        sigset = ir.ArrayType(I8, SIGSET_BYTES)
        full, old, handle = kb.alloca(sigset), kb.alloca(sigset), kb.alloca(I64)
        mask = self.libc("pthread_sigmask", I32, [I32, PTR, PTR])
        b.call(self.libc("sigfillset", I32, [PTR]), [full])
        b.call(mask, [ir.Constant(I32, SIG_BLOCK), full, old])
        create = self.libc("pthread_create", I32, [PTR, PTR, PTR, PTR])
        rc = b.call(create, [handle, ir.Constant(PTR, None), self.module.globals["hobbit_worker"],
                             b.inttoptr(kb.fn.args[0], PTR)])
        b.call(mask, [ir.Constant(I32, SIG_SETMASK), old, ir.Constant(PTR, None)])
        started = b.icmp_signed("==", rc, ir.Constant(I32, 0))
        with b.if_then(started):
            b.call(self.libc("pthread_detach", I32, [I64]), [b.load(handle, typ=I64)])
            index = kb.fn.args[0]
            with b.if_then(b.icmp_signed("<", index, kb.i64(PLACED_WORKERS))):
                slot = b.gep(self.threads, [kb.i64(0), index], source_etype=self.threads.value_type)
                b.store(b.load(handle, typ=I64), b.bitcast(slot, ir.PointerType(I64)))
                self.store(b, kb.i64(0), PLACED)
        b.ret(started)
        kb.seal()

    def emit_after_fork(self) -> None:
        """In a fork()ed child: no worker exists, and no job (the parent's state was copied)."""
        kb = self.function("hobbit_after_fork", VOID, [])
        b = kb.b
        for offset, ty in ((OWNER, I32), (WORKERS, I32), (WANT, I64), (PLACED, I64), (JOB, I64), (PROGRESS, I64),
                           (SLEEPERS, I32), (INSIDE, I32)):
            self.store(b, ir.Constant(ty, 0), offset)
        kb.finish()

    def emit_team_run(self) -> None:
        kb = self.function("hobbit_team_run", VOID, [PTR, PTR, I64], internal=False)
        b = kb.b
        team_pointer, ctx, threads = kb.fn.args
        team = _callee(team_pointer)
        alone, pooled = kb.blocks("run", "alone", "pooled")
        many = b.icmp_signed(">", threads, kb.i64(1))
        with b.if_then(many):
            got = b.cmpxchg(self.field(b, OWNER), ir.Constant(I32, 0), ir.Constant(I32, 1), "seq_cst", "seq_cst")
            b.cbranch(b.extract_value(got, 1), pooled, alone)
        b.branch(alone)
        b.position_at_end(alone)
        b.call(team, [ctx, kb.i64(0), kb.i64(0)])
        b.ret_void()

        b.position_at_end(pooled)
        with b.if_then(b.icmp_unsigned("==", self.load(b, AT_FORK), ir.Constant(I32, 0))):
            # glibc's pthread_atfork is a static stub calling this (no DSO handle: never unregistered)
            atfork = self.libc("__register_atfork", I32, [PTR, PTR, PTR, PTR])
            null = ir.Constant(PTR, None)
            b.call(atfork, [null, null, self.module.globals["hobbit_after_fork"], null])
            self.store(b, ir.Constant(I32, 1), AT_FORK)
        want = b.sub(threads, kb.i64(1))
        grow, spawn, grown = kb.blocks("run", "grow", "spawn", "grown")
        kb.enter(grow)
        workers = b.zext(self.load(b, WORKERS), I64)
        b.cbranch(b.icmp_signed("<", workers, want), spawn, grown)
        b.position_at_end(spawn)
        started = b.call(self.module.globals["spawn_worker"], [b.add(workers, kb.i64(1))])
        with b.if_then(started):
            self.store(b, b.trunc(b.add(workers, kb.i64(1)), I32), WORKERS)
        b.cbranch(started, grow, grown)
        b.position_at_end(grown)
        have = b.zext(self.load(b, WORKERS), I64)
        self.store(b, b.select(b.icmp_signed("<", have, want), have, want), WANT)
        job = b.and_(b.add(self.load(b, GEN), kb.i64(1)), kb.i64(0xFFFFFFFF))
        job = b.select(b.icmp_unsigned("==", job, kb.i64(0)), kb.i64(1), job)
        self.store(b, job, GEN)
        self.store(b, b.ptrtoint(team_pointer, I64), FN)
        self.store(b, b.ptrtoint(ctx, I64), CTX)
        cpu = b.call(self.libc("sched_getcpu", I32, []), [])
        self.store(b, cpu, CALLER_CPU)
        b.call(self.module.globals["place_workers"], [cpu, want])
        self.store(b, b.or_(b.shl(job, kb.i64(32)), kb.i64(OPEN)), JOB)
        self.store(b, b.shl(job, kb.i64(32)), PROGRESS)
        b.call(self.module.globals["hobbit_notify"], [])
        b.call(team, [ctx, kb.i64(0), job])
        b.atomic_rmw("and", self.field(b, JOB), kb.i64(~OPEN & 0xFFFFFFFFFFFFFFFF), "seq_cst")
        self.wait(kb, lambda: b.icmp_unsigned("==", b.and_(self.load(b, JOB), kb.i64(REFS)), kb.i64(0)), "close")
        self.store(b, ir.Constant(I32, 0), OWNER)
        b.ret_void()
        kb.seal()

    def emit_quiet(self) -> None:
        """Wait until no worker is inside a team function. A worker counts itself in `inside`
        while it holds a reference on the job, so once a model's runs have returned, a zero
        here means no worker will execute that model's code again."""
        kb = self.function(QUIET, VOID, [], internal=False)
        b = kb.b
        self.wait(kb, lambda: b.icmp_unsigned("==", self.load(b, INSIDE), ir.Constant(I32, 0)), "quiet")
        kb.finish()

    def build(self) -> ir.Module:
        self.emit_now()
        self.emit_notify()
        self.emit_enter()
        self.emit_leave()
        self.emit_step()
        self.emit_team_wait()
        self.emit_wait_at_least()
        self.emit_move_off_caller()
        self.emit_place_workers()
        self.emit_worker()
        self.emit_spawn()
        self.emit_after_fork()
        self.emit_team_run()
        self.emit_quiet()
        return self.module


QUIET = "hobbit_pool_quiet"
TEAM_TYPE = ir.FunctionType(VOID, [PTR, I64, I64])  # team(ctx, thread, job)


def _callee(pointer: ir.Value) -> ir.Value:
    """An opaque pointer to a team function, made callable by IRBuilder.call (which reads
    the function type from its callee)."""
    return _Callee(pointer)


class _Callee(ir.Value):
    def __init__(self, pointer: ir.Value):
        self.pointer = pointer
        self.type = PTR
        self.function_type = TEAM_TYPE

    def get_reference(self) -> str:
        return self.pointer.get_reference()


def runtime_module(target: Target) -> ir.Module:
    """The runtime's LLVM module for `target`."""
    return _Runtime(target).build()


_ENGINE: llvm.ExecutionEngine | None = None
_QUIET: Callable[[], None] | None = None
_LOCK = threading.Lock()


def load_runtime(target: Target) -> None:
    """JIT the runtime once per process and make its entry points visible to the modules
    JITted after it (MCJIT resolves their undefined symbols through add_symbol)."""
    global _ENGINE, _QUIET
    with _LOCK:
        if _ENGINE is not None:
            return
        libc = ctypes.util.find_library("c")
        if libc is None:
            raise HobbitError("the C library was not found: hobbit's thread runtime needs its pthreads and futex")
        llvm.load_library_permanently(libc)
        engine = llvm.create_mcjit_compiler(optimize(runtime_module(target), target, 2), new_target_machine(target, jit=True))
        engine.finalize_object()
        for name in RUNTIME_ABI:
            llvm.add_symbol(name, engine.get_function_address(name))
        _QUIET = ctypes.CFUNCTYPE(None)(engine.get_function_address(QUIET))
        _ENGINE = engine


def wait_until_idle() -> None:
    """Return once no pool worker is inside a team function (at once if the pool never ran):
    what must hold before a model's machine code is unmapped. ctypes lets go of the GIL
    for the wait, which lasts until the workers of the last run leave it (microseconds)
    or until another thread's run in progress ends."""
    if _QUIET is not None:
        _QUIET()
