"""A/B of two hobbit trees on requests after idle gaps: fresh processes, the trees alternating.

    python scripts/sporadic_ab.py BEFORE_TREE AFTER_TREE --model mobilenet_v2 --threads 2 --gaps 0,10,100 --rounds 12

A change to the thread runtime shows after idle gaps, and two separate `hobbit bench --load gaps:MS`
runs minutes apart carry the machine's drift (on the shared 2-vCPU guest a model's 2-thread
speed moves between regimes for seconds at a time). So each round runs one short process per
tree, one after the other: compile (the cache may serve it), warm up, then at each gap `runs`
requests each after a sleep of that many ms (gap 0: back to back). A tree is a checkout of this
repository; its child imports the hobbit in it. The table gives per tree and gap the median and
p90 over every round's requests, and the median over rounds of each process's own median over
its back-to-back median: the slowdown after a gap, free of the drift between processes."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
import numpy as np
import hobbit
from hobbit import zoo
model, threads, gaps, runs = sys.argv[1], int(sys.argv[2]), [float(g) for g in sys.argv[3].split(",")], int(sys.argv[4])
m = hobbit.compile(zoo.resolve(model), threads=threads)
rng = np.random.default_rng(0)
feeds = {i.name: rng.random(i.shape, dtype=np.float32) for i in m.inputs}
for _ in range(20):
    m.run(feeds)
times = {}
for gap in gaps:
    times[gap] = []
    for _ in range(runs):
        if gap:
            time.sleep(gap / 1000)
        start = time.perf_counter()
        m.run(feeds)
        times[gap].append((time.perf_counter() - start) * 1000)
print(json.dumps(times))
"""


def child(tree: str, model: str, threads: int, gaps: str, runs: int) -> dict[float, list[float]]:
    """One process of `tree`: every gap's latencies in ms."""
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, "-c", CHILD, model, str(threads), gaps, str(runs)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{tree}: the child failed:\n{done.stderr[-3000:]}")
    return {float(g): t for g, t in json.loads(done.stdout.splitlines()[-1]).items()}


def table(results: dict[str, list[dict[float, list[float]]]]) -> str:
    """Per tree ("before", "after") and gap: median and p90 of every request, and the median slowdown."""
    lines = ["| tree | gap ms | median ms | p90 ms | median / back-to-back (median of rounds) |", "|" + " --- |" * 5]
    for tree, rounds in results.items():
        for gap in rounds[0]:
            every = [t for r in rounds for t in r[gap]]
            slowdown = [statistics.median(r[gap]) / statistics.median(r[min(r)]) for r in rounds]
            lines.append(f"| {tree} | {gap:g} | {statistics.median(every):.2f} | "
                         f"{statistics.quantiles(every, n=10)[-1]:.2f} | {statistics.median(slowdown):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs=2, help="two checkouts of hobbit: before, after")
    parser.add_argument("--model", default="mobilenet_v2", help="zoo name or model file (default mobilenet_v2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gaps", default="0,10,100", help="idle gaps in ms, 0 for back to back (default 0,10,100)")
    parser.add_argument("--runs", type=int, default=15, help="requests per gap per process (default 15)")
    parser.add_argument("--rounds", type=int, default=12, help="processes per tree (default 12)")
    args = parser.parse_args(argv)
    gaps = sorted({float(g) for g in args.gaps.split(",")} | {0.0})
    model = str(Path(args.model).resolve()) if os.path.exists(args.model) else args.model
    results: dict[str, list[dict[float, list[float]]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label, tree in zip(results, args.trees):
            results[label].append(child(tree, model, args.threads, ",".join(f"{g:g}" for g in gaps), args.runs))
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
