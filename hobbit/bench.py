"""Benchmark hobbit against onnxruntime, fairly, and report the results.

Fair means: the same inputs, the same thread count (onnxruntime gets
intra_op_num_threads = N, sequential execution, all graph optimisations on),
warm-up runs for both, then the two engines timed alternately in short blocks
so that clock boosts, other processes and cache state hit both alike; under a load
condition (hobbit.bench_load: a busy core, two processes at once, several threads on
one model, numpy's BLAS threads, the two engines' runs back to back) both engines are
timed under the same load in the same run. Outputs are compared first; a speed ratio
is only meaningful when the answers agree, so `run_benchmark` reports no timings when
they do not. hobbit's GFLOP/s is set against this machine's measured FMA peak
(hobbit.runtime.peak) to show how much of the hardware the generated code uses. With `aot`, the
model exported as a library and loaded back with hobbit.load is timed in the same rounds as a
third engine, after its outputs are checked against the JIT's (hobbit.bench_aot). Every hobbit
compile of a benchmark, in this process or another, gets the same BuildOptions (passes and a
target this host can run, e.g. x86-64-v3 code on an AVX-512 machine); the reports name a target
that is not the host, and the FMA peak stays the host's. Reports: a markdown table
(BENCHMARKS.md), JSON with every number, and a bar chart of the ratios."""

from __future__ import annotations

import datetime
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import onnx

import hobbit
from hobbit import bench_aot, bench_load, bench_memory
from hobbit.bench_load import BLOCK, COOLDOWN_S, LOADS, MODES, NO_SPIN_ENGINE, BuildOptions, Measured, describe_mode
from hobbit.bench_memory import MemoryUse
from hobbit.bench_ort import NO_SPIN, ModelSource, ort_options, ort_session
from hobbit.target import host_target
from hobbit.errors import HobbitError, ShapeError, TargetError
from hobbit.frontend.onnx.importer import load_model
from hobbit.graph.ir import Graph
from hobbit.ops.registry import node_flops
from hobbit.passes.memory import needs_code
from hobbit.runtime.jit import TensorSpec
from hobbit.runtime.peak import fma_peak, fma_peak_gflops
from hobbit.runtime.profile import format_profile


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
    flops: int = 0  # work of one inference on hobbit's compiled graph, Winograd convs counted as direct
    peak_gflops: float | None = None  # measured FMA peak at this thread count (its best trial)
    inputs: str = ""  # e.g. "input: float32[1x3x224x224]"
    mode: str = "none"  # one of MODES: the load condition, or "streams"
    batch: int = 1
    streams: int = 1  # inferences in flight at once: 2 for two-procs, S for streams
    hobbit_ips: float | None = None  # inferences per second (batch items, all streams together)
    onnxruntime_ips: float | None = None
    memory: dict[str, MemoryUse] | None = None  # per engine, each in a fresh process (hobbit.bench_memory)
    aot: Timing | None = None  # the exported library through hobbit.load (hobbit.bench_aot), when benchmarked
    aot_ips: float | None = None
    aot_max_abs_diff: float | None = None  # |library - JIT|, at most bench_aot.PARITY_ATOL
    aot_export_seconds: float | None = None  # export plus hobbit.load
    ctypes_call_us: float | None = None  # one call into the library through ctypes that does no work
    # onnxruntime with session.intra_op.allow_spinning=0 (bench_ort.NO_SPIN), timed in the same
    # rounds where a load table reports it
    onnxruntime_nospin: Timing | None = None
    onnxruntime_nospin_ips: float | None = None
    executed_flops: int | None = None  # the arithmetic hobbit's kernels execute (None: the same as flops)

    @property
    def ratio(self) -> float | None:
        """hobbit median / onnxruntime median (< 1 means hobbit is faster)."""
        if self.hobbit is None or self.onnxruntime is None:
            return None
        return self.hobbit.median / self.onnxruntime.median

    @property
    def p90_ratio(self) -> float | None:
        """hobbit p90 / onnxruntime p90: the slow tail, where a busy machine shows first."""
        if self.hobbit is None or self.onnxruntime is None:
            return None
        return self.hobbit.p90 / self.onnxruntime.p90

    @property
    def nospin_ratio(self) -> float | None:
        """hobbit median / the non-spinning onnxruntime session's median."""
        if self.hobbit is None or self.onnxruntime_nospin is None:
            return None
        return self.hobbit.median / self.onnxruntime_nospin.median

    @property
    def ips_ratio(self) -> float | None:
        """onnxruntime inferences/s / hobbit's: oriented like the latency ratios, < 1 means hobbit is faster."""
        if self.hobbit_ips is None or self.onnxruntime_ips is None:
            return None
        return self.onnxruntime_ips / self.hobbit_ips

    @property
    def aot_ratio(self) -> float | None:
        """Exported library median / JIT median (< 1 means the library is faster)."""
        if self.aot is None or self.hobbit is None:
            return None
        return self.aot.median / self.hobbit.median

    @property
    def aot_p90_ratio(self) -> float | None:
        """Exported library p90 / JIT p90."""
        if self.aot is None or self.hobbit is None:
            return None
        return self.aot.p90 / self.hobbit.p90

    @property
    def gflops(self) -> float | None:
        """hobbit's GFLOP/s at its median latency, Winograd convs counted as the direct convs they
        replace (comparable across conv algorithms; can pass the FMA peak)."""
        if self.hobbit is None:
            return None
        return self.flops / (self.hobbit.median * 1e-3) / 1e9

    @property
    def executed_gflops(self) -> float | None:
        """hobbit's GFLOP/s at its median latency, of the arithmetic its kernels execute."""
        if self.hobbit is None:
            return None
        executed = self.flops if self.executed_flops is None else self.executed_flops
        return executed / (self.hobbit.median * 1e-3) / 1e9

    @property
    def peak_percent(self) -> float | None:
        """executed_gflops as a percentage of the measured FMA peak for the same thread count."""
        if self.executed_gflops is None or not self.peak_gflops:
            return None
        return 100.0 * self.executed_gflops / self.peak_gflops

    def format(self) -> str:
        lines = [f"model: {self.model}   threads: {self.threads}   timed runs: {self.runs} each"
                 + (f"   batch: {self.batch}" if self.batch > 1 else ""),
                 f"compile: {self.compile_seconds:.2f} s",
                 f"max |hobbit - onnxruntime|: {self.max_abs_error:.3g}"]
        if self.memory is not None:
            lines += [f"memory, {engine} in a fresh process: {_describe_memory(use)}"
                      for engine, use in self.memory.items()]
        if self.mode != "none":
            lines.insert(1, f"load: {self.mode} ({describe_mode(self.mode, self.streams)})")
        if self.mismatch is not None:
            lines.append(f"OUTPUTS DISAGREE (rtol {RTOL}, atol {ATOL}): {self.mismatch}")
            lines.append("no speed ratio is reported for a model hobbit computes wrongly")
            return "\n".join(lines)
        lines += [f"hobbit:      {self.hobbit}", f"onnxruntime: {self.onnxruntime}",
                  f"ratio hobbit/onnxruntime (median): {self.ratio:.3f}   (p90): {self.p90_ratio:.3f}"]
        if self.onnxruntime_nospin is not None:
            lines += [f"onnxruntime, allow_spinning=0: {self.onnxruntime_nospin}   "
                      f"ratio hobbit/it (median): {self.nospin_ratio:.3f}"]
        if self.aot is not None:
            lines += [f"AOT library: {self.aot}",
                      f"ratio AOT/JIT (median): {self.aot_ratio:.3f}   (p90): {self.aot_p90_ratio:.3f}   "
                      f"max |AOT - JIT|: {self.aot_max_abs_diff:.3g}   export + load: {self.aot_export_seconds:.2f} s"
                      f"   no-op ctypes call: {self.ctypes_call_us:.2f} us"]
        if self.ips_ratio is not None:
            lines.append(f"inferences/s: hobbit {self.hobbit_ips:.1f}, onnxruntime {self.onnxruntime_ips:.1f}, "
                         f"ratio onnxruntime/hobbit: {self.ips_ratio:.3f}")
        lines += [f"hobbit: {self.executed_gflops:.1f} GFLOP/s executed"
                  + (f" = {self.peak_percent:.0f}% of the {self.peak_gflops:.0f} GFLOP/s FMA peak"
                     if self.peak_percent is not None else "")
                  + f"; {self.flops / 1e9:.3f} GFLOP per run counting Winograd convs as direct: {self.gflops:.1f} GFLOP/s"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Every number of the result, JSON-ready (None where no timing is reported)."""
        return {"model": self.model, "threads": self.threads, "runs": self.runs, "inputs": self.inputs,
                "mode": self.mode, "batch": self.batch, "streams": self.streams,
                "compile_seconds": self.compile_seconds,
                "max_abs_error": self.max_abs_error if math.isfinite(self.max_abs_error) else None,
                "outputs_agree": self.mismatch is None, "mismatch": self.mismatch,
                "hobbit_ms": None if self.hobbit is None else asdict(self.hobbit),
                "onnxruntime_ms": None if self.onnxruntime is None else asdict(self.onnxruntime),
                "ratio": self.ratio, "p90_ratio": self.p90_ratio, "hobbit_ips": self.hobbit_ips,
                "onnxruntime_ips": self.onnxruntime_ips, "ips_ratio": self.ips_ratio,
                "onnxruntime_nospin_ms": None if self.onnxruntime_nospin is None else asdict(self.onnxruntime_nospin),
                "onnxruntime_nospin_ips": self.onnxruntime_nospin_ips, "nospin_ratio": self.nospin_ratio,
                "aot_ms": None if self.aot is None else asdict(self.aot), "aot_ratio": self.aot_ratio,
                "aot_p90_ratio": self.aot_p90_ratio, "aot_ips": self.aot_ips,
                "aot_max_abs_diff": self.aot_max_abs_diff, "aot_export_seconds": self.aot_export_seconds,
                "ctypes_call_us": self.ctypes_call_us,
                "flops": self.flops, "gflops": self.gflops,
                "executed_flops": self.flops if self.executed_flops is None else self.executed_flops,
                "executed_gflops": self.executed_gflops,
                "peak_gflops": self.peak_gflops, "peak_percent": self.peak_percent,
                "memory_bytes": None if self.memory is None else
                {engine: use.to_dict() for engine, use in self.memory.items()}}


def _describe_memory(use: MemoryUse) -> str:
    return (f"{_mb(use.built)} MB after building, {_mb(use.run)} MB after one run, peak {_mb(use.peak)} MB "
            f"({_mb(use.base)} MB after its imports)")


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.0f}"


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


def graph_flops(graph: Graph, executed: bool = False) -> int:
    """Flops of one inference of a compiled graph, from the op registry's per-node counts (views do
    no work): Winograd convs counted as direct, or with `executed` as what their kernels compute."""
    return sum(node_flops(node, executed) for node in graph.nodes if needs_code(node))


def _describe_inputs(specs: list[TensorSpec]) -> str:
    return ", ".join(f"{s.name}: {np.dtype(s.dtype).name}[{'x'.join(map(str, s.shape))}]" for s in specs)


def with_batch(model: ModelSource, batch: int) -> onnx.ModelProto:
    """The model with the first dim of every non-scalar input set to `batch`, the other shapes
    re-inferred. Zoo models and most exported CNNs take any batch this way; a model with its
    batch baked in (a Reshape to a fixed shape) does not: onnx's shape inference or hobbit's
    compile then raises a ShapeError that names the batch."""
    proto = onnx.ModelProto()
    proto.CopyFrom(load_model(model))
    weights = {t.name for t in proto.graph.initializer}
    for value in proto.graph.input:
        shape = value.type.tensor_type.shape
        if value.name not in weights and shape.dim:
            shape.dim[0].Clear()
            shape.dim[0].dim_value = batch
    for value in proto.graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    del proto.graph.value_info[:]
    try:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    except onnx.shape_inference.InferenceError as exc:
        raise ShapeError(f"the model does not run at batch {batch} (its first input dim set to {batch}): "
                         f"{exc}") from exc


@dataclass
class _Setup:
    """The engines built for one model and thread count, their outputs compared, and the
    result they will be timed into (no timings yet); close() removes the exported library's folder."""

    compiled: Any
    session: Any
    feeds: dict[str, np.ndarray]
    names: list[str]
    expected: list[np.ndarray]
    result: BenchResult
    jit_outputs: list[np.ndarray]
    exported: bench_aot.ExportedModel | None = None
    quiet_session: Any = None  # onnxruntime with allow_spinning=0, when a load table reports it

    def engines(self) -> dict[str, bench_load.Engine]:
        """The engines in the order each round times them: JIT, library (with aot), onnxruntime,
        onnxruntime without spinning (when set up)."""
        engines = {"hobbit": lambda: self.compiled.run(self.feeds)}
        if self.exported is not None:
            engines["aot"] = lambda: self.exported.loaded.run(self.feeds)
        engines["onnxruntime"] = lambda: self.session.run(self.names, self.feeds)
        if self.quiet_session is not None:
            engines[NO_SPIN_ENGINE] = lambda: self.quiet_session.run(self.names, self.feeds)
        return engines

    def close(self) -> None:
        if self.exported is not None:
            self.exported.close()


def _check_counts(runs: int, threads: int, warmup: int, batch: int, streams: int = 1) -> None:
    if runs < 1 or threads < 1 or warmup < 0 or batch < 1 or streams < 1:
        raise HobbitError(f"runs, threads, batch and streams must be at least 1 and warmup at least 0 (got "
                          f"runs={runs}, threads={threads}, warmup={warmup}, batch={batch}, streams={streams})")


def _setup(model: ModelSource, name: str, runs: int, threads: int, build: BuildOptions, seed: int,
           batch: int, aot: bool = False, no_spin: bool = False) -> _Setup:
    """Compile hobbit, open onnxruntime, and compare their outputs on seeded inputs, once per model
    and thread count: every load condition then times the same engines. With `no_spin`, a second
    onnxruntime session whose intra-op threads do not spin is opened too. With `aot` (and agreeing
    outputs) the compiled model is also exported, loaded back and checked against the JIT
    (bench_aot.check_parity raises an ArtifactError if it differs)."""
    require_runnable(build)
    t0 = time.perf_counter()
    try:
        # A real compile, not a compile-cache hit: the compile time is reported and the graph is needed.
        compiled = hobbit.compile(model, threads=threads, cache=False, **build.kwargs())
    except ShapeError as exc:
        if batch == 1:
            raise
        raise ShapeError(f"the model does not run at batch {batch}: {exc}") from exc
    compile_seconds = time.perf_counter() - t0
    session = ort_session(model, threads)
    feeds = random_inputs(compiled.inputs, seed)
    names = list(compiled.output_names)  # a model's outputs, not the flat ones (a bounded output's extent)
    expected = session.run(names, feeds)
    jit_outputs = compiled.run(feeds)
    worst, mismatch = compare_outputs(jit_outputs, expected, names)
    result = BenchResult(name, runs, threads, compile_seconds, worst, mismatch,
                         flops=graph_flops(compiled.report.graph), peak_gflops=fma_peak_gflops(threads),
                         executed_flops=graph_flops(compiled.report.graph, executed=True),
                         inputs=_describe_inputs(compiled.inputs), batch=batch)
    setup = _Setup(compiled, session, feeds, names, expected, result, jit_outputs,
                   quiet_session=ort_session(model, threads, spinning=False) if no_spin else None)
    if aot and mismatch is None:
        setup.exported = bench_aot.export_and_load(compiled)
        try:
            result.aot_max_abs_diff = bench_aot.check_parity(setup.exported.loaded.run(feeds), jit_outputs, names)
        except BaseException:
            setup.close()
            raise
        result.aot_export_seconds = setup.exported.export_seconds
    return setup


def _timed_result(setup: _Setup, mode: str, measured: dict[str, Measured], streams: int = 1) -> BenchResult:
    """The setup's result under `mode` with the measured timings, unless a hobbit run timed
    concurrently with others ended with wrong outputs (then, like any mismatch, no timings; a
    library whose outputs left the JIT's raises, as at setup). The library is timed where
    `measured` has it: in this process, not in the two-procs workers."""
    result = replace(setup.result, mode=mode, streams=streams)
    for outputs in measured["hobbit"].last:
        worst, mismatch = compare_outputs(outputs, setup.expected, setup.names)
        if mismatch is not None:
            return replace(result, max_abs_error=worst, mismatch=f"under {mode}: {mismatch}")
    ours, theirs = measured["hobbit"], measured["onnxruntime"]
    result = replace(result, hobbit=Timing.of(ours.seconds), onnxruntime=Timing.of(theirs.seconds),
                     hobbit_ips=ours.per_second, onnxruntime_ips=theirs.per_second)
    quiet = measured.get(NO_SPIN_ENGINE)
    if quiet is not None:
        result = replace(result, onnxruntime_nospin=Timing.of(quiet.seconds), onnxruntime_nospin_ips=quiet.per_second)
    library = measured.get("aot")
    if library is None:
        return replace(result, aot_max_abs_diff=None, aot_export_seconds=None)
    worst = max(bench_aot.check_parity(outputs, setup.jit_outputs, setup.names) for outputs in library.last)
    return replace(result, aot=Timing.of(library.seconds), aot_ips=library.per_second,
                   aot_max_abs_diff=max(worst, result.aot_max_abs_diff or 0.0),
                   ctypes_call_us=bench_aot.ctypes_call_us(setup.exported))


def run_loads(model: ModelSource, name: str, loads: Sequence[str] = ("none",), runs: int = 30, threads: int = 1,
              warmup: int = 3, build: BuildOptions = BuildOptions(), seed: int = 0, batch: int = 1,
              memory: bool = False, aot: bool = False, no_spin: bool = False) -> list[BenchResult]:
    """Compile and check once, then time both engines under each load condition (LOADS) in turn.

    Every hobbit.compile of it, in this process and in any other, gets `build` (passes, target).

    At batch > 1 the model first gets that batch (with_batch); inferences/s count batch items.
    `memory` also measures both engines' resident memory, each in a fresh process
    (hobbit.bench_memory: a cold compile and a session creation, about one more compile's time).
    `aot` adds the exported library as a third engine (hobbit.bench_aot), under every load
    condition but two-procs, whose workers compile their own engines. `no_spin` adds an onnxruntime
    session with allow_spinning=0 (bench_ort.NO_SPIN) timed beside the default one, for the load tables."""
    unknown = [load for load in loads if load not in LOADS]
    if unknown:
        raise HobbitError(f"unknown load condition(s) {', '.join(unknown)}; known: {', '.join(LOADS)}")
    _check_counts(runs, threads, warmup, batch)
    if batch > 1:
        model = with_batch(model, batch)
    setup = _setup(model, name, runs, threads, build, seed, batch, aot, no_spin)
    try:
        if memory:
            setup.result.memory = bench_memory.measure(model, setup.feeds, threads, ort_options(threads), build)
        if setup.result.mismatch is not None:
            return [replace(setup.result, mode=load) for load in loads]
        results = []
        for load in loads:
            if load == "two-procs":
                measured = bench_load.run_two_procs(model, threads, build, setup.feeds, setup.names, runs, warmup,
                                                    batch, no_spin)
            else:
                measured = bench_load.combine([bench_load.run_in_process(load, setup.engines(), runs, warmup)], batch)
            results.append(_timed_result(setup, load, measured, streams=2 if load == "two-procs" else 1))
        return results
    finally:
        setup.close()


def run_benchmark(model: ModelSource, name: str, runs: int = 30, threads: int = 1, warmup: int = 3,
                  build: BuildOptions = BuildOptions(), seed: int = 0, load: str = "none", batch: int = 1,
                  aot: bool = False) -> BenchResult:
    """Compile, check against onnxruntime, then time the engines alternately under one load condition."""
    return run_loads(model, name, [load], runs, threads, warmup, build, seed, batch, aot=aot)[0]


def run_streams(model: ModelSource, name: str, streams: int, runs: int = 30, warmup: int = 3,
                build: BuildOptions = BuildOptions(), seed: int = 0, batch: int = 1, aot: bool = False,
                no_spin: bool = True) -> BenchResult:
    """Throughput mode: `streams` Python threads at once on one hobbit model compiled with
    threads=1, against one onnxruntime session with one intra-op thread shared the same way
    (with `no_spin`, and one with allow_spinning=0; with `aot`, one loaded library: each thread
    gets its own context).
    Each stream times `runs` runs per engine; inferences/s are summed over the streams."""
    _check_counts(runs, 1, warmup, batch, streams)
    if batch > 1:
        model = with_batch(model, batch)
    setup = _setup(model, name, runs, 1, build, seed, batch, aot, no_spin)
    try:
        if setup.result.mismatch is not None:
            return replace(setup.result, mode="streams", streams=streams)
        measured = bench_load.run_streams(setup.engines(), streams, runs, warmup, batch)
        return _timed_result(setup, "streams", measured, streams)
    finally:
        setup.close()


def profile_model(model: ModelSource, name: str, threads: int, runs: int = 30,
                  build: BuildOptions = BuildOptions(), seed: int = 0) -> str:
    """Per-kernel table (time, GFLOP/s, % of the FMA peak) of one model at one thread count."""
    compiled = hobbit.compile(model, threads=threads, profile=True, cache=False, **build.kwargs())
    times = compiled.profile(random_inputs(compiled.inputs, seed), runs=runs)
    return f"profile of {name} at {threads} thread(s), median of {runs} runs per kernel:\n" + \
        format_profile(times, fma_peak_gflops(threads))


def run_suite(models: Iterable[tuple[str, Callable[[], ModelSource]]], threads: list[int], runs: int = 30,
              warmup: int = 3, build: BuildOptions = BuildOptions(),
              report: Callable[[BenchResult], None] | None = None, loads: Sequence[str] = ("none",),
              batch: int = 1, streams: int | None = None, memory: bool = True,
              aot: bool = False) -> list[BenchResult]:
    """Benchmark every (model, thread count, load condition), then, with `streams`, each
    model in throughput mode; each model is loaded once, when its turn comes. With `memory`,
    both engines' resident memory is measured once per model, at the first thread count.

    The FMA peaks (this host's, whatever the target of `build`: the code runs on this hardware)
    are measured first, while nothing else of ours is running.
    Results come back ordered by mode, then thread count, then model, like the tables.
    Whenever the results make load tables (a load but none, a batch, streams), onnxruntime is
    also timed with allow_spinning=0 beside its default session."""
    require_runnable(build)
    no_spin = any(load != "none" for load in loads) or batch > 1 or streams is not None
    for n in threads:
        fma_peak_gflops(n)
    results: list[BenchResult] = []

    def keep(found: list[BenchResult]) -> None:
        for result in found:
            if report is not None:
                report(result)
            results.append(result)

    for name, load in models:
        model = load()
        for n in threads:
            keep(run_loads(model, name, loads, runs, n, warmup, build, batch=batch,
                           memory=memory and n == threads[0], aot=aot, no_spin=no_spin))
        if streams is not None:
            keep([run_streams(model, name, streams, runs, warmup, build, batch=batch, aot=aot)])
    # Streams run at one thread per stream, which need not be one of `threads`.
    return sorted(results, key=lambda r: (MODES.index(r.mode), threads.index(r.threads) if r.mode != "streams" else 0))


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


def require_runnable(build: BuildOptions) -> None:
    """A TargetError unless this host can run code built for the target of `build`: the
    benchmark runs every engine here."""
    target = build.built_for
    why = None if target is None else target.runs_on(host_target())
    if why:
        raise TargetError(f"the benchmark runs the model here, and code for {target.triple} '{target.cpu}' "
                          f"cannot run on this host: {why}")


def describe_build(build: BuildOptions) -> str | None:
    """'code built for CPU (SPEC, N-bit vectors)' when the target is not this host, else None."""
    target = build.built_for
    if target is None:
        return None
    return f"code built for {target.cpu} ({build.target}, {target.vector_bits}-bit vectors), not for this host's CPU"


# -- reports -----------------------------------------------------------------------------
def machine_info(build: BuildOptions = BuildOptions()) -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, memory, library versions, date, the
    1-minute load average when called (take it before benchmarking: other work skews the timings),
    and what the code was built for when that is not this host (None when it is)."""
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
            "date": datetime.date.today().isoformat(), "load_average": round(os.getloadavg()[0], 2),
            "built_for": _built_for(build)}


def _built_for(build: BuildOptions) -> dict[str, Any] | None:
    target = build.built_for
    if target is None:
        return None
    return {"target": build.target, "cpu": target.cpu, "vector_bits": target.vector_bits,
            "description": describe_build(build)}


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
    """One row per model and thread count of the plain condition (load none, no streams; empty
    when there is none); rows whose outputs disagree carry no timings. When the exported
    library was timed, its median and the ratio AOT/JIT follow the onnxruntime ratio."""
    results = [r for r in results if r.mode == "none"]
    if not results:
        return ""
    aot = any(r.aot is not None for r in results)
    header = ("| model | threads | hobbit median (p10–p90) ms | onnxruntime median (p10–p90) ms | ratio "
              + ("| AOT library median (p10–p90) ms | AOT/JIT " if aot else "")
              + "| hobbit GFLOP/s executed | % of FMA peak | GFLOP/s, Winograd as direct | compile s |")
    lines = [header, "| --- " * (11 if aot else 9) + "|"]
    for r in results:
        if r.mismatch is not None:
            cells = ["—", "—", "outputs disagree"] + ["—", "—"] * aot + ["—", "—", "—"]
        else:
            percent = "—" if r.peak_percent is None else f"{r.peak_percent:.0f}%"
            cells = [_span(r.hobbit), _span(r.onnxruntime), f"{r.ratio:.2f}"] + _aot_cells(r, _span) * aot \
                + [f"{r.executed_gflops:.1f}", percent, f"{r.gflops:.1f}"]
        lines.append(f"| {r.model} | {r.threads} | " + " | ".join(cells) + f" | {r.compile_seconds:.1f} |")
    return "\n".join(lines) + "\n"


def _aot_cells(r: BenchResult, timing: Callable[[Timing], str]) -> list[str]:
    if r.aot is None:
        return ["—", "—"]
    return [timing(r.aot), f"{r.aot_ratio:.2f}"]


def scaling_table(results: list[BenchResult]) -> str:
    """Per model and thread count N > 1: how many times faster each engine ran at N threads
    than at one (median over median), for models measured at both with agreeing outputs,
    in the plain condition. Empty when there is nothing to compare."""
    results = [r for r in results if r.mode == "none" and r.mismatch is None]
    one = {r.model: r for r in results if r.threads == 1}
    rows = [(one[r.model], r) for r in results if r.threads > 1 and r.model in one]
    if not rows:
        return ""
    lines = ["| model | threads | hobbit speed-up over 1 thread | onnxruntime speed-up over 1 thread |",
             "| --- | --- | --- | --- |"]
    for base, r in rows:
        lines.append(f"| {r.model} | {r.threads} | {base.hobbit.median / r.hobbit.median:.2f}x "
                     f"| {base.onnxruntime.median / r.onnxruntime.median:.2f}x |")
    return "\n".join(lines) + "\n"


def memory_table(results: list[BenchResult]) -> str:
    """Both engines' resident memory per model (measured at one thread count, each engine in a
    fresh process, hobbit.bench_memory), in MB: after building (hobbit's compile, onnxruntime's
    session), after one run, the peak, and the ratios hobbit/onnxruntime (below 1: hobbit uses
    less). Empty when nothing was measured."""
    rows: dict[tuple[str, int], BenchResult] = {}
    for r in results:
        if r.memory is not None:
            rows.setdefault((r.model, r.threads), r)
    if not rows:
        return ""
    lines = ["| model | threads | hobbit after compile / after run / peak MB "
             "| onnxruntime after session / after run / peak MB | ratio after run | ratio of peaks "
             "| after imports: hobbit / onnxruntime MB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for (model, threads), r in rows.items():
        ours, theirs = r.memory["hobbit"], r.memory["onnxruntime"]
        lines.append(f"| {model} | {threads} | {_mb(ours.built)} / {_mb(ours.run)} / {_mb(ours.peak)} "
                     f"| {_mb(theirs.built)} / {_mb(theirs.run)} / {_mb(theirs.peak)} "
                     f"| {ours.run / theirs.run:.2f} | {ours.peak / theirs.peak:.2f} "
                     f"| {_mb(ours.base)} / {_mb(theirs.base)} |")
    return "\n".join(lines) + "\n"


def _median_p90(t: Timing) -> str:
    return f"{_ms(t.median)} ({_ms(t.p90)})"


def _rate(per_second: float | None) -> str:
    if per_second is None:
        return "—"
    return f"{per_second:.0f}" if per_second >= 100 else f"{per_second:.1f}"


SPINNING = "default (spinning)"
NOT_SPINNING = f"{', '.join(f'{k}={v}' for k, v in NO_SPIN.items())}"


def _load_row(r: BenchResult, aot: bool, session: str) -> str:
    """One row of a load table: hobbit against one onnxruntime session (SPINNING, the default
    one, or NOT_SPINNING), both timed in the same rounds."""
    cells = [r.model, str(r.threads), str(r.batch), str(r.streams), session]
    theirs, their_ips = ((r.onnxruntime, r.onnxruntime_ips) if session == SPINNING
                         else (r.onnxruntime_nospin, r.onnxruntime_nospin_ips))
    if r.mismatch is not None:
        cells += ["—", "—", "outputs disagree", "—", "—", "—", "—"] + ["—", "—"] * aot
    elif theirs is None:
        cells += [_median_p90(r.hobbit), "not timed", "—", "—", _rate(r.hobbit_ips), "—", "—"]
        cells += _aot_cells(r, _median_p90) * aot
    else:
        ips_ratio = None if their_ips is None or r.hobbit_ips is None else their_ips / r.hobbit_ips
        cells += [_median_p90(r.hobbit), _median_p90(theirs), f"{r.hobbit.median / theirs.median:.2f}",
                  f"{r.hobbit.p90 / theirs.p90:.2f}", _rate(r.hobbit_ips), _rate(their_ips),
                  "—" if ips_ratio is None else f"{ips_ratio:.2f}"]
        cells += _aot_cells(r, _median_p90) * aot
    return "| " + " | ".join(cells) + " |"


def load_tables(results: list[BenchResult]) -> str:
    """One table per load condition and for the streams mode, each under its description: median
    and p90 latency, their ratios, and inferences/s. Each result has two rows: hobbit against
    onnxruntime's default session, whose idle intra-op threads spin, and against one with
    allow_spinning=0 (bench_ort.NO_SPIN), both timed in the same rounds. Every ratio is below 1
    when hobbit is faster (latency hobbit/onnxruntime, throughput onnxruntime/hobbit). Empty for a
    plain run (load none, batch 1, no streams), which the first table shows in full."""
    if all(r.mode == "none" and r.batch == 1 for r in results):
        return ""
    parts = []
    for mode in MODES:
        rows = [r for r in results if r.mode == mode]
        if rows:
            aot = any(r.aot is not None for r in rows)
            parts.append(
                f"Load **{mode}**: {describe_mode(mode, rows[0].streams)}.\n\n"
                "| model | threads | batch | streams | onnxruntime session | hobbit median (p90) ms "
                "| onnxruntime median (p90) ms | ratio of medians | ratio of p90s | hobbit inf/s | onnxruntime inf/s "
                "| onnxruntime/hobbit inf/s |" + (" AOT library median (p90) ms | AOT/JIT |" if aot else "") + "\n"
                + "| --- " * (14 if aot else 12) + "|\n"
                + "\n".join(_load_row(r, aot, session) for r in rows for session in (SPINNING, NOT_SPINNING))
                + "\n")
    return "\n".join(parts)


def markdown_report(results: list[BenchResult], machine: dict[str, Any], command: str,
                    warmup: int = 3) -> str:
    """BENCHMARKS.md: how the table was made, on what machine, then the table."""
    threads = sorted({r.threads for r in results})
    warning = contention_warning(threads)
    peaks = ", ".join(f"{fma_peak(n).best:.0f} GFLOP/s at {n} thread{'s' * (n > 1)} (median trial "
                      f"{fma_peak(n).median:.0f})" for n in threads)
    trials = fma_peak(threads[0]).trials
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
        f"Measured float32 FMA peak, the best of {trials} short trials spread over under two seconds, each "
        f"thread pinned to its own CPU (other work only slows a trial; the median trial shows how busy the "
        f"machine was): {peaks}.\n\n"
        + (f"Target: {built['description']}; the FMA peak and the % of it are this host's.\n\n"
           if (built := machine.get("built_for")) else "")
        + (f"**Warning:** {warning}.\n\n" if warning else "")
        + f"Inputs: seeded N(0, 1) data ({'; '.join(inputs)}); zoo models carry random weights. "
        "Ratio is hobbit's median over onnxruntime's; below 1 means hobbit is faster. GFLOP/s executed is the "
        "arithmetic of hobbit's compiled graph (2 per multiply-add in convolutions and matrix products, a "
        "Winograd conv's tile GEMMs and transforms as computed, 1 per element elsewhere) over its median "
        "latency, and % of FMA peak is of that; \"Winograd as direct\" counts each Winograd conv as the direct "
        "conv it replaces, which compares across conv algorithms and can pass the peak.\n\n"
        + (f"Load tables: streams is the number of inferences in flight at once; inferences/s count batch items "
           f"over the wall time of the timed rounds (with one stream: batch / mean latency); every ratio is below 1 "
           f"when hobbit is faster (latency hobbit/onnxruntime, throughput onnxruntime/hobbit). Each model has two "
           f"rows: onnxruntime's default session, whose idle intra-op threads spin, and one with "
           f"`{NOT_SPINNING}` (what a user on a shared machine sets), timed in the same rounds as hobbit; "
           f"the hobbit cells of the two rows are the same measurement.\n\n"
           if (loaded := load_tables(results)) else "")
        + (aot_note(results) or "")
        + (f"Memory: resident set size (VmRSS, and VmHWM for the peak) of each engine in a fresh process of its "
           f"own that imports only that engine and numpy, reads the model file, builds it (hobbit: a cold "
           f"compile; onnxruntime: a session with the same options) and runs it once; MB = 10^6 bytes.\n\n"
           if (memory := memory_table(results)) else "")
        + "\n".join(part for part in (markdown_table(results), scaling_table(results), memory, loaded) if part))


def aot_note(results: list[BenchResult]) -> str | None:
    """How the exported library was timed and what its column includes, or None when it was not."""
    calls = [r.ctypes_call_us for r in results if r.ctypes_call_us is not None]
    if not calls:
        return None
    return ("AOT library: for each model and thread count the compiled model is exported (`m.export`) into a "
            "temporary folder and loaded back with `hobbit.load`; its outputs must equal the JIT's (max abs diff "
            f"at most {bench_aot.PARITY_ATOL:g}, else the benchmark stops), and it is timed in the same rounds as "
            "the other two (JIT, library, onnxruntime, in blocks as above). AOT/JIT is the library's median over "
            "the JIT's; below 1 means the library is faster. Both hobbit columns are what a Python caller pays: "
            "the same `run()` (input checks, output allocation, pointer tables) and one ctypes call (the JIT's "
            "entry point, the library's `<name>_run`); C code calling the library pays only the native call. "
            f"A call into the library through ctypes that does no work took {min(calls):.2f}–{max(calls):.2f} µs "
            "(median per call) in this run.\n\n")


def write_json(results: list[BenchResult], machine: dict[str, Any], path: str | os.PathLike) -> None:
    """All numbers per model and thread count, with the machine and settings they were measured under."""
    threads = sorted({r.threads for r in results})
    doc = {"machine": machine,
           "settings": {"rtol": RTOL, "atol": ATOL, "block": BLOCK, "cooldown_s": COOLDOWN_S,
                        "aot_parity_atol": bench_aot.PARITY_ATOL},
           "modes": {r.mode: describe_mode(r.mode, r.streams) for r in results},
           "fma_peak_gflops": {str(n): fma_peak_gflops(n) for n in threads},
           "fma_peak_median_gflops": {str(n): fma_peak(n).median for n in threads},
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
    """Bar chart of hobbit/onnxruntime median ratios: models along x, one bar per thread count
    and load condition."""
    plt = pyplot()
    models = list(dict.fromkeys(r.model for r in results))
    series = sorted({(MODES.index(r.mode), r.threads) for r in results})
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(models) + 2), 4.5))
    for i, (m, n) in enumerate(series):
        mode = MODES[m]
        label = f"{n} thread{'s' * (n > 1)}" + ("" if mode == "none" else f", {mode}")
        for j, model in enumerate(models):
            r = next((r for r in results if r.model == model and r.threads == n and r.mode == mode), None)
            x = j - 0.4 + width * (i + 0.5)
            if r is not None and r.ratio is not None:
                ax.bar(x, r.ratio, width, color=f"C{i}", label=label if j == 0 else None)
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
