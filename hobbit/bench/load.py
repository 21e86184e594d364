"""Load conditions for `hobbit bench`: a busy core beside the engines, two processes
running the model at once, several Python threads sharing one compiled model, and
the other thread pools of the same process (numpy's BLAS, the other engine's).

DESIGN.md promises speed "on a busy machine as on an idle one"; an idle-machine
benchmark cannot show that. Every condition here times both engines under the
same load, in the same alternating rounds as the plain benchmark (hobbit's runs,
a pause, onnxruntime's runs, ...; alternate makes each round one run and drops the
pause), and every runner that goes concurrent meets the others at a barrier before
each round so the rounds overlap. Anything started here is stopped here, also on
errors and Ctrl-C: a leftover busy loop would skew every later measurement on the
machine."""

from __future__ import annotations

import multiprocessing
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from hobbit.bench import sporadic
from hobbit.bench.ort import ort_session
from hobbit.errors import HobbitError
from hobbit.target import Target, cpu_target, host_target, parse_target

# Engines alternate in short blocks with a pause between them: both keep their
# worker threads spinning for a while after a run, and a spinning team steals a
# core from the other engine if it starts at once (seen as 2x at 2 threads).
BLOCK = 5
COOLDOWN_S = 0.05
# How long a runner waits for the others at a round's start before giving up (a
# partner that died or hangs must not hang the benchmark).
BARRIER_TIMEOUT_S = 300.0
POLL_S = 0.5  # how often the parent of the two-procs workers checks that they are still alive
# The blas load's matrices: OpenBLAS runs a product on one thread up to m*n*k = 2**18 and
# on all its threads above that; 384**3 is far above, yet is only about 1.5 ms of one
# core's work (a Skylake-X core), short next to most models' runs.
BLAS_SIZE = 384

Engine = Callable[[], list[np.ndarray]]
# The engine name of the onnxruntime session whose intra-op threads do not spin (hobbit.bench.ort.NO_SPIN),
# timed beside the default session wherever a load table reports it.
NO_SPIN_ENGINE = "onnxruntime-nospin"

# What each measurement runs beside (the --load choices, then the --streams mode), for the reports;
# the sporadic conditions gaps:MS and poisson:RATE are hobbit.bench.sporadic's.
LOADS = {
    "none": "nothing else of ours runs",
    "busy-core": "a busy-loop process pinned to CPU {cpu} (the last CPU this process may use) runs throughout",
    "two-procs": "two processes each run the model at once, with the same thread count; latencies of both, "
                 "inferences/s summed over the two",
    "blas": f"right before every timed run of either engine, an untimed numpy float32 {BLAS_SIZE}x{BLAS_SIZE} "
            f"matrix product, which numpy's BLAS (OpenBLAS in numpy's wheels) splits over all its threads: they "
            f"are still spinning when the run starts",
    "alternate": "single runs of the two engines alternate with no pause (hobbit, onnxruntime, hobbit, ...), "
                 "so each starts while the other's threads may still spin",
}
STREAMS = ("{streams} Python threads run inferences at once on one model: one hobbit compile with threads=1, "
           "one onnxruntime session with intra_op_num_threads=1")
MODES = (*LOADS, "streams")


@dataclass(frozen=True)
class BuildOptions:
    """What every hobbit.compile of one benchmark gets besides the model and thread count: the
    pass pipeline (None: the default one), the target, the schedule and the loop optimiser
    (hobbit.compile's `schedule` and `loops`). One object, so that the engines of
    the benchmark's process, the two-procs workers (given it pickled) and the memory children
    (given kwargs() as JSON) all time the same code. The target is kept as a spec string,
    "host" or "TRIPLE:CPU[:FEATURE CHANGES]" (`spec_of`), which pickles, goes through JSON and
    parses back to the same Target."""

    passes: tuple[str, ...] | None = None
    target: str = "host"
    schedule: str = "auto"
    loops: str = "llvm"

    @classmethod
    def of(cls, passes: Sequence[str] | None = None, target: Target | str = "host", schedule: str = "auto",
           loops: str = "llvm") -> BuildOptions:
        return cls(None if passes is None else tuple(passes), spec_of(parse_target(target)), schedule, loops)

    def kwargs(self) -> dict[str, object]:
        """hobbit.compile's keyword arguments for these options, JSON-ready."""
        return {"passes": None if self.passes is None else list(self.passes), "target": self.target,
                "schedule": self.schedule, "loops": self.loops}

    @property
    def built_for(self) -> Target | None:
        """The target the code is built for when it is not this host, else None."""
        return None if self.target == "host" else parse_target(self.target)


def spec_of(target: Target) -> str:
    """The shortest spec that parse_target turns back into `target`: "host" for this machine,
    else its triple and CPU, and the feature changes against that CPU's own features."""
    if target == host_target():
        return "host"
    own = set(cpu_target(target.triple, target.cpu).features.split(","))
    changes = [item for item in target.features.split(",") if item and item not in own]
    return f"{target.triple}:{target.cpu}" + (f":{','.join(changes)}" if changes else "")


def describe_mode(mode: str, streams: int = 1) -> str:
    """The one-line description of a load condition, a sporadic one (hobbit.bench.sporadic) or
    the streams mode, for report headers."""
    if mode == "streams":
        return STREAMS.format(streams=streams)
    if sporadic.is_sporadic(mode):
        return sporadic.describe(mode)
    return LOADS[mode].format(cpu=busy_cpu()) if mode == "busy-core" else LOADS[mode]


def mode_key(mode: str) -> tuple[int, float]:
    """Where results of `mode` go in the reports: LOADS in order, then gaps:MS by MS, then
    poisson:RATE by rate, then streams."""
    parsed = sporadic.condition(mode)
    if parsed is not None:
        kind, value = parsed
        return len(LOADS) + list(sporadic.KINDS).index(kind), value
    return (len(LOADS) + len(sporadic.KINDS), 0.0) if mode == "streams" else (list(LOADS).index(mode), 0.0)


# The busy loop checks every few million iterations that the benchmark that started
# it is still alive, so even a benchmark killed with SIGKILL leaves no spinning core.
_SPIN = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(2_000_000):
        pass
"""


def busy_cpu() -> int:
    """The CPU the busy-core load spins on: the last one this process may run on."""
    if not hasattr(os, "sched_getaffinity"):
        raise HobbitError("--load busy-core needs CPU affinity (os.sched_setaffinity), which this OS lacks")
    return max(os.sched_getaffinity(0))


@contextmanager
def busy_core() -> Iterator[subprocess.Popen]:
    """A process spinning on one CPU (busy_cpu()) for the duration of the block.

    It stands for the other work of a shared machine: a core that is not ours for
    a while. It is killed and reaped when the block ends, however it ends."""
    cpu = busy_cpu()
    proc = subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())], stdin=subprocess.DEVNULL)
    try:
        os.sched_setaffinity(proc.pid, {cpu})
        yield proc
    finally:
        proc.kill()
        proc.wait()


def blas_product() -> Callable[[], None]:
    """The blas load: a function that computes one BLAS_SIZE float32 matrix product in place.

    Applications run numpy beside the model (pre- and post-processing), and numpy's
    OpenBLAS keeps its threads spinning for a while after each product: on a machine
    with no spare cores they take the cores that the engine's threads need. The
    first product runs here, so OpenBLAS starts its threads before any timed run."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((BLAS_SIZE, BLAS_SIZE), dtype=np.float32)
    b = rng.standard_normal((BLAS_SIZE, BLAS_SIZE), dtype=np.float32)
    out = np.empty((BLAS_SIZE, BLAS_SIZE), np.float32)

    def product() -> None:
        np.matmul(a, b, out=out)

    product()
    return product


@dataclass
class Samples:
    """One runner's timed runs of one engine: seconds per run, (start, end) of each round,
    and the outputs of its last run (to check that concurrent runs still compute right)."""

    seconds: list[float] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)
    last: list[np.ndarray] = field(default_factory=list)


def timed_rounds(engines: dict[str, Engine], runs: int, warmup: int, barrier: Any, block: int = BLOCK,
                 cooldown: float = COOLDOWN_S, before: Callable[[], object] | None = None) -> dict[str, Samples]:
    """Warm up every engine, then time `runs` runs of each in alternating rounds of `block`
    runs, each round after a `cooldown` pause; `before`, when given, runs untimed right
    before every timed run (the load that the run is to meet).

    Each round starts when every runner sharing `barrier` has reached it, so
    concurrent runners time the same engine at the same moment. A lone runner
    passes a one-party barrier; with the defaults this is the plain benchmark's loop."""
    for engine in engines.values():
        for _ in range(warmup):
            engine()
    samples = {name: Samples() for name in engines}
    done = 0
    while done < runs:
        count = min(block, runs - done)
        for name, engine in engines.items():
            if cooldown:
                time.sleep(cooldown)
            barrier.wait(BARRIER_TIMEOUT_S)
            s = samples[name]
            untimed = 0.0  # seconds spent in `before`, left out of the round's wall time
            start = time.perf_counter()
            for _ in range(count):
                if before is not None:
                    b0 = time.perf_counter()
                    before()
                    untimed += time.perf_counter() - b0
                t0 = time.perf_counter()
                s.last = engine()
                s.seconds.append(time.perf_counter() - t0)
            s.windows.append((start + untimed, time.perf_counter()))
        done += count
    return samples


def run_in_process(load: str, engines: dict[str, Engine], runs: int, warmup: int) -> dict[str, Samples]:
    """Time both engines in this process under `load`: any of LOADS but two-procs, which needs
    processes of its own (run_two_procs)."""
    alone = threading.Barrier(1)
    if load == "none":
        return timed_rounds(engines, runs, warmup, alone)
    if load == "busy-core":
        with busy_core():
            return timed_rounds(engines, runs, warmup, alone)
    if load == "blas":
        return timed_rounds(engines, runs, warmup, alone, before=blas_product())
    if load == "alternate":
        return timed_rounds(engines, runs, warmup, alone, block=1, cooldown=0.0)
    raise HobbitError(f"load condition {load!r} does not run in the benchmark's own process")


@dataclass
class Measured:
    """One engine over all runners: every run's seconds, inferences per second over the
    rounds' wall time (first start to last end, summed over rounds), each runner's last outputs."""

    seconds: list[float]
    per_second: float
    last: list[list[np.ndarray]]


def combine(runners: list[dict[str, Samples]], batch: int) -> dict[str, Measured]:
    """Pool the runners' samples per engine; the runners' rounds line up by index.

    A round's wall time runs from the first runner's start to the last runner's
    end, so a slow runner counts against its engine's throughput."""
    combined = {}
    for name in runners[0]:
        seconds = [t for r in runners for t in r[name].seconds]
        wall = sum(max(end for _, end in ws) - min(start for start, _ in ws)
                   for ws in zip(*(r[name].windows for r in runners)))
        combined[name] = Measured(seconds, batch * len(seconds) / wall, [r[name].last for r in runners])
    return combined


# -- several Python threads on one model -------------------------------------------------
def run_streams(engines: dict[str, Engine], streams: int, runs: int, warmup: int, batch: int) -> dict[str, Measured]:
    """`streams` Python threads, each timing `runs` runs of every engine concurrently.

    The engines are shared: one compiled hobbit model (CompiledModel.run releases
    the GIL and gives each thread its own arena) and one onnxruntime session
    (whose run is thread-safe), the way a server runs one model for many requests."""
    barrier = threading.Barrier(streams)
    results: list[dict[str, Samples] | None] = [None] * streams
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            results[index] = timed_rounds(engines, runs, warmup, barrier)
        except BaseException as exc:  # reported below, in the calling thread
            barrier.abort()
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,), name=f"bench-stream-{i}", daemon=True)
               for i in range(streams)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    except BaseException:
        barrier.abort()  # Ctrl-C: the streams stop at their next round
        raise
    if errors:  # the other streams of a failed one fail at the barrier: name the cause
        cause = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        raise HobbitError(f"a benchmark stream failed: {cause!r}") from cause
    return combine(results, batch)


# -- two processes at once -----------------------------------------------------------------
def _worker(index: int, model_path: str, threads: int, build: BuildOptions, feeds: dict[str, np.ndarray],
            names: list[str], runs: int, warmup: int, no_spin: bool, barrier: Any, results: Any) -> None:
    """One of the two-procs processes: compile the engines (with `no_spin`, also the onnxruntime
    session that does not spin), then time them in step with the other.

    Worker 1 compiles after worker 0, so it finds worker 0's code in the compile cache."""
    try:
        import hobbit

        if index == 1:
            barrier.wait(BARRIER_TIMEOUT_S)
        compiled = hobbit.compile(model_path, threads=threads, **build.kwargs())
        if index == 0:
            barrier.wait(BARRIER_TIMEOUT_S)
        session = ort_session(model_path, threads)
        engines = {"hobbit": lambda: compiled.run(feeds), "onnxruntime": lambda: session.run(names, feeds)}
        if no_spin:
            quiet = ort_session(model_path, threads, spinning=False)
            engines[NO_SPIN_ENGINE] = lambda: quiet.run(names, feeds)
        results.put((index, timed_rounds(engines, runs, warmup, barrier)))
    except BaseException as exc:  # the parent raises it; the partner must not wait for us
        barrier.abort()
        results.put((index, f"{type(exc).__name__}: {exc}"))


def run_two_procs(model: onnx.ModelProto | str | os.PathLike, threads: int, build: BuildOptions,
                  feeds: dict[str, np.ndarray], names: list[str], runs: int, warmup: int,
                  batch: int, no_spin: bool = False) -> dict[str, Measured]:
    """Two processes ("spawn": nothing inherited from this one) each run the model with
    `threads` threads, built with `build`, at the same time as the other: hobbit in both, then onnxruntime in
    both (then, with `no_spin`, onnxruntime without spinning in both), round after round. The processes are stopped and reaped however this ends.
    They load the model from a file: a ModelProto is saved to a temporary one first."""
    if not isinstance(model, onnx.ModelProto):
        return _two_procs(os.fspath(model), threads, build, feeds, names, runs, warmup, batch, no_spin)
    with tempfile.TemporaryDirectory(prefix="hobbit-bench-") as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        return _two_procs(path, threads, build, feeds, names, runs, warmup, batch, no_spin)


def _two_procs(model_path: str, threads: int, build: BuildOptions, feeds: dict[str, np.ndarray],
               names: list[str], runs: int, warmup: int, batch: int, no_spin: bool) -> dict[str, Measured]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, name=f"bench-proc-{i}", daemon=True,
                         args=(i, model_path, threads, build, feeds, names, runs, warmup, no_spin, barrier, results))
             for i in range(2)]
    try:
        for p in procs:
            p.start()
        reports: dict[int, Any] = {}
        while len(reports) < len(procs):
            # Checked before waiting: a worker gone by then has nothing more to send if the wait finds nothing.
            gone = [p for i, p in enumerate(procs) if p.exitcode is not None and i not in reports]
            try:
                index, report = results.get(timeout=POLL_S)
            except queue.Empty:
                if gone:
                    raise HobbitError(f"two-procs worker {gone[0].name} exited (status {gone[0].exitcode}) "
                                      f"without a report")
                continue
            reports[index] = report
        errors = [f"worker {i}: {r}" for i, r in sorted(reports.items()) if isinstance(r, str)]
        if errors:  # the partner of a failed worker fails too, at the barrier: name the cause first
            errors.sort(key=lambda e: "BrokenBarrierError" in e)
            raise HobbitError(f"a two-procs worker failed: {errors[0]}")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
        results.close()
    return combine([reports[i] for i in sorted(reports)], batch)
