"""Resident memory of hobbit and onnxruntime for one model, each engine in a fresh process.

Memory cannot be compared inside the benchmark's own process: both engines live there,
each one's imports, heap and thread pools count against the other, and a process's peak
(VmHWM) only ever grows. So each engine gets a fresh Python process of its own that
imports only that engine (the onnxruntime child never imports hobbit, whose imports
would count against onnxruntime) and numpy, reads the model from the same file, builds
it (hobbit: a cold compile, cache off; onnxruntime: a session with the benchmark's
options), runs it once on the benchmark's inputs, and reports VmRSS after its imports,
after the build and after the run, and VmHWM at the end, from /proc/self/status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

from hobbit.bench.load import BuildOptions
from hobbit.errors import HobbitError

ENGINES = ("hobbit", "onnxruntime")
# A cold compile of VGG-16 takes about 40 s on a busy 2-core machine; ten times that is a hang.
TIMEOUT_S = 600.0

_CHILD = r"""
import json, sys
engine, model, feeds_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ort_options, build = json.loads(sys.argv[5]), json.loads(sys.argv[6])

def status():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(line.split()[1]) * 1024
    return found

import numpy as np
if engine == "hobbit":
    from hobbit import compile  # hobbit loads its compiler on first use: here, so it counts in base
else:
    import onnxruntime as ort
base = status()["VmRSS"]
with np.load(feeds_path) as npz:
    feeds = {name: npz[name] for name in npz.files}
if engine == "hobbit":
    model = compile(model, threads=threads, cache=False, **build)
    run = lambda: model.run(feeds)
else:
    opts = ort.SessionOptions()
    for name, value in ort_options.items():
        if isinstance(value, str):
            value = getattr(getattr(ort, value.split(".")[0]), value.split(".")[1])
        setattr(opts, name, value)
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    run = lambda: session.run(None, feeds)
built = status()["VmRSS"]
run()
end = status()
print(json.dumps({"base": base, "built": built, "run": end["VmRSS"], "peak": end["VmHWM"]}))
"""


@dataclass(frozen=True)
class MemoryUse:
    """One engine's resident memory in a fresh process, in bytes."""

    base: int  # after importing the engine and numpy, before the model
    built: int  # after hobbit's compile / onnxruntime's session creation
    run: int  # after one inference
    peak: int  # the process's largest resident size (VmHWM), whenever it was

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def measure(model: onnx.ModelProto | str | os.PathLike, feeds: dict[str, np.ndarray], threads: int,
            ort_options: dict[str, object], build: BuildOptions = BuildOptions()) -> dict[str, MemoryUse] | None:
    """Each engine's MemoryUse for the model (a ModelProto is written to a file first, so both
    children read it the same way), or None where Linux's /proc/self/status is absent.
    `ort_options` are onnxruntime's SessionOptions (bench.ort_options), `build` hobbit's compile options."""
    if not os.path.exists("/proc/self/status"):
        return None
    with tempfile.TemporaryDirectory(prefix="hobbit-memory-") as tmp:
        path = model_file(model, Path(tmp))
        feeds_path = Path(tmp) / "feeds.npz"
        np.savez(feeds_path, **feeds)
        return {engine: _child(engine, path, feeds_path, threads, ort_options, build) for engine in ENGINES}


def model_file(model: onnx.ModelProto | str | os.PathLike, folder: Path) -> str:
    """The model's path: a ModelProto is saved into `folder` first (children read a file)."""
    if not isinstance(model, onnx.ModelProto):
        return os.fspath(model)
    path = folder / "model.onnx"
    try:
        onnx.save(model, path)
    except ValueError as exc:  # protobuf's 2 GB limit
        raise HobbitError(f"cannot write the model to a file for a measuring child process: {exc}") from exc
    return str(path)


def _child(engine: str, model: str, feeds_path: Path, threads: int, ort_options: dict[str, object],
           build: BuildOptions) -> MemoryUse:
    """Run the measuring child for one engine and read its report."""
    args = [engine, model, str(feeds_path), str(threads), json.dumps(ort_options), json.dumps(build.kwargs())]
    return MemoryUse(**run_child(_CHILD, args, f"the {engine} memory measurement of {model}"))


def run_child(code: str, args: list[str], what: str, env: dict[str, str] | None = None) -> dict:
    """Run `code` in a fresh Python process with `args` and read the JSON object it prints last;
    a HobbitError naming `what` when it fails or takes over TIMEOUT_S."""
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False, env=env)
    except subprocess.TimeoutExpired as exc:
        raise HobbitError(f"{what} took over {TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no error output"]
        raise HobbitError(f"{what} failed (exit status {done.returncode}): {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
