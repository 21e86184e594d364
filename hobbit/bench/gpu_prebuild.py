"""Compile the GPU benchmark's models into the compile cache ahead of the benchmark, in parallel.

On the GPU machine most of the benchmark's wall time is compiling, not measuring: the zoo at
batch 32 takes 12-33 s a model for the GPU (LLVM and ptxas) and again for the host reference,
one after the other, while fifteen of the machine's sixteen cores wait. Run first (and while
the device tests and the sanitizer use the GPU), this compiles every (model, batch, target,
precision) the benchmark will ask for in worker processes, so that the benchmark's own
hobbit.compile calls are cache hits (hobbit.runtime.cache, gpu_cache: the same model bytes and
options give the same key in any process) and its minutes go to the runs it times. Each zoo
model is built once and written to a temporary ONNX file that the workers read, since
building VGG-16's weights costs seconds per copy."""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Callable

import onnx

from hobbit import zoo
from hobbit.runtime import cache as compile_cache


@dataclass
class Built:
    model: str
    batch: int
    target: str  # "host" (the reference) or the GPU target ("cuda", "rocm:gfx942", ...)
    precision: str
    seconds: float = 0.0
    note: str = ""  # why it did not compile ("" when it did)


def _compile(path: str, batch: int, target: str, precision: str) -> float:
    """In a worker: the model at `path` at `batch` compiled as the benchmark will (seconds)."""
    import hobbit
    from hobbit.bench.suite import with_batch
    t0 = time.perf_counter()
    model = onnx.load(path)
    model = model if batch == 1 else with_batch(model, batch)  # as hobbit.bench.gpu.model_at: the same key
    if target == "host":
        hobbit.compile(model)
    else:
        hobbit.compile(model, target=target, precision=precision)
    return time.perf_counter() - t0


def _files(spec: str, folder: str) -> dict[str, str]:
    """--models' items as ONNX files: a zoo model built once and saved under `folder`."""
    files = {}
    for item in (s for s in spec.split(",") if s):
        if item.endswith(".onnx"):
            files[os.path.splitext(os.path.basename(item))[0]] = item
        else:
            path = os.path.join(folder, f"{item}.onnx")
            onnx.save(zoo.build(item), path)
            files[item] = path
    return files


def prebuild(spec: str, batches: list[int], precisions: list[str], jobs: int = 4,
             show: Callable[[str], None] = lambda line: None, target: str = "cuda") -> list[Built]:
    """Every model of `spec` (zoo names, .onnx files) at every batch: the host reference and the
    build for GPU `target` in each precision, `jobs` at a time; one Built each, in the order given."""
    if not compile_cache.enabled(None):
        show("the compile cache is off (HOBBIT_CACHE=0): prebuilding would be lost")
    wanted = [(b, t, p) for b in batches for t, p in [("host", "fp32")] + [(target, p) for p in precisions]]
    with tempfile.TemporaryDirectory(prefix="hobbit-prebuild-") as folder:
        files = _files(spec, folder)
        out = [Built(name, b, t, p) for name in files for b, t, p in wanted]
        # spawn: fresh interpreters, not forks of one that may hold LLVM's or a driver's state
        with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_compile, files[r.model], r.batch, r.target, r.precision): r for r in out}
            for future in as_completed(futures):
                r = futures[future]
                try:
                    r.seconds = future.result()
                except Exception as exc:  # a model hobbit cannot compile is the benchmark's row to report
                    r.note = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"
                show(f"prebuilt {r.model} batch {r.batch} {r.target} {r.precision}: "
                     f"{r.note or f'{r.seconds:.1f} s'}")
    return out


def prebuild_markdown(built: list[Built]) -> str:
    lines = ["| model | batch | target | precision | compile s | note |", "| --- | --- | --- | --- | --- | --- |"]
    for b in built:
        note = b.note.replace("|", "\\|")
        lines.append(f"| {b.model} | {b.batch} | {b.target} | {b.precision} | "
                     f"{f'{b.seconds:.1f}' if not b.note else '—'} | {note} |")
    return "\n".join(lines)
