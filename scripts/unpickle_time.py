"""How long a fresh worker takes to get a pickled model running: the figures behind
BENCHMARKS.md's "models travel as compiled code" (issue 30).

    python scripts/unpickle_time.py resnet50 path/to/bert_base.onnx --rounds 5

Each model is compiled here (threads=1, the compile cache off), pickled to a file, and
unpickled by ROUNDS fresh interpreters, each timing: importing hobbit's unpickling path,
reading the file, unpickling (whose checks and JIT mapping the model's report splits out),
and the first run. Medians and ranges over the rounds; the pickle's size."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, pickle, sys, time
t0 = time.perf_counter()
import numpy as np
import hobbit.runtime.shipped
t1 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    data = f.read()
t2 = time.perf_counter()
model = pickle.loads(data)
t3 = time.perf_counter()
feeds = {s.name: np.zeros(s.shape, s.dtype) for s in model.inputs}
model.run(feeds)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "read": t2 - t1, "unpickle": t3 - t2, "first run": t4 - t3,
                  "checks": model.report.seconds.get("checks", 0.0), "jit": model.report.seconds.get("jit", 0.0)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="zoo names or model files")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["HOBBIT_CACHE"] = "0"
    import hobbit
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in args.models:
        model = hobbit.compile(name, threads=1, cache=False)
        with tempfile.NamedTemporaryFile(suffix=".pkl") as f:
            pickle.dump(model, f, protocol=5)
            f.flush()
            size = os.path.getsize(f.name)
            rounds = [json.loads(subprocess.run([sys.executable, "-c", _CHILD, f.name], check=True, text=True,
                                                capture_output=True, cwd=root,
                                                env={**os.environ, "PYTHONPATH": root}).stdout)
                      for _ in range(args.rounds)]
        parts = ", ".join(f"{key} {statistics.median(r[key] for r in rounds):.3f} s "
                          f"({min(r[key] for r in rounds):.3f}-{max(r[key] for r in rounds):.3f})"
                          for key in rounds[0])
        print(f"{os.path.basename(name)}: pickle {size / 1e6:.0f} MB; {parts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
