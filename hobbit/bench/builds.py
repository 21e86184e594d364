"""`hobbit bench --builds auto,naive,naive+polly,...`: one model compiled several ways, timed in
one run.

A build is a schedule and a loop optimiser (hobbit.compile's `schedule` and `loops`): "auto" is
hobbit's default, "naive" the plain loop nests (hobbit.backend.cpu.naive), "+polly" and
"+polly-early" add Polly (hobbit.backend.polly). This answers issue 31's whole-model question:
do Polly's schedules of the naive nests come near hobbit's own on real networks, and at what
compile time? Every build's outputs are checked against onnxruntime first (a build that
disagrees is reported, not timed), then the builds and onnxruntime run in alternating rounds, so
that a change in the machine's load falls on all of them alike.

The naive builds of a large CNN take seconds per inference, so each engine stops once its runs
add up to a time budget (hobbit.bench.kernel_timing), after at least three: the table says how
many ran."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import hobbit
from hobbit.bench.kernel_timing import budgeted_rounds
from hobbit.bench.ort import ort_session
from hobbit.bench.suite import compare_outputs, random_inputs
from hobbit.errors import ConfigError
from hobbit.frontend.common.source import ModelInput

SCHEDULES = ("auto", "naive")
LOOPS = ("polly", "polly-early")


@dataclass(frozen=True)
class Build:
    """One way to compile: hobbit.compile's schedule and loops."""

    schedule: str = "auto"
    loops: str = "llvm"

    @property
    def label(self) -> str:
        return self.schedule if self.loops == "llvm" else f"{self.schedule}+{self.loops}"


def parse_builds(text: str) -> list[Build]:
    """"auto,naive,naive+polly,naive+polly-early" -> Builds (each SCHEDULE[+polly|+polly-early]),
    the first being the one the others are compared with; a ConfigError names a bad one."""
    builds = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        schedule, _, loops = word.partition("+")
        if schedule not in SCHEDULES or (loops and loops not in LOOPS):
            raise ConfigError(f"--builds: {word!r} is not SCHEDULE[+LOOPS] with SCHEDULE one of "
                              f"{', '.join(SCHEDULES)} and LOOPS one of {', '.join(LOOPS)} (e.g. auto,naive+polly)")
        builds.append(Build(schedule, loops or "llvm"))
    if len(builds) < 2 or len(set(builds)) != len(builds):
        raise ConfigError(f"--builds needs two or more different builds to compare; got {text!r}")
    return builds


@dataclass
class BuildTiming:
    """One build of one model at one thread count (or onnxruntime's session: no compile time)."""

    model: str
    threads: int
    label: str
    compile_seconds: float | None
    mismatch: str | None = None
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return float(np.median(self.times)) if self.times else None

    def spread(self) -> tuple[float, float] | None:
        """The 10th and 90th percentiles of the times."""
        return (float(np.percentile(self.times, 10)), float(np.percentile(self.times, 90))) if self.times else None


def compare_builds(model: ModelInput, name: str, builds: list[Build], threads: int, runs: int = 10,
                   budget_s: float = 30.0, seed: int = 0) -> list[BuildTiming]:
    """Each build compiled (no compile cache: its time is reported) and checked against
    onnxruntime, then every build that agrees and onnxruntime timed in alternating rounds of up to
    `runs` runs each, each stopping once its runs add up to `budget_s` (hobbit.bench.kernel_timing:
    a naive ResNet-50 takes seconds a run). The last entry is onnxruntime's."""
    session = ort_session(model, threads)
    timings: dict[str, BuildTiming] = {}
    engines: dict[str, Callable[[], object]] = {}
    first_s: dict[str, float] = {}
    feeds = names = expected = None
    for build in builds:
        t0 = time.perf_counter()
        compiled = hobbit.compile(model, threads=threads, schedule=build.schedule, loops=build.loops, cache=False)
        timing = timings[build.label] = BuildTiming(name, threads, build.label, time.perf_counter() - t0)
        if feeds is None:
            feeds = random_inputs(compiled.inputs, seed)
            names = list(compiled.output_names)
            expected = session.run(names, feeds)
        t0 = time.perf_counter()
        outputs = compiled.run(feeds)
        first_s[build.label] = time.perf_counter() - t0
        timing.mismatch = compare_outputs(outputs, expected, names)[1]
        if timing.mismatch is None:
            engines[build.label] = lambda c=compiled: c.run(feeds)
    timings["onnxruntime"] = BuildTiming(name, threads, "onnxruntime", None)
    engines["onnxruntime"] = lambda: session.run(names, feeds)
    t0 = time.perf_counter()
    session.run(names, feeds)
    first_s["onnxruntime"] = time.perf_counter() - t0
    for label, seconds in budgeted_rounds(engines, runs, budget_s, first_s).items():
        timings[label].times = seconds
    return list(timings.values())


def markdown(results: list[BuildTiming]) -> str:
    """Per model and thread count: each build's compile time, median latency with its p10-p90,
    the runs timed, and its time over the first build's and over onnxruntime's."""
    lines = ["| model | threads | build | compile s | median ms | p10-p90 ms | runs | / first build | / onnxruntime |",
             "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, int], list[BuildTiming]] = {}
    for r in results:
        groups.setdefault((r.model, r.threads), []).append(r)
    for (model, threads), group in groups.items():
        first = group[0].median
        ort = group[-1].median
        for r in group:
            if r.mismatch:
                lines.append(f"| {model} | {threads} | {r.label} | {r.compile_seconds:.1f} | outputs disagree: "
                             f"{r.mismatch} | | | | |")
                continue
            low, high = r.spread()
            compile_s = "—" if r.compile_seconds is None else f"{r.compile_seconds:.1f}"
            versus = "—" if first is None else f"{r.median / first:.2f}"
            lines.append(f"| {model} | {threads} | {r.label} | {compile_s} | {r.median * 1e3:.1f} | "
                         f"{low * 1e3:.1f}-{high * 1e3:.1f} | {len(r.times)} | {versus} | "
                         f"{r.median / ort:.2f} |")
    return "\n".join(lines) + "\n"
