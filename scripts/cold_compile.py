"""Cold compile times: each model compiled with every cache empty in a fresh Python process,
then run once, with the compile's phases (hobbit.bench.coldcompile); a markdown table on stdout.

    python scripts/cold_compile.py resnet50 mobilenet_v2 model.onnx model.keras --threads 2 --rounds 2

A model is a zoo name (hobbit.zoo) or a model file. "total" is compile() plus the first run,
which is where a model with a symbolic batch dim (a Keras file's) is compiled. The phases are
compile()'s report: import, passes (with planning and weight packing), codegen (Python's IR
emission; LLVM's threads already work beside it), llvm (what is left of LLVM's optimiser and
code generation after emission) and jit (loading the machine code). Rounds alternate the
models, so a change in the machine's load hits them alike; the table gives each model's
fastest and slowest round and the phases' means. The children import the hobbit that Python
finds first: run it from the repository root (or set PYTHONPATH) to time that tree."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hobbit import zoo  # noqa: E402
from hobbit.bench.coldcompile import PHASES, ColdCompile, measure  # noqa: E402


def table(results: dict[str, list[ColdCompile]]) -> str:
    lines = ["| model | total s (compile + first run), fastest–slowest | " + " | ".join(f"{p} s" for p in PHASES)
             + " | first run s |", "|" + " --- |" * (len(PHASES) + 3)]
    for model, rounds in results.items():
        totals = [r.seconds + r.first_run for r in rounds]
        means = [statistics.mean(r.phases.get(p, 0.0) for r in rounds) for p in PHASES]
        lines.append(f"| {model} | {min(totals):.2f}–{max(totals):.2f} | " + " | ".join(f"{m:.2f}" for m in means)
                     + f" | {statistics.mean(r.first_run for r in rounds):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="zoo names (hobbit.zoo) or model files")
    parser.add_argument("--threads", type=int, default=2, help="compile(threads=) (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="fresh-process compiles per model (default 2)")
    args = parser.parse_args(argv)
    models = {Path(m).name: (os.path.abspath(m) if os.path.exists(m) else zoo.build(m)) for m in args.models}
    results: dict[str, list[ColdCompile]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            results[name].append(measure(model, name, args.threads))
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
