"""Benchmark hobbit against onnxruntime on one model, fairly.

Fair means: the same inputs, the same thread count (onnxruntime gets
intra_op_num_threads = N, sequential execution, all graph optimisations on),
warm-up runs for both, then the two engines timed alternately in short blocks
so that clock boosts, other processes and cache state hit both alike. Outputs are compared
first; a speed ratio is only meaningful when the answers agree, so
`run_benchmark` reports no timings when they do not."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import onnx

import hobbit
from hobbit.errors import HobbitError
from hobbit.runtime.jit import TensorSpec

RTOL = 1e-3
ATOL = 1e-4


@dataclass(frozen=True)
class Timing:
    """Latency statistics over the timed runs, in milliseconds."""

    median: float
    p10: float
    p90: float

    @classmethod
    def of(cls, seconds: list[float]) -> "Timing":
        ms = np.asarray(seconds) * 1e3
        return cls(float(np.median(ms)), float(np.percentile(ms, 10)), float(np.percentile(ms, 90)))

    def __str__(self) -> str:
        return f"median {self.median:9.3f} ms   p10-p90 {self.p10:.3f}-{self.p90:.3f} ms"


@dataclass
class BenchResult:
    model: str
    runs: int
    threads: int
    compile_seconds: float
    max_abs_error: float
    mismatch: str | None  # why the outputs disagree, or None when they agree
    hobbit: Timing | None = None
    onnxruntime: Timing | None = None

    @property
    def ratio(self) -> float | None:
        """hobbit median / onnxruntime median (< 1 means hobbit is faster)."""
        if self.hobbit is None or self.onnxruntime is None:
            return None
        return self.hobbit.median / self.onnxruntime.median

    def format(self) -> str:
        lines = [f"model: {self.model}   threads: {self.threads}   timed runs: {self.runs} each",
                 f"compile: {self.compile_seconds:.2f} s",
                 f"max |hobbit - onnxruntime|: {self.max_abs_error:.3g}"]
        if self.mismatch is not None:
            lines.append(f"OUTPUTS DISAGREE (rtol {RTOL}, atol {ATOL}): {self.mismatch}")
            lines.append("no speed ratio is reported for a model hobbit computes wrongly")
            return "\n".join(lines)
        lines += [f"hobbit:      {self.hobbit}", f"onnxruntime: {self.onnxruntime}",
                  f"ratio hobbit/onnxruntime (median): {self.ratio:.3f}"]
        return "\n".join(lines)


def random_inputs(specs: list[TensorSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic inputs for the given specs: N(0, 1) floats, small non-negative ints, random bools."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec.name] = rng.random(spec.shape) < 0.5
        else:
            feeds[spec.name] = rng.integers(0, 10, spec.shape).astype(dtype)
    return feeds


def compare_outputs(got: list[np.ndarray], expected: list[np.ndarray], names: list[str],
                    rtol: float = RTOL, atol: float = ATOL) -> tuple[float, str | None]:
    """(largest absolute difference, description of the first disagreement or None)."""
    worst = 0.0
    for name, g, e in zip(names, got, expected):
        if g.shape != e.shape:
            return float("inf"), f"output '{name}' has shape {g.shape}, onnxruntime gives {e.shape}"
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
        worst = max(worst, float(diff.max(initial=0.0)))
        bad = diff > atol + rtol * np.abs(e.astype(np.float64))
        if bad.any():
            return worst, (f"output '{name}': {int(bad.sum())} of {bad.size} elements differ, "
                           f"max abs diff {float(diff.max()):.3g}")
    return worst, None


def ort_session(model: onnx.ModelProto | str | os.PathLike, threads: int):
    """An onnxruntime CPU session configured like hobbit runs: N intra-op threads, sequential."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise HobbitError("bench needs onnxruntime: pip install 'hobbit[bench]'") from exc
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


# Engines alternate in short blocks with a pause between them: both keep their
# worker threads spinning for a while after a run, and a spinning team steals a
# core from the other engine if it starts at once (seen as 2x at 2 threads).
BLOCK = 5
COOLDOWN_S = 0.05


def _timed(fn, count: int) -> list[float]:
    time.sleep(COOLDOWN_S)
    seconds = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t0)
    return seconds


def run_benchmark(model: onnx.ModelProto | str | os.PathLike, name: str, runs: int = 30, threads: int = 1,
                  warmup: int = 3, passes: list[str] | None = None, seed: int = 0) -> BenchResult:
    """Compile, check against onnxruntime, then time both engines alternately."""
    if runs < 1 or threads < 1:
        raise HobbitError(f"runs and threads must be at least 1 (got runs={runs}, threads={threads})")
    t0 = time.perf_counter()
    compiled = hobbit.compile(model, threads=threads, passes=passes)
    compile_seconds = time.perf_counter() - t0
    session = ort_session(model, threads)
    feeds = random_inputs(compiled.inputs, seed)
    names = [s.name for s in compiled.outputs]
    got = compiled.run(feeds)
    expected = session.run(names, feeds)
    worst, mismatch = compare_outputs(got, expected, names)
    result = BenchResult(name, runs, threads, compile_seconds, worst, mismatch)
    if mismatch is not None:
        return result
    for _ in range(warmup):
        compiled.run(feeds)
        session.run(names, feeds)
    ours, theirs = [], []
    while len(ours) < runs:
        block = min(BLOCK, runs - len(ours))
        ours += _timed(lambda: compiled.run(feeds), block)
        theirs += _timed(lambda: session.run(names, feeds), block)
    result.hobbit = Timing.of(ours)
    result.onnxruntime = Timing.of(theirs)
    return result
