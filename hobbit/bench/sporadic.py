"""Sporadic requests for `hobbit bench --load gaps:MS` and `--load poisson:RATE`.

A service rarely gets its requests back to back: they come with gaps, and what an engine does
with its threads in a gap decides both the next request's latency (a team that went to sleep
must be woken) and what the idle process costs (a team that spins burns cores nobody uses).
Back-to-back timing shows neither, so these conditions time each engine after real idle gaps
and measure the CPU time the process burns in them.

- gaps:MS: every timed run of an engine comes MS milliseconds after that same engine's
  previous run, the benchmark's thread asleep in between. Warm-ups run back to back first.
  Engines still take turns in blocks, as in every other condition, and no other engine runs
  inside a gap: each block starts with a pause of at least SETTLE_S (and at least the gap),
  so the previous engine's threads have gone quiet, then one untimed run of the block's engine,
  so its first timed run, like every other, follows its own run by one gap.
- poisson:RATE: requests arrive at random, RATE per second on average (exponential
  inter-arrival times from a seeded generator), and one engine serves them one at a time;
  a request that arrives while the previous one runs waits. Latency is completion minus
  arrival, queueing included, as a client of the service sees it. Every engine gets the same
  arrival times (the same seed), so the engines differ only in how they serve them. The
  sequence is served in chunks of POISSON_CHUNK requests, the engines taking turns chunk by
  chunk like the blocks above (a settle pause and one untimed run before each chunk; the
  chunk's clock starts after that run, so its first request arrives one inter-arrival time
  later and finds no queue).

Idle cost: the process's CPU time (time.process_time: CLOCK_PROCESS_CPUTIME_ID, every thread
of the process summed, nanosecond resolution) consumed during the sleeps, over their wall
time: the cores the idle process keeps busy (0.0 none, 1.0 one whole core). It includes the
benchmark's own sleeping thread (its wake-ups: microseconds per gap) and any other thread of
the process, which is why no other engine may run in a gap. The same gaps around an engine
that does nothing (FLOOR) measure that floor in the same run.

The conditions are named by strings (the modes of hobbit.bench.load): `condition()` parses
one, `canonical()` writes a user's spec in the one spelling the results carry."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

GAPS = "gaps"
POISSON = "poisson"
KINDS = {GAPS: "MS", POISSON: "RATE"}
# The least pause before each engine's block, for the previous engine's threads to stop spinning
# (onnxruntime's intra-op workers spin about 40 ms after each run).
SETTLE_S = 0.1
# Poisson: at least this many requests per engine (a p99 needs them), served in chunks of this many.
POISSON_MIN_REQUESTS = 100
POISSON_CHUNK = 25

Engine = Callable[[], list[np.ndarray]]
# The engine that does nothing, timed last under every sporadic condition: the idle cost of the
# benchmark's own sleeps, which every engine's figure includes.
FLOOR = "sleeps alone"


class SpecError(ValueError):
    """A sporadic condition spelled wrong (gaps:x, gaps:-1, poisson:0): the message says how to spell it."""


def condition(text: str) -> tuple[str, float] | None:
    """("gaps", milliseconds) or ("poisson", requests per second) for a sporadic condition,
    None for any other text (another load condition); a SpecError for a sporadic one spelled
    wrong."""
    kind, sep, value = text.strip().partition(":")
    if kind not in KINDS:
        return None
    example = "gaps:10 (10 ms of idle before each timed run)" if kind == GAPS else \
        "poisson:50 (50 requests per second on average)"
    what = "milliseconds of idle" if kind == GAPS else "requests per second"
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or not math.isfinite(number) or number <= 0:
        raise SpecError(f"{kind}:{KINDS[kind]} takes a positive number of {what}, e.g. {example}; got {text!r}")
    return kind, number


def canonical(text: str) -> str:
    """A sporadic spec in the spelling the results carry: 'gaps: 10.0' -> 'gaps:10'."""
    parsed = condition(text)
    if parsed is None:
        raise SpecError(f"not a sporadic condition: {text!r}")
    kind, value = parsed
    return f"{kind}:{value:g}"


def is_sporadic(mode: str) -> bool:
    """Whether `mode` names a gaps or poisson condition (well spelled)."""
    try:
        return condition(mode) is not None
    except SpecError:
        return False


def describe(mode: str) -> str:
    """The one-line description of a sporadic condition, for the reports."""
    kind, value = condition(mode)
    if kind == GAPS:
        return (f"each timed run of an engine comes {value:g} ms after that engine's previous run, the process "
                f"idle in between (the benchmark's thread asleep, no other engine's work); warm-ups back to back")
    return (f"requests arrive at random, {value:g} per second on average (exponential inter-arrival times, "
            f"seeded; every engine gets the same arrival times), served one at a time; latency is completion "
            f"minus arrival, queueing included")


@dataclass
class Sporadic:
    """One engine's timed requests under a sporadic condition: the latency of each (seconds),
    the wall and process CPU seconds of its idle gaps, and the outputs of its last run."""

    seconds: list[float] = field(default_factory=list)
    idle_wall: float = 0.0
    idle_cpu: float = 0.0
    last: list[np.ndarray] = field(default_factory=list)

    @property
    def idle_cores(self) -> float | None:
        """Process CPU seconds per second of idle (None when it never idled: a saturated queue)."""
        return self.idle_cpu / self.idle_wall if self.idle_wall > 0 else None


def idle(seconds: float, into: Sporadic) -> None:
    """Sleep `seconds`, adding the wall time and the process's CPU time of the sleep to `into`."""
    wall, cpu = time.perf_counter(), time.process_time()
    time.sleep(seconds)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    into.idle_wall += wall
    into.idle_cpu += cpu


def _warm_up(engines: dict[str, Engine], warmup: int) -> None:
    for engine in engines.values():
        for _ in range(warmup):
            engine()


def run_gaps(engines: dict[str, Engine], runs: int, warmup: int, gap_s: float, block: int) -> dict[str, Sporadic]:
    """`runs` timed runs of each engine, each right after `gap_s` seconds of idle that follow the
    same engine's previous run; engines take turns in blocks of `block` runs (module docstring)."""
    _warm_up(engines, warmup)
    samples = {name: Sporadic() for name in engines}
    done = 0
    while done < runs:
        count = min(block, runs - done)
        for name, engine in engines.items():
            s = samples[name]
            time.sleep(max(SETTLE_S, gap_s))  # the previous engine's threads go quiet
            engine()  # untimed: the first timed run, too, follows this engine's own run
            for _ in range(count):
                idle(gap_s, s)
                t0 = time.perf_counter()
                s.last = engine()
                s.seconds.append(time.perf_counter() - t0)
        done += count
    return samples


def poisson_arrivals(rate: float, count: int, seed: int = 0) -> np.ndarray:
    """`count` arrival times (seconds from 0, increasing) of a Poisson process of `rate` per second:
    cumulative sums of exponential inter-arrival times of mean 1/rate, from a seeded generator."""
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, count))


def serve(engine: Engine, arrivals: np.ndarray, into: Sporadic) -> None:
    """Serve requests arriving at `arrivals` (perf_counter times) one at a time: idle until a
    request arrives, unless it already waits; record completion minus arrival."""
    for arrival in arrivals:
        wait = arrival - time.perf_counter()
        if wait > 0:
            idle(wait, into)
        into.last = engine()
        into.seconds.append(time.perf_counter() - arrival)


def run_poisson(engines: dict[str, Engine], rate: float, requests: int, warmup: int, seed: int = 0,
                chunk: int = POISSON_CHUNK) -> dict[str, Sporadic]:
    """`requests` Poisson arrivals at `rate` per second served by each engine, the same arrival
    times for every engine, the engines taking turns chunk by chunk (module docstring)."""
    _warm_up(engines, warmup)
    arrivals = poisson_arrivals(rate, requests, seed)
    samples = {name: Sporadic() for name in engines}
    for start in range(0, requests, chunk):
        origin = arrivals[start - 1] if start else 0.0
        offsets = arrivals[start:start + chunk] - origin
        for name, engine in engines.items():
            time.sleep(SETTLE_S)
            engine()  # untimed: the chunk's first request, too, follows this engine's own run
            serve(engine, time.perf_counter() + offsets, samples[name])
    return samples


def requests_for(runs: int) -> int:
    """Requests per engine under a poisson condition: --runs, but at least POISSON_MIN_REQUESTS."""
    return max(runs, POISSON_MIN_REQUESTS)


def run(mode: str, engines: dict[str, Engine], runs: int, warmup: int, block: int, seed: int = 0
        ) -> dict[str, Sporadic]:
    """Time `engines` under the sporadic condition `mode` (gaps:MS or poisson:RATE), and FLOOR,
    an engine that does nothing, after them."""
    engines = {**engines, FLOOR: lambda: []}
    kind, value = condition(mode)
    if kind == GAPS:
        return run_gaps(engines, runs, warmup, value / 1e3, block)
    return run_poisson(engines, value, requests_for(runs), warmup, seed)
