"""Cold compile times: each model compiled with an empty cache (cache=False) in a fresh Python
process, then run once, with the compile's phases; a markdown table on stdout.

    python scripts/cold_compile.py resnet50 mobilenet_v2 model.onnx model.keras --threads 2 --rounds 2

A fresh process per compile is what a new user meets: nothing of hobbit, LLVM or the model is
warm. A model is a zoo name (hobbit.zoo) or a model file. "total" is compile() plus the first
run, which is where a model with a symbolic batch dim (a Keras file's) is compiled. The phases
are compile()'s report: import, passes (with planning and weight packing), codegen (Python's
IR emission; LLVM's threads already work beside it), llvm (what is left of LLVM's optimiser
and code generation after emission) and jit (loading the machine code). Rounds alternate the
models, so a change in the machine's load hits them alike; the table gives each model's
fastest and slowest round and the phases' means."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PHASES = ("import", "passes", "codegen", "llvm", "jit")

_CHILD = """
import json, sys, time
import numpy as np
import hobbit
from hobbit import zoo
name, threads = sys.argv[1], int(sys.argv[2])
model = name if "." in name else zoo.build(name)
t0 = time.perf_counter()
compiled = hobbit.compile(model, threads=threads, cache=False)
seconds = time.perf_counter() - t0
feeds = {s.name: np.zeros(tuple(1 if d is None else d for d in s.shape), s.dtype) for s in compiled.inputs}
t0 = time.perf_counter()
compiled.run(feeds)
first = time.perf_counter() - t0
report = getattr(compiled, "report", None)
phases = dict(getattr(report, "seconds", None) or {})
print(json.dumps({"compile": seconds, "first_run": first, "phases": phases}))
"""


def time_once(model: str, threads: int) -> dict:
    """One cold compile of `model` in a fresh process."""
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "HOBBIT_CACHE": "0", "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    if os.path.exists(model):
        model = os.path.abspath(model)
    # In the repository's folder: `python -c` puts the working folder first on sys.path.
    done = subprocess.run([sys.executable, "-c", _CHILD, model, str(threads)], capture_output=True, text=True, env=env,
                          cwd=repo, check=False)
    if done.returncode != 0:
        raise SystemExit(f"compiling {model} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict[str, list[dict]]) -> str:
    lines = ["| model | total s (compile + first run), fastest–slowest | " + " | ".join(f"{p} s" for p in PHASES)
             + " | first run s |", "|" + " --- |" * (len(PHASES) + 3)]
    for model, rounds in results.items():
        totals = [r["compile"] + r["first_run"] for r in rounds]
        means = [statistics.mean(r["phases"].get(p, 0.0) for r in rounds) for p in PHASES]
        lines.append(f"| {Path(model).name} | {min(totals):.2f}–{max(totals):.2f} | "
                     + " | ".join(f"{m:.2f}" for m in means)
                     + f" | {statistics.mean(r['first_run'] for r in rounds):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="zoo names (hobbit.zoo) or model files")
    parser.add_argument("--threads", type=int, default=2, help="compile(threads=) (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="fresh-process compiles per model (default 2)")
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {model: [] for model in args.models}
    for _ in range(args.rounds):
        for model in args.models:
            results[model].append(time_once(model, args.threads))
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
