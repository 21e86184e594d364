"""Timing under a budget, for `hobbit bench --kernels` (hobbit.bench.kernels): one DeepBench
shape's configurations take microseconds (hobbit's GEMM at batch 1) to minutes (a naive loop
nest on a server GEMM of 285 GFLOP, about 100 s a run at the 2-3 GFLOP/s a plain loop nest
gets), so a fixed run count either measures noise or never finishes.

Every configuration of a shape is timed in the same alternating rounds (A/B in one run, as
`hobbit bench` does: blocks of hobbit.bench.load.BLOCK runs, each after a COOLDOWN_S pause,
so that one engine's spinning threads do not steal the next one's cores), and each stops on
its own: after `runs` timed runs, or once its timed runs add up to `budget_s` and it has at
least MIN_RUNS. A configuration whose single run would take over `cap_s` is not timed at all
(over_budget says so before its first run, from the rate it reached on an earlier shape)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from hobbit.bench.load import BLOCK, COOLDOWN_S

Engine = Callable[[], object]
# Fewer runs than this make no median worth printing; a budget never stops a configuration
# before it has them (unless `runs` itself is smaller).
MIN_RUNS = 3


def warm_up(engine: Engine, warmup: int, first_s: float, budget_s: float) -> None:
    """Untimed runs after the first (checked) one, which took `first_s`, up to `warmup` runs in all,
    stopping once the warm-up has taken half the budget: an engine of seconds a run is warm after
    one (its working set is far bigger than the caches), and 3 more would triple its cost."""
    spent, done = first_s, 1
    while done < warmup and spent < budget_s / 2:
        start = time.perf_counter()
        engine()
        spent += time.perf_counter() - start
        done += 1


def budgeted_rounds(engines: dict[str, Engine], runs: int, budget_s: float, first_s: dict[str, float],
                    block: int = BLOCK, cooldown: float = COOLDOWN_S) -> dict[str, list[float]]:
    """Seconds of each timed run per engine: alternating blocks of at most `block` runs, an engine
    leaving the rotation after `runs` runs, or once it has min(MIN_RUNS, runs) runs and its runs
    add up to `budget_s`; a block never plans more runs than the budget left holds (at least one,
    and enough to reach the minimum), judged by the engine's mean so far (before any, `first_s`,
    its first run)."""
    least = min(MIN_RUNS, runs)
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    active = list(engines)
    while active:
        for name in list(active):
            done = seconds[name]
            spent = sum(done)
            if len(done) >= runs or (len(done) >= least and spent >= budget_s):
                active.remove(name)
                continue
            per_run = spent / len(done) if done else first_s[name]
            by_budget = math.ceil((budget_s - spent) / per_run) if per_run > 0 else block
            count = min(block, runs - len(done), max(least - len(done), by_budget, 1))
            if cooldown:
                time.sleep(cooldown)
            engine = engines[name]
            for _ in range(count):
                start = time.perf_counter()
                engine()
                done.append(time.perf_counter() - start)
    return seconds


def over_budget(flops: int, gflops: float | None, cap_s: float) -> float | None:
    """The seconds one run of `flops` is expected to take, when over `cap_s`, at `gflops` (the
    rate this configuration reached on the largest earlier shape: small shapes' rates are their
    call overhead, 1-2 GFLOP/s for a GEMM of 64x1x1216, and would put every large shape over);
    None when it fits or nothing is known yet (then its first run shows it)."""
    if gflops is None or gflops <= 0:
        return None
    estimate = flops / (gflops * 1e9)
    return estimate if estimate > cap_s else None
