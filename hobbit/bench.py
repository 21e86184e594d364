"""Benchmark hobbit against onnxruntime, fairly, and report the results.

Fair means: the same inputs, the same thread count (onnxruntime gets
intra_op_num_threads = N, sequential execution, all graph optimisations on),
warm-up runs for both, then the two engines timed alternately in short blocks
so that clock boosts, other processes and cache state hit both alike. Outputs are compared
first; a speed ratio is only meaningful when the answers agree, so
`run_benchmark` reports no timings when they do not. hobbit's GFLOP/s is set
against this machine's measured FMA peak (hobbit.runtime.peak) to show how much
of the hardware the generated code uses. Reports: a markdown table (BENCHMARKS.md),
JSON with every number, and a bar chart of the ratios."""

from __future__ import annotations

import datetime
import json
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx

import hobbit
from hobbit.codegen.target import host_target
from hobbit.errors import HobbitError
from hobbit.graph.ir import Graph
from hobbit.graph.registry import node_flops
from hobbit.passes.memory import needs_code
from hobbit.runtime.jit import TensorSpec
from hobbit.runtime.peak import fma_peak_gflops
from hobbit.runtime.profile import format_profile

ModelSource = onnx.ModelProto | str | os.PathLike

RTOL = 1e-3
ATOL = 1e-4


@dataclass(frozen=True)
class Timing:
    """Latency statistics over the timed runs, in milliseconds."""

    median: float
    p10: float
    p90: float

    @classmethod
    def of(cls, seconds: list[float]) -> Timing:
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
    flops: int = 0  # work of one inference, counted on hobbit's compiled graph
    peak_gflops: float | None = None  # measured FMA peak at this thread count
    inputs: str = ""  # e.g. "input: float32[1x3x224x224]"

    @property
    def ratio(self) -> float | None:
        """hobbit median / onnxruntime median (< 1 means hobbit is faster)."""
        if self.hobbit is None or self.onnxruntime is None:
            return None
        return self.hobbit.median / self.onnxruntime.median

    @property
    def gflops(self) -> float | None:
        """hobbit's achieved GFLOP/s at its median latency."""
        if self.hobbit is None:
            return None
        return self.flops / (self.hobbit.median * 1e-3) / 1e9

    @property
    def peak_percent(self) -> float | None:
        """gflops as a percentage of the measured FMA peak for the same thread count."""
        if self.gflops is None or not self.peak_gflops:
            return None
        return 100.0 * self.gflops / self.peak_gflops

    def format(self) -> str:
        lines = [f"model: {self.model}   threads: {self.threads}   timed runs: {self.runs} each",
                 f"compile: {self.compile_seconds:.2f} s",
                 f"max |hobbit - onnxruntime|: {self.max_abs_error:.3g}"]
        if self.mismatch is not None:
            lines.append(f"OUTPUTS DISAGREE (rtol {RTOL}, atol {ATOL}): {self.mismatch}")
            lines.append("no speed ratio is reported for a model hobbit computes wrongly")
            return "\n".join(lines)
        lines += [f"hobbit:      {self.hobbit}", f"onnxruntime: {self.onnxruntime}",
                  f"ratio hobbit/onnxruntime (median): {self.ratio:.3f}",
                  f"hobbit: {self.flops / 1e9:.3f} GFLOP per run, {self.gflops:.1f} GFLOP/s"
                  + (f" = {self.peak_percent:.0f}% of the {self.peak_gflops:.0f} GFLOP/s FMA peak"
                     if self.peak_percent is not None else "")]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Every number of the result, JSON-ready (None where no timing is reported)."""
        return {"model": self.model, "threads": self.threads, "runs": self.runs, "inputs": self.inputs,
                "compile_seconds": self.compile_seconds,
                "max_abs_error": self.max_abs_error if math.isfinite(self.max_abs_error) else None,
                "outputs_agree": self.mismatch is None, "mismatch": self.mismatch,
                "hobbit_ms": None if self.hobbit is None else asdict(self.hobbit),
                "onnxruntime_ms": None if self.onnxruntime is None else asdict(self.onnxruntime),
                "ratio": self.ratio, "flops": self.flops, "gflops": self.gflops,
                "peak_gflops": self.peak_gflops, "peak_percent": self.peak_percent}


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


def ort_session(model: ModelSource, threads: int):
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


def graph_flops(graph: Graph) -> int:
    """Flops of one inference of a compiled graph, from the op registry's per-node counts (views do no work)."""
    return sum(node_flops(node) for node in graph.nodes if needs_code(node))


def _describe_inputs(specs: list[TensorSpec]) -> str:
    return ", ".join(f"{s.name}: {np.dtype(s.dtype).name}[{'x'.join(map(str, s.shape))}]" for s in specs)


def run_benchmark(model: ModelSource, name: str, runs: int = 30, threads: int = 1,
                  warmup: int = 3, passes: list[str] | None = None, seed: int = 0) -> BenchResult:
    """Compile, check against onnxruntime, then time both engines alternately."""
    if runs < 1 or threads < 1 or warmup < 0:
        raise HobbitError(f"runs and threads must be at least 1 and warmup at least 0 "
                          f"(got runs={runs}, threads={threads}, warmup={warmup})")
    t0 = time.perf_counter()
    # A real compile, not a compile-cache hit: the compile time is reported and the graph is needed.
    compiled = hobbit.compile(model, threads=threads, passes=passes, cache=False)
    compile_seconds = time.perf_counter() - t0
    session = ort_session(model, threads)
    feeds = random_inputs(compiled.inputs, seed)
    names = [s.name for s in compiled.outputs]
    got = compiled.run(feeds)
    expected = session.run(names, feeds)
    worst, mismatch = compare_outputs(got, expected, names)
    result = BenchResult(name, runs, threads, compile_seconds, worst, mismatch,
                         flops=graph_flops(compiled.report.graph), peak_gflops=fma_peak_gflops(threads),
                         inputs=_describe_inputs(compiled.inputs))
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


def profile_model(model: ModelSource, name: str, threads: int, runs: int = 30,
                  passes: list[str] | None = None, seed: int = 0) -> str:
    """Per-kernel table (time, GFLOP/s, % of the FMA peak) of one model at one thread count."""
    compiled = hobbit.compile(model, threads=threads, passes=passes, profile=True, cache=False)
    times = compiled.profile(random_inputs(compiled.inputs, seed), runs=runs)
    return f"profile of {name} at {threads} thread(s), median of {runs} runs per kernel:\n" + \
        format_profile(times, fma_peak_gflops(threads))


def run_suite(models: Iterable[tuple[str, Callable[[], ModelSource]]], threads: list[int], runs: int = 30,
              warmup: int = 3, passes: list[str] | None = None,
              report: Callable[[BenchResult], None] | None = None) -> list[BenchResult]:
    """Benchmark every (model, thread count) pair; each model is loaded once, when its turn comes.

    The FMA peaks are measured first, while nothing else of ours is running.
    Results come back ordered by thread count, then model, like the tables."""
    for n in threads:
        fma_peak_gflops(n)
    results = []
    for name, load in models:
        model = load()
        for n in threads:
            result = run_benchmark(model, name, runs=runs, threads=n, warmup=warmup, passes=passes)
            if report is not None:
                report(result)
            results.append(result)
    return sorted(results, key=lambda r: threads.index(r.threads))


def contention_warning(threads: list[int]) -> str | None:
    """A warning when the multi-thread FMA peak falls well short of the cores' sum.

    On an idle machine N threads reach about N times the 1-thread peak; far less
    means other work holds cores, and N-thread timings of both engines (hobbit's
    OpenMP team most of all) are then not trustworthy."""
    one = fma_peak_gflops(1)
    cores = host_target().cores
    short = [n for n in threads if n > 1 and fma_peak_gflops(n) < 0.75 * min(n, cores) * one]
    if not short:
        return None
    return (f"the FMA peak at {', '.join(map(str, short))} threads is well below "
            f"{', '.join(f'{min(n, cores)}x' for n in short)} the 1-thread peak: other work is using the cores, "
            f"so timings at those thread counts are unreliable")


# -- reports -----------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, memory, library versions, date, and the
    1-minute load average when called (take it before benchmarking: other work skews the timings)."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        import onnxruntime as ort
        ort_version = ort.__version__
    except ImportError:
        ort_version = None
    target = host_target()
    return {"cpu": cpu, "llvm_cpu": target.cpu, "vector_bits": target.vector_bits, "cores": target.cores,
            "memory_gib": _memory_gib(), "hobbit": hobbit.__version__, "onnxruntime": ort_version,
            "date": datetime.date.today().isoformat(), "load_average": round(os.getloadavg()[0], 2)}


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kib / 2**20, 1)


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.1f}"


def _span(t: Timing) -> str:
    return f"{_ms(t.median)} ({_ms(t.p10)}–{_ms(t.p90)})"


def markdown_table(results: list[BenchResult]) -> str:
    """One row per model and thread count; rows whose outputs disagree carry no timings."""
    header = ("| model | threads | hobbit median (p10–p90) ms | onnxruntime median (p10–p90) ms | ratio "
              "| hobbit GFLOP/s | % of FMA peak | compile s |")
    lines = [header, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if r.mismatch is not None:
            cells = ["—", "—", "outputs disagree", "—", "—"]
        else:
            percent = "—" if r.peak_percent is None else f"{r.peak_percent:.0f}%"
            cells = [_span(r.hobbit), _span(r.onnxruntime), f"{r.ratio:.2f}", f"{r.gflops:.1f}", percent]
        lines.append(f"| {r.model} | {r.threads} | " + " | ".join(cells) + f" | {r.compile_seconds:.1f} |")
    return "\n".join(lines) + "\n"


def scaling_table(results: list[BenchResult]) -> str:
    """Per model and thread count N > 1: how many times faster each engine ran at N threads
    than at one (median over median), for models measured at both with agreeing outputs.
    Empty when there is nothing to compare."""
    one = {r.model: r for r in results if r.threads == 1 and r.mismatch is None}
    rows = [(one[r.model], r) for r in results if r.threads > 1 and r.mismatch is None and r.model in one]
    if not rows:
        return ""
    lines = ["| model | threads | hobbit speed-up over 1 thread | onnxruntime speed-up over 1 thread |",
             "| --- | --- | --- | --- |"]
    for base, r in rows:
        lines.append(f"| {r.model} | {r.threads} | {base.hobbit.median / r.hobbit.median:.2f}x "
                     f"| {base.onnxruntime.median / r.onnxruntime.median:.2f}x |")
    return "\n".join(lines) + "\n"


def markdown_report(results: list[BenchResult], machine: dict[str, Any], command: str,
                    warmup: int = 3) -> str:
    """BENCHMARKS.md: how the table was made, on what machine, then the table."""
    threads = sorted({r.threads for r in results})
    warning = contention_warning(threads)
    peaks = ", ".join(f"{fma_peak_gflops(n):.0f} GFLOP/s at {n} thread{'s' * (n > 1)}" for n in threads)
    memory = f", {machine['memory_gib']:.0f} GiB" if machine.get("memory_gib") else ""
    runs = sorted({r.runs for r in results})
    inputs = sorted({r.inputs for r in results if r.inputs})
    return (
        "# Benchmarks\n\n"
        f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']} against onnxruntime "
        f"{machine['onnxruntime']} (ORT_ENABLE_ALL, sequential, intra_op_num_threads = N), "
        f"{'/'.join(map(str, runs))} timed runs each after {warmup} warm-ups, the engines alternating in "
        f"blocks of {BLOCK} with a {COOLDOWN_S * 1e3:.0f} ms pause. Outputs are compared first "
        f"(rtol {RTOL}, atol {ATOL}); a model whose outputs disagree gets no timings.\n\n"
        f"Machine: {machine['cpu']} (LLVM CPU {machine['llvm_cpu']}, {machine['vector_bits']}-bit vectors), "
        f"{machine['cores']} cores{memory}, 1-minute load average {machine['load_average']} at the start. "
        f"Measured float32 FMA peak: {peaks}.\n\n"
        + (f"**Warning:** {warning}.\n\n" if warning else "")
        + f"Inputs: seeded N(0, 1) data ({'; '.join(inputs)}); zoo models carry random weights. "
        "Ratio is hobbit's median over onnxruntime's; below 1 means hobbit is faster. GFLOP/s is "
        "hobbit's compiled graph (2 per multiply-add in convolutions and matrix products, Winograd ones "
        "counted as direct so they can pass 100% of the peak, 1 per element elsewhere) over its median latency.\n\n"
        + markdown_table(results) + (f"\n{scaling}" if (scaling := scaling_table(results)) else ""))


def write_json(results: list[BenchResult], machine: dict[str, Any], path: str | os.PathLike) -> None:
    """All numbers per model and thread count, with the machine and settings they were measured under."""
    threads = sorted({r.threads for r in results})
    doc = {"machine": machine,
           "settings": {"rtol": RTOL, "atol": ATOL, "block": BLOCK, "cooldown_s": COOLDOWN_S},
           "fma_peak_gflops": {str(n): fma_peak_gflops(n) for n in threads},
           "results": [r.to_dict() for r in results]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def pyplot() -> Any:
    """matplotlib.pyplot on a file-only backend; matplotlib is optional, so its absence is a clear error."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise HobbitError("--plot needs matplotlib: pip install 'hobbit[bench]'") from exc
    return plt


def plot_ratios(results: list[BenchResult], path: str | os.PathLike, title: str = "") -> None:
    """Bar chart of hobbit/onnxruntime median ratios: models along x, one bar per thread count."""
    plt = pyplot()
    models = list(dict.fromkeys(r.model for r in results))
    threads = sorted({r.threads for r in results})
    width = 0.8 / len(threads)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(models) + 2), 4.5))
    for i, n in enumerate(threads):
        for j, model in enumerate(models):
            r = next((r for r in results if r.model == model and r.threads == n), None)
            x = j - 0.4 + width * (i + 0.5)
            if r is not None and r.ratio is not None:
                ax.bar(x, r.ratio, width, color=f"C{i}", label=f"{n} thread{'s' * (n > 1)}" if j == 0 else None)
                ax.annotate(f"{r.ratio:.2f}", (x, r.ratio), ha="center", va="bottom", fontsize=8)
            elif r is not None:
                ax.annotate("outputs\ndisagree", (x, 0), ha="center", va="bottom", fontsize=7, color="red")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(models)), models, rotation=20, ha="right")
    ax.set_ylabel("hobbit / onnxruntime median latency")
    ax.set_title(title or "hobbit vs onnxruntime (below 1: hobbit faster)")
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
