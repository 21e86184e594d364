"""Benchmark hobbit against onnxruntime, fairly: compile, check, then time both engines.

Fair means: the same inputs, the same thread count (onnxruntime gets
intra_op_num_threads = N, sequential execution, all graph optimisations on),
warm-up runs for both, then the two engines timed alternately in short blocks
so that clock boosts, other processes and cache state hit both alike; under a load
condition (hobbit.bench.load: a busy core, two processes at once, several threads on
one model, numpy's BLAS threads, the two engines' runs back to back) both engines are
timed under the same load in the same run. Outputs are compared first; a speed ratio
is only meaningful when the answers agree, so `run_benchmark` reports no timings when
they do not. hobbit's GFLOP/s is set against this machine's measured FMA peak
(hobbit.runtime.peak) to show how much of the hardware the generated code uses. With `aot`, the
model exported as a library and loaded back with hobbit.load is timed in the same rounds as a
third engine, after its outputs are checked against the JIT's (hobbit.bench.aot). Every hobbit
compile of a benchmark, in this process or another, gets the same BuildOptions (passes and a
target this host can run, e.g. x86-64-v3 code on an AVX-512 machine); the reports name a target
that is not the host, and the FMA peak stays the host's. The results (hobbit.bench.result) go to
the reports of hobbit.bench.report."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx

import hobbit
from hobbit.bench import aot as bench_aot, load as bench_load, memory as bench_memory, sporadic
from hobbit.bench.load import BLOCK, LOADS, NO_SPIN_ENGINE, BuildOptions, Measured, mode_key
from hobbit.bench.openvino import NOT_INSTALLED, openvino_core, openvino_runner
from hobbit.bench.ort import ModelSource, ort_options, ort_session
from hobbit.bench.result import ATOL, OPENVINO_ENGINE, RTOL, BenchResult, Timing
from hobbit.errors import HobbitError, ShapeError, TargetError
from hobbit.frontend.onnx.importer import load_model
from hobbit.graph.ir import Graph
from hobbit.ops.registry import node_flops
from hobbit.passes.memory import needs_code
from hobbit.runtime.jit import TensorSpec
from hobbit.runtime.peak import fma_peak_gflops
from hobbit.runtime.profile import KernelTime, format_profile
from hobbit.target import host_target


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
    """(largest absolute difference, description of the first disagreement or None); `atol`
    scales with an output's largest magnitude above 1 (hobbit.bench.result.TOLERANCE)."""
    worst = 0.0
    for name, g, e in zip(names, got, expected):
        if g.shape != e.shape:
            return float("inf"), f"output '{name}' has shape {g.shape}, onnxruntime gives {e.shape}"
        want = np.abs(e.astype(np.float64))
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
        worst = max(worst, float(diff.max(initial=0.0)))
        scale = max(1.0, float(want[np.isfinite(want)].max(initial=0.0)))
        bad = diff > atol * scale + rtol * want
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
    openvino: Any = None  # OpenVINO f32's runner, when installed, asked for and its outputs agree

    def engines(self, openvino: bool = False) -> dict[str, bench_load.Engine]:
        """The engines in the order each round times them: JIT, library (with aot), onnxruntime,
        onnxruntime without spinning (when set up), and with `openvino` OpenVINO (when set up)."""
        engines = {"hobbit": lambda: self.compiled.run(self.feeds)}
        if self.exported is not None:
            engines["aot"] = lambda: self.exported.loaded.run(self.feeds)
        engines["onnxruntime"] = lambda: self.session.run(self.names, self.feeds)
        if self.quiet_session is not None:
            engines[NO_SPIN_ENGINE] = lambda: self.quiet_session.run(self.names, self.feeds)
        if openvino and self.openvino is not None:
            engines[OPENVINO_ENGINE] = lambda: self.openvino(self.feeds)
        return engines

    def close(self) -> None:
        if self.exported is not None:
            self.exported.close()


def _check_counts(runs: int, threads: int, warmup: int, batch: int, streams: int = 1) -> None:
    if runs < 1 or threads < 1 or warmup < 0 or batch < 1 or streams < 1:
        raise HobbitError(f"runs, threads, batch and streams must be at least 1 and warmup at least 0 (got "
                          f"runs={runs}, threads={threads}, warmup={warmup}, batch={batch}, streams={streams})")


def _setup(model: ModelSource, name: str, runs: int, threads: int, build: BuildOptions, seed: int,
           batch: int, aot: bool = False, no_spin: bool = False, openvino: bool = False) -> _Setup:
    """Compile hobbit, open onnxruntime, and compare their outputs on seeded inputs, once per model
    and thread count: every load condition then times the same engines. With `no_spin`, a second
    onnxruntime session whose intra-op threads do not spin is opened too. With `openvino`, OpenVINO
    f32 is built where installed and its outputs compared with onnxruntime's (_add_openvino). With `aot` (and agreeing
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
    if openvino and mismatch is None:
        _add_openvino(setup, model, threads)
    if aot and mismatch is None:
        setup.exported = bench_aot.export_and_load(compiled)
        try:
            result.aot_max_abs_diff = bench_aot.check_parity(setup.exported.loaded.run(feeds), jit_outputs, names)
        except BaseException:
            setup.close()
            raise
        result.aot_export_seconds = setup.exported.export_seconds
    return setup


def _add_openvino(setup: _Setup, model: ModelSource, threads: int) -> None:
    """OpenVINO f32 as a peer of the plain condition (hobbit.bench.openvino: CPU, one stream of
    `threads` threads, latency hint, f32 forced so that it computes what the others compute): its
    runner, when it builds and its outputs agree with onnxruntime's as hobbit's must; else the
    reason it is not timed, in the result."""
    core = openvino_core()
    if core is None:
        setup.result.openvino_note = NOT_INSTALLED
        return
    try:
        runner = openvino_runner(core, model, threads, "f32", setup.names)
        worst, mismatch = compare_outputs(runner(setup.feeds), setup.expected, setup.names)
    except Exception as exc:  # an op it lacks, a model it refuses: the others are still timed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        setup.result.openvino_note = f"OpenVINO failed: {type(exc).__name__}: {first}"
        return
    setup.result.openvino_max_abs_error = worst
    if mismatch is not None:
        setup.result.openvino_note = f"OpenVINO's outputs disagree with onnxruntime's ({mismatch})"
        return
    setup.openvino = runner


def _timed_result(setup: _Setup, mode: str, measured: dict[str, Measured], streams: int = 1,
                  tail: bool = False) -> BenchResult:
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
    result = replace(result, hobbit=Timing.of(ours.seconds, tail), onnxruntime=Timing.of(theirs.seconds, tail),
                     hobbit_ips=ours.per_second, onnxruntime_ips=theirs.per_second)
    quiet = measured.get(NO_SPIN_ENGINE)
    if quiet is not None:
        result = replace(result, onnxruntime_nospin=Timing.of(quiet.seconds, tail),
                         onnxruntime_nospin_ips=quiet.per_second)
    peer = measured.get(OPENVINO_ENGINE)
    if peer is not None:
        result = replace(result, openvino=Timing.of(peer.seconds, tail))
    elif mode != "none":  # OpenVINO is a peer of the plain condition only
        result = replace(result, openvino_note=None, openvino_max_abs_error=None)
    library = measured.get("aot")
    if library is None:
        return replace(result, aot_max_abs_diff=None, aot_export_seconds=None)
    worst = max(bench_aot.check_parity(outputs, setup.jit_outputs, setup.names) for outputs in library.last)
    return replace(result, aot=Timing.of(library.seconds, tail), aot_ips=library.per_second,
                   aot_max_abs_diff=max(worst, result.aot_max_abs_diff or 0.0),
                   ctypes_call_us=bench_aot.ctypes_call_us(setup.exported))


def _sporadic_result(setup: _Setup, mode: str, timed: dict[str, sporadic.Sporadic]) -> BenchResult:
    """The result of a sporadic condition: latencies (with p99 under poisson), each engine's idle
    cost, no inferences/s (the gaps are the point, not throughput)."""
    floor = timed.pop(sporadic.FLOOR, None)
    measured = {name: Measured(s.seconds, None, [s.last]) for name, s in timed.items()}
    tail = sporadic.condition(mode)[0] == sporadic.POISSON
    result = _timed_result(setup, mode, measured, tail=tail)
    return replace(result, runs=len(timed["hobbit"].seconds),
                   idle_cpu={name: s.idle_cores for name, s in timed.items()},
                   idle_floor=None if floor is None else floor.idle_cores)


def run_loads(model: ModelSource, name: str, loads: Sequence[str] = ("none",), runs: int = 30, threads: int = 1,
              warmup: int = 3, build: BuildOptions = BuildOptions(), seed: int = 0, batch: int = 1,
              memory: bool = False, aot: bool = False, no_spin: bool = False,
              openvino: bool = False, peer_loads: Sequence[str] = ("none",)) -> list[BenchResult]:
    """Compile and check once, then time both engines under each load condition (LOADS) in turn.

    Every hobbit.compile of it, in this process and in any other, gets `build` (passes, target).

    At batch > 1 the model first gets that batch (with_batch); inferences/s count batch items.
    `memory` also measures both engines' resident memory, each in a fresh process
    (hobbit.bench.memory: a cold compile and a session creation, about one more compile's time).
    `aot` adds the exported library as a third engine (hobbit.bench.aot), under every load
    condition but two-procs, whose workers compile their own engines. `no_spin` adds an onnxruntime
    session with allow_spinning=0 (hobbit.bench.ort.NO_SPIN) timed beside the default one, for the load tables.
    `openvino` adds OpenVINO f32 to the plain condition (none), where it is installed, or to each
    in-process condition of `peer_loads` (busy-core too: hobbit.bench.summary's tables).

    The sporadic conditions gaps:MS and poisson:RATE (hobbit.bench.sporadic) time every engine,
    the allow_spinning=0 session included, after idle gaps; each engine's latency there is set
    against its back-to-back median, so the plain condition is timed too (first) when `loads`
    lacks it."""
    loads = [sporadic.canonical(load) if sporadic.is_sporadic(load) else load for load in loads]
    unknown = [load for load in loads if load not in LOADS and not sporadic.is_sporadic(load)]
    if unknown:
        raise HobbitError(f"unknown load condition(s) {', '.join(unknown)}; known: {', '.join(LOADS)}, "
                          f"gaps:MS, poisson:RATE")
    if any(sporadic.is_sporadic(load) for load in loads):
        no_spin = True
        if "none" not in loads:
            loads.insert(0, "none")
    _check_counts(runs, threads, warmup, batch)
    if batch > 1:
        model = with_batch(model, batch)
    setup = _setup(model, name, runs, threads, build, seed, batch, aot, no_spin,
                   openvino and any(load in peer_loads for load in loads))
    try:
        if memory:
            setup.result.memory = bench_memory.measure(model, setup.feeds, threads, ort_options(threads), build)
        if setup.result.mismatch is not None:
            return [replace(setup.result, mode=load) for load in loads]
        results = []
        for load in loads:
            if sporadic.is_sporadic(load):
                timed = sporadic.run(load, setup.engines(), runs, warmup, BLOCK, seed)
                results.append(_sporadic_result(setup, load, timed))
                continue
            if load == "two-procs":
                measured = bench_load.run_two_procs(model, threads, build, setup.feeds, setup.names, runs, warmup,
                                                    batch, no_spin)
            else:
                engines = setup.engines(openvino=load in peer_loads)
                measured = bench_load.combine([bench_load.run_in_process(load, engines, runs, warmup)], batch)
            results.append(_timed_result(setup, load, measured, streams=2 if load == "two-procs" else 1))
        return _with_back_to_back(results)
    finally:
        setup.close()


def _with_back_to_back(results: list[BenchResult]) -> list[BenchResult]:
    """The sporadic results with every engine's back-to-back median (the plain condition's)."""
    plain = next((r for r in results if r.mode == "none" and r.mismatch is None), None)
    if plain is None:
        return results
    medians = {engine: t.median for engine, t in plain.timings().items()}
    return [replace(r, back_to_back=medians) if sporadic.is_sporadic(r.mode) and r.mismatch is None else r
            for r in results]


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


def profile_times(model: ModelSource, threads: int, runs: int = 30, build: BuildOptions = BuildOptions(),
                  seed: int = 0, precision: str = "fp32") -> list[KernelTime]:
    """Every fused kernel's median time over `runs` runs of one model compiled with profile=True
    at one thread count and precision, on seeded inputs."""
    compiled = hobbit.compile(model, threads=threads, profile=True, cache=False, precision=precision,
                              **build.kwargs())
    return compiled.profile(random_inputs(compiled.inputs, seed), runs=runs)


def profile_model(model: ModelSource, name: str, threads: int, runs: int = 30,
                  build: BuildOptions = BuildOptions(), seed: int = 0) -> str:
    """Per-kernel table (time, GFLOP/s, % of the FMA peak) of one model at one thread count."""
    times = profile_times(model, threads, runs, build, seed)
    return f"profile of {name} at {threads} thread(s), median of {runs} runs per kernel:\n" + \
        format_profile(times, fma_peak_gflops(threads))


def run_suite(models: Iterable[tuple[str, Callable[[], ModelSource]]], threads: list[int], runs: int = 30,
              warmup: int = 3, build: BuildOptions = BuildOptions(),
              report: Callable[[BenchResult], None] | None = None, loads: Sequence[str] = ("none",),
              batch: int = 1, streams: int | None = None, memory: bool = True,
              aot: bool = False, openvino: bool = True) -> list[BenchResult]:
    """Benchmark every (model, thread count, load condition), then, with `streams`, each
    model in throughput mode; each model is loaded once, when its turn comes. With `memory`,
    both engines' resident memory is measured once per model, at the first thread count.

    The FMA peaks (this host's, whatever the target of `build`: the code runs on this hardware)
    are measured first, while nothing else of ours is running.
    Results come back ordered by mode, then thread count, then model, like the tables.
    Whenever the results make load tables (a load but none, a batch, streams), onnxruntime is
    also timed with allow_spinning=0 beside its default session. With `openvino`, OpenVINO f32
    is timed beside onnxruntime in the plain condition where it is installed."""
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
                           memory=memory and n == threads[0], aot=aot, no_spin=no_spin, openvino=openvino))
        if streams is not None:
            keep([run_streams(model, name, streams, runs, warmup, build, batch=batch, aot=aot)])
    # Streams run at one thread per stream, which need not be one of `threads`.
    return sorted(results, key=lambda r: (mode_key(r.mode), threads.index(r.threads) if r.mode != "streams" else 0))


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
