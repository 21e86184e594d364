"""`hobbit bench --kernels deepbench[:gemm|conv|rnn][:server|device]`: Baidu DeepBench's
inference problems (hobbit.bench.deepbench_shapes) as one-op models (hobbit.bench.kernel_models),
each timed in every configuration of CONFIGS at each thread count: hobbit's own schedules, the
same op as a plain loop nest (schedule="naive") after LLVM's O3 and after Polly at either of its
two places (loops="polly": where opt-22 puts it, before the vectoriser; "polly-early"), numpy's
BLAS (GEMM), onnxruntime, and where DeepBench runs int8, hobbit and onnxruntime on the int8 x int8
-> int32 model.

Every output is compared with onnxruntime's before anything is timed (fp32: rtol 1e-3 and atol
1e-4 scaled as hobbit.bench.result.TOLERANCE says; int8: exact, an int32 sum of products has one
right answer); a configuration whose outputs disagree is reported as such and not timed. The
configurations of one shape are timed in the same alternating rounds under a time budget
(hobbit.bench.kernel_timing). The rows go to hobbit.bench.kernel_report's tables, JSON and plot."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import onnx

import hobbit
from hobbit.bench import deepbench_shapes, kernel_models as km
from hobbit.bench.kernel_timing import budgeted_rounds, over_budget, warm_up
from hobbit.bench.loop_facts import LoopFacts, loop_facts
from hobbit.bench.ort import ort_session
from hobbit.bench.result import Timing
from hobbit.bench.suite import compare_outputs
from hobbit.backend.polly import opt_tool
from hobbit.errors import ConfigError, HobbitError, MissingDependencyError
from hobbit.runtime.peak import fma_peak, instruction_peak, missing

SUITE = "deepbench"
KINDS = ("gemm", "conv", "rnn")
SETS = ("server", "device")
# The set a spec without one runs: the device sets are 32 shapes, the server sets 251, whose
# largest GEMMs take a plain loop nest 100 s and more a run.
DEFAULT_SET = "device"
TABLES = {"gemm": deepbench_shapes.GEMM, "conv": deepbench_shapes.CONV, "rnn": deepbench_shapes.RNN}
# Where DeepBench itself runs int8 (hobbit.bench.deepbench_shapes): its NVIDIA inference (the
# server sets) is int8 x int8 -> int32 for GEMM and conv, its ARM device GEMMs are 8-bit
# (gemmlowp), its device convs fp32, and no RNN runs in int8.
INT8_ASKED = frozenset({("gemm", "server"), ("gemm", "device"), ("conv", "server")})
# Seconds of timed runs per configuration, shape and thread count, and the single run over which
# a configuration is not timed at all (CAP_FACTOR budgets: 10 s by default).
DEFAULT_BUDGET_S = 2.0
CAP_FACTOR = 5
# Constant weights above this are not built: a model proto cannot pass 2 GB, and each engine
# keeps a copy (the model, onnxruntime's, hobbit's packed one, numpy's): the server GEMMs of
# 1024 x 500000 hold 2.0 GB of float32 weights.
MAX_WEIGHT_BYTES = 2**30
INT8_PEAK = "vpdpbusd"

# The statuses of a Cell: timed, or why not. NOT_RUN: the configuration is not of this kind
# (numpy on a conv); SKIPPED: not for this shape (int8 where DeepBench runs fp32, weights too big).
OK, MISMATCH, OVER_BUDGET, FAILED, UNAVAILABLE, NOT_RUN, SKIPPED = "ok", "mismatch", "over budget", "failed", \
    "unavailable", "n/a", "not run"


@dataclass(frozen=True)
class KernelSpec:
    """What --kernels asked for: the kinds of problem, and DeepBench's server or device set."""

    kinds: tuple[str, ...]
    set: str

    def __str__(self) -> str:
        kinds = "" if self.kinds == KINDS else f":{self.kinds[0]}"
        return f"{SUITE}{kinds}:{self.set}"


def parse_spec(text: str) -> KernelSpec:
    """'deepbench', then optionally ':gemm', ':conv' or ':rnn' (default: all three) and ':server'
    or ':device' (default DEFAULT_SET), in either order; a ConfigError names what is wrong."""
    suite, *parts = [part.strip().lower() for part in text.split(":")]
    usage = f"expected {SUITE}[:{'|'.join(KINDS)}][:{'|'.join(SETS)}], e.g. {SUITE}:gemm:device"
    if suite != SUITE:
        raise ConfigError(f"--kernels {text!r}: unknown kernel suite {suite!r}; {usage}")
    kinds = [part for part in parts if part in KINDS]
    sets = [part for part in parts if part in SETS]
    unknown = [part for part in parts if part not in KINDS and part not in SETS]
    if unknown:
        raise ConfigError(f"--kernels {text!r}: {unknown[0]!r} is neither a kind ({', '.join(KINDS)}) nor a set "
                          f"({', '.join(SETS)}); {usage}")
    if len(kinds) > 1 or len(sets) > 1:
        raise ConfigError(f"--kernels {text!r}: give at most one kind and one set; {usage}")
    return KernelSpec(tuple(kinds) or KINDS, sets[0] if sets else DEFAULT_SET)


@dataclass(frozen=True)
class Config:
    """One column: an engine, the precision of its model, hobbit.compile's schedule= and loops=
    (None: the default, which every hobbit takes), and the kinds of problem it applies to."""

    name: str
    engine: str  # "hobbit", "numpy" or "onnxruntime"
    precision: str = "fp32"
    schedule: str | None = None
    loops: str | None = None
    kinds: tuple[str, ...] = KINDS

    def compile_options(self) -> dict[str, str]:
        return {key: value for key, value in (("schedule", self.schedule), ("loops", self.loops)) if value}


CONFIGS = (
    Config("hobbit", "hobbit"),
    Config("naive", "hobbit", schedule="naive"),
    Config("naive+polly", "hobbit", schedule="naive", loops="polly"),
    Config("naive+polly-early", "hobbit", schedule="naive", loops="polly-early"),
    Config("numpy", "numpy", kinds=("gemm",)),
    Config("onnxruntime", "onnxruntime"),
    Config("hobbit-int8", "hobbit", "int8", kinds=("gemm", "conv")),
    Config("onnxruntime-int8", "onnxruntime", "int8", kinds=("gemm", "conv")),
)
CONFIG_NAMES = {c.name: c for c in CONFIGS}


def parse_configs(text: str) -> tuple[str, ...]:
    """--configs 'hobbit,onnxruntime' -> the names, each of CONFIGS (order and duplicates as
    CONFIGS has them); a ConfigError lists the names."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in CONFIG_NAMES]
    if not names or unknown:
        raise ConfigError(f"--configs {text!r}: expected names from {', '.join(CONFIG_NAMES)} separated by commas")
    return tuple(c.name for c in CONFIGS if c.name in names)


def unavailable(config: Config) -> HobbitError | None:
    """Why `config` cannot run on this installation (the error to raise where it was asked for by
    name, the note of its column otherwise), or None."""
    if config.loops is not None:
        try:
            opt_tool()
        except MissingDependencyError as exc:
            return exc
    if config.engine == "numpy" and importlib.util.find_spec("threadpoolctl") is None:
        return MissingDependencyError("the numpy column sets its BLAS's threads with threadpoolctl: "
                                      "pip install 'hobbit[bench]'")
    return None


def select_configs(names: Sequence[str] | None) -> tuple[tuple[Config, ...], dict[str, str]]:
    """The configurations to time, and why each of the others cannot run here. `names` None:
    every configuration, those that cannot run shown as such; named ones must run (else their
    error is raised, before any benchmarking)."""
    chosen = CONFIGS if names is None else tuple(CONFIG_NAMES[name] for name in names)
    notes = {}
    for config in chosen:
        error = unavailable(config)
        if error is not None and names is not None:
            raise error
        if error is not None:
            notes[config.name] = str(error)
    return chosen, notes


@dataclass(frozen=True)
class Case:
    """One problem to time: its kind, DeepBench set, row index in that set, and shape."""

    kind: str
    set: str
    index: int
    shape: km.Shape


def sample(count: int, limit: int | None) -> list[int]:
    """Indices of `limit` rows spread evenly over `count` (every row without a limit): the first
    row, then every count/limit-th, so a sample of a server set covers its small and large shapes."""
    if limit is None or limit >= count:
        return list(range(count))
    return sorted({i * count // limit for i in range(limit)})


def cases_of(spec: KernelSpec, limit: int | None = None) -> list[Case]:
    """The problems of `spec`, `limit` of each kind where given (sample)."""
    cases = []
    for kind in spec.kinds:
        shapes = TABLES[kind][spec.set]
        cases += [Case(kind, spec.set, i, shapes[i]) for i in sample(len(shapes), limit)]
    return cases


@dataclass
class Cell:
    """One configuration on one shape and thread count: its status (OK, or why it has no timing),
    a note saying more, the timing (ms) and what follows from it."""

    config: str
    status: str
    note: str = ""
    timing: Timing | None = None
    runs: int = 0
    gflops: float | None = None  # flops over the median time (GOP/s for int8)
    gflops_p10_p90: tuple[float, float] | None = None  # at the p90 and p10 times: the spread
    peak_percent: float | None = None  # of the measured peak of the precision's instruction
    build_seconds: float | None = None  # hobbit's compile (cache off), onnxruntime's session
    max_abs_error: float | None = None  # against onnxruntime's output
    loops: LoopFacts | None = None  # what LLVM (and Polly) made of a hobbit kernel's loops


@dataclass
class KernelRow:
    """Every configuration on one DeepBench shape at one thread count."""

    kind: str
    set: str
    index: int
    shape: str  # kernel_models.describe
    flops: int
    threads: int
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass(frozen=True)
class Peaks:
    """The measured peaks at one thread count, GFLOP/s: float32 FMA, and int8 (vpdpbusd; None
    where this CPU has none, `int8_note` says why)."""

    fp32: float
    int8: float | None
    int8_note: str | None = None

    @classmethod
    def measure(cls, threads: int) -> Peaks:
        int8 = instruction_peak(INT8_PEAK, threads)
        return cls(fma_peak(threads).best, None if int8 is None else int8.best, missing(INT8_PEAK))

    def of(self, precision: str) -> float | None:
        return self.fp32 if precision == "fp32" else self.int8


@dataclass
class _Model:
    """One precision's model of a shape and its feeds."""

    proto: onnx.ModelProto
    feeds: dict[str, np.ndarray]


@dataclass
class _Ready:
    """An engine built and checked, waiting to be timed."""

    run: Callable[[], object]
    first_s: float
    build_s: float | None
    error: float | None
    loops: LoopFacts | None = None


class KernelBench:
    """The harness: `run(cases)` builds, checks and times every configuration of each case at each
    thread count, remembering each configuration's rate on the largest shape so far (to skip a
    later shape whose single run would pass the cap: _expected_rate)."""

    def __init__(self, configs: Sequence[Config], threads: Sequence[int], runs: int = 30, warmup: int = 3,
                 budget_s: float = DEFAULT_BUDGET_S, notes: dict[str, str] | None = None,
                 peaks: dict[int, Peaks] | None = None):
        self.configs = tuple(configs)
        self.threads = tuple(threads)
        self.runs, self.warmup, self.budget_s = runs, warmup, budget_s
        self.cap_s = CAP_FACTOR * budget_s
        self.notes = dict(notes or {})
        self.peaks = peaks if peaks is not None else {n: Peaks.measure(n) for n in self.threads}
        # (config, kind, threads) -> (flops, GFLOP/s) of the largest shape measured so far
        self._largest: dict[tuple[str, str, int], tuple[int, float]] = {}

    def run(self, cases: Sequence[Case], report: Callable[[KernelRow], None] | None = None) -> list[KernelRow]:
        """A row per case and thread count, in the order of `cases`. The cases are measured smallest
        first (by flops), so that when a large shape comes, each configuration's rate on the next
        smaller one says whether its single run would pass the cap: the largest shapes of a set are
        the ones a plain loop nest needs minutes for."""
        measured: dict[int, list[KernelRow]] = {}
        for i in sorted(range(len(cases)), key=lambda i: cases[i].shape.flops()):
            models = self._models(cases[i])
            measured[i] = []
            for threads in self.threads:
                row = self._row(cases[i], models, threads)
                measured[i].append(row)
                if report is not None:
                    report(row)
        return [row for i in range(len(cases)) for row in measured[i]]

    def _models(self, case: Case) -> dict[str, _Model | str]:
        """Per precision the model and feeds, or why there is none for this case."""
        shape = case.shape
        models: dict[str, _Model | str] = {}
        for precision in {c.precision for c in self.configs}:
            if precision == "int8" and (case.kind, case.set) not in INT8_ASKED:
                models[precision] = f"DeepBench runs {case.kind} {case.set} in fp32 only"
            elif precision == "int8" and not km.int8_supported(shape):
                models[precision] = "no int8 model of a transposed GEMM"
            elif km.weight_bytes(shape, 1 if precision == "int8" else 4) > MAX_WEIGHT_BYTES:
                size = km.weight_bytes(shape, 1 if precision == "int8" else 4) / 1e9
                models[precision] = f"{size:.1f} GB of weights, over the {MAX_WEIGHT_BYTES / 2**30:.0f} GiB cap"
            elif precision == "int8":
                models[precision] = _Model(km.int8_model(shape), {km.INPUT: km.int8_input(shape)})
            else:
                models[precision] = _Model(km.fp32_model(shape), {km.INPUT: km.fp32_input(shape)})
        return models

    def _row(self, case: Case, models: dict[str, _Model | str], threads: int) -> KernelRow:
        shape = case.shape
        row = KernelRow(case.kind, case.set, case.index, km.describe(shape), shape.flops(), threads)
        ready: dict[str, _Ready] = {}
        numpy = any(c.engine == "numpy" and c.name not in self.notes for c in self.configs)
        with _blas_threads(threads, numpy):
            for precision in ("fp32", "int8"):
                configs = [c for c in self.configs if c.precision == precision]
                if configs:
                    self._prepare(case, configs, models.get(precision), threads, row, ready)
            timed = budgeted_rounds({name: r.run for name, r in ready.items()}, self.runs, self.budget_s,
                                    {name: r.first_s for name, r in ready.items()})
        for name, seconds in timed.items():
            row.cells[name] = self._timed_cell(CONFIG_NAMES[name], row, ready[name], seconds)
        row.cells = {c.name: row.cells[c.name] for c in self.configs}
        return row

    def _prepare(self, case: Case, configs: list[Config], model: _Model | str | None, threads: int,
                 row: KernelRow, ready: dict[str, _Ready]) -> None:
        """Build and check one precision's configurations; those that can be timed go to `ready`,
        the others get their cell now."""
        for c in configs:
            if case.kind not in c.kinds:
                row.cells[c.name] = Cell(c.name, NOT_RUN, f"{c.name} runs {', '.join(c.kinds)} only")
            elif c.name in self.notes:
                row.cells[c.name] = Cell(c.name, UNAVAILABLE, self.notes[c.name])
            elif not isinstance(model, _Model):
                row.cells[c.name] = Cell(c.name, SKIPPED, model or "")
        todo = [c for c in configs if c.name not in row.cells]
        if not todo:
            return
        feeds = model.feeds
        try:
            start = time.perf_counter()
            session = ort_session(model.proto, threads)
            session_s = time.perf_counter() - start
            start = time.perf_counter()
            expected = session.run(None, feeds)
            reference_s = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001  (onnxruntime raises its own classes)
            for c in todo:
                row.cells[c.name] = Cell(c.name, FAILED, f"no reference: onnxruntime failed: {_brief(exc)}")
            return
        for c in todo:
            if c.engine == "onnxruntime":  # the reference itself: its first run was the check
                found: _Ready | Cell = _Ready(lambda: session.run(None, feeds), reference_s, session_s, None)
            else:
                found = self._build_and_check(c, case, model, threads, row.flops, expected)
            if isinstance(found, _Ready):
                found = self._admit(c, found, row, ready)
            if isinstance(found, Cell):
                row.cells[c.name] = found

    def _build_and_check(self, config: Config, case: Case, model: _Model, threads: int, flops: int,
                         expected: list[np.ndarray]) -> _Ready | Cell:
        """A hobbit or numpy configuration built and run once (its first warm-up) against
        onnxruntime's outputs, or the Cell that says why it is not timed: estimated over the cap,
        failed, or its outputs disagree."""
        rate = self._expected_rate(config.name, case.kind, threads)
        estimate = over_budget(flops, rate, self.cap_s)
        if estimate is not None:
            return Cell(config.name, OVER_BUDGET, f"about {estimate:.0f} s a run expected from its {rate:.2f} GFLOP/s "
                                                  f"so far, over the {self.cap_s:.0f} s cap")
        build_s = facts = None
        if config.engine == "numpy":
            run = _numpy_gemm(case.shape, model)
        else:
            start = time.perf_counter()
            try:
                compiled = hobbit.compile(model.proto, threads=threads, cache=False, progress=False,
                                          **config.compile_options())
            except Exception as exc:  # noqa: BLE001  (one failed configuration is a cell; the others go on)
                return Cell(config.name, FAILED, f"compile failed: {_brief(exc)}")
            build_s = time.perf_counter() - start
            facts = loop_facts(str(compiled.report.optimized))
            feeds = model.feeds
            run = (lambda: compiled.run(feeds))
        try:
            start = time.perf_counter()
            outputs = run()
            first_s = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001
            return Cell(config.name, FAILED, f"run failed: {_brief(exc)}", build_seconds=build_s)
        exact = config.precision == "int8"  # an int32 sum of int8 products has one right answer
        error, mismatch = compare_outputs(list(outputs), expected, [km.OUTPUT],
                                          *((0.0, 0.0) if exact else ()))
        if mismatch is not None:
            return Cell(config.name, MISMATCH, mismatch, build_seconds=build_s, max_abs_error=error)
        return _Ready(run, first_s, build_s, error, facts)

    def _admit(self, config: Config, found: _Ready, row: KernelRow, ready: dict[str, _Ready]) -> Cell | None:
        """Keep a checked engine for timing (after its warm-up), or the OVER_BUDGET Cell when its
        first run took longer than the cap; either way its first run's rate is remembered."""
        self._remember(config.name, row, row.flops / found.first_s / 1e9)
        if found.first_s > self.cap_s:
            return Cell(config.name, OVER_BUDGET,
                        f"one run took {found.first_s:.1f} s, over the {self.cap_s:.0f} s cap", runs=1,
                        build_seconds=found.build_s, max_abs_error=found.error, loops=found.loops)
        warm_up(found.run, self.warmup, found.first_s, self.budget_s)
        ready[config.name] = found
        return None

    def _expected_rate(self, name: str, kind: str, threads: int) -> float | None:
        """GFLOP/s to expect of configuration `name` on the next shape of `kind`: its rate on the
        largest earlier one at this thread count; else at another thread count, scaled as if it
        scaled perfectly with threads (optimistic, so it never skips what would fit); else None.
        The first shape of a kind thus runs unguarded once: the naive loop nest on the first
        server GEMM (14.7 GFLOP) took 61 s at one thread here, and the two-thread row is skipped."""
        known = self._largest.get((name, kind, threads))
        if known is not None:
            return known[1]
        others = [(flops, gflops * threads / n) for (config, k, n), (flops, gflops) in self._largest.items()
                  if config == name and k == kind]
        return max(others)[1] if others else None

    def _remember(self, name: str, row: KernelRow, gflops: float) -> None:
        """The rate of `name` on the largest shape so far at this thread count (over_budget's estimate)."""
        key = (name, row.kind, row.threads)
        if key not in self._largest or row.flops >= self._largest[key][0]:
            self._largest[key] = (row.flops, gflops)

    def _timed_cell(self, config: Config, row: KernelRow, found: _Ready, seconds: list[float]) -> Cell:
        timing = Timing.of(seconds)
        gflops = row.flops / (timing.median / 1e3) / 1e9
        self._remember(config.name, row, gflops)
        peak = self.peaks[row.threads].of(config.precision)
        return Cell(config.name, OK, timing=timing, runs=len(seconds), gflops=gflops,
                    gflops_p10_p90=(row.flops / (timing.p90 / 1e3) / 1e9, row.flops / (timing.p10 / 1e3) / 1e9),
                    peak_percent=None if peak is None else 100 * gflops / peak,
                    build_seconds=found.build_s, max_abs_error=found.error, loops=found.loops)


def _numpy_gemm(shape: km.GemmShape, model: _Model) -> Callable[[], list[np.ndarray]]:
    """np.matmul on the model's own input and weights (float32), transposed views where the Gemm
    transposes, as a numpy user writes it."""
    x, w = model.feeds[km.INPUT], km.weights_of(model.proto)
    a = x.T if shape.b_t else x
    b = w.T if shape.a_t else w
    return lambda: [np.matmul(a, b)]


def _blas_threads(threads: int, needed: bool) -> AbstractContextManager:
    """numpy's BLAS limited to `threads` threads while a row is measured (threadpoolctl: OpenBLAS,
    MKL or BLIS, whichever numpy loaded), so that the numpy column runs at the row's thread count;
    in-process, unlike OPENBLAS_NUM_THREADS, which a process reads once at start and which would
    take the numpy column out of the other configurations' alternating rounds."""
    if not needed:
        return nullcontext()
    import threadpoolctl  # unavailable() has checked it is installed
    return threadpoolctl.threadpool_limits(limits=threads, user_api="blas")


def _brief(exc: BaseException) -> str:
    """An exception as one short line for a table's note."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}{'...' if len(text) > 200 else ''}"
