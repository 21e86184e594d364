"""compile(): frontend -> passes -> memory plan -> LLVM module -> JIT."""

from __future__ import annotations

import hashlib
import numbers
import os
import time
from dataclasses import dataclass, field

import numpy as np

from hobbit import zoo
from hobbit.backend.llvm import emit_object, optimize
from hobbit.backend.cpu.module import build_module, pack_weights, status_records, view_constants
from hobbit.target import Target, host_target, is_gpu, parse_target
from hobbit.errors import ConfigError, InputValuesNeeded, SymbolicInputShape
from hobbit.frontend.common.source import ModelInput, Source
from hobbit.frontend.formats import open_source
from hobbit.graph.ir import Graph
from hobbit.passes import PRECISIONS, default_pipeline, run_pipeline
from hobbit.passes.bf16 import require_bf16
from hobbit.passes.tensor_cores import require_tensor_cores
from hobbit.plan.memory import MemoryPlan
from hobbit.passes.memory import plan_memory
from hobbit.runtime import cache as compile_cache
from hobbit.runtime import weights as shared_weights
from hobbit.runtime.cpus import default_threads
from hobbit.runtime.export import NativeModel
from hobbit.runtime.export_only import ExportOnlyModel
from hobbit.runtime.jit import CompiledModel, TensorSpec
from hobbit.runtime.memory import release_garbage
from hobbit.runtime.nodearg import node_args
from hobbit.runtime.progress import Progress
from hobbit.runtime.recipe import Recipe
from hobbit.runtime.specialize import SpecializingModel, SymbolicSpec

ModelSource = ModelInput | Source


@dataclass
class CompileReport:
    """What the compiler did, for `inspect` and `--emit`."""

    graph: Graph
    plan: MemoryPlan
    target: Target
    threads: int  # threads per inference the code was built for
    llvm_ir: str | None  # None after compile(), which keeps no IR text (lower_to_llvm does)
    seconds: dict[str, float] = field(default_factory=dict)
    optimized: object = None
    weights: np.ndarray | None = None  # the packed constants; the graph's constants are views of it


def lower_to_llvm(model: ModelSource, target: Target | str | None = None, passes: list[str] | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None,
                  opt_level: int = 3, threads: int | None = None, profile: bool = False,
                  progress: Progress | None = None,
                  input_values: dict[str, np.ndarray] | None = None, keep_ir: bool = True,
                  precision: str = "fp32") -> CompileReport:
    """Model -> graph after the passes, memory plan and optimised LLVM module.

    The constants are packed right after memory planning, while no IR exists yet: packing
    holds the old arrays and the blob at once (the JIT stage's peak when it came last,
    ResNet-18 339 MB); the graph keeps views into the blob. The llvmlite module is dropped
    as soon as its text exists (its Python objects took ~70 MB for ResNet-50, ~9x the text);
    `keep_ir=False` drops the text too once parsed. Between stages, what the last one
    replaced is freed and handed back to the system (hobbit.runtime.memory.release_garbage),
    so it does not add to the next stage's peak. `target` and `precision` are as compile()'s."""
    target = parse_target(target)
    precision = resolve_precision(precision, target, passes)
    threads = resolve_threads(threads, target)
    opt_level = resolve_opt_level(opt_level)
    show = progress or Progress(None)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    show.stage("import")
    graph = open_source(model).import_graph(input_shapes, input_values)
    times["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("passes")
    graph = run_pipeline(graph, default_pipeline(precision) if passes is None else passes, target)
    plan = plan_memory(graph, target, threads)
    release_garbage()
    weights = pack_weights(graph, plan)
    release_garbage()
    times["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("codegen")
    ir_text = str(build_module(graph, plan, target, threads, profile, on_kernel=show.kernel))
    release_garbage()
    times["codegen"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("LLVM optimise")
    optimized = optimize(ir_text, target, opt_level)
    times["llvm"] = time.perf_counter() - t0
    return CompileReport(graph, plan, target, threads, ir_text if keep_ir else None, times, optimized, weights)


def resolve_threads(threads: int | None, target: Target | None = None) -> int:
    """The `threads` argument -> the thread count to build for: a positive integer as given,
    None -> default_threads() (HOBBIT_NUM_THREADS, else the CPUs this process may use), or 1
    for a target this host cannot run (this host's CPUs say nothing about that machine's).
    Checked up front so a bad value is one clear error naming the argument, not a TypeError
    deep in planning, and 0 is refused rather than read as "the default"."""
    if target is not None and is_gpu(target):
        return 1  # a GPU model is one launch sequence; its parallelism is its grids'
    if threads is None:
        return 1 if target is not None and target.runs_on(host_target()) else default_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ConfigError(f"threads= must be a positive integer, or None for the default "
                          f"(HOBBIT_NUM_THREADS, else the CPUs this process may use); got {threads!r}")
    return int(threads)


def resolve_precision(precision: str, target: Target, passes: list[str] | None) -> str:
    """"fp32" or "bf16" (on a target with AVX512-BF16), checked before anything is imported
    ("tf32" is for NVIDIA GPUs: a clear error here).
    An explicit pass list must name the "bf16" pass for bf16: without it nothing would run
    in bf16, and a model silently compiled in float32 is not what was asked for."""
    if is_gpu(target):
        return precision  # compile_gpu says which precisions GPUs have
    if precision == "tf32":
        require_tensor_cores(target, precision)
    if precision not in PRECISIONS:
        raise ConfigError(f"precision= must be one of {', '.join(map(repr, PRECISIONS))}; got {precision!r} "
                          f"(int8 comes from quantized models: see hobbit.quantize)")
    if precision == "bf16":
        require_bf16(target)
        if passes is not None and "bf16" not in passes:
            raise ConfigError(f"precision='bf16' with passes={list(passes)!r}: the list has no 'bf16' pass, so "
                              f"nothing would run in bf16; add it (after 'fuse-depthwise') or leave passes=None")
    return precision


def resolve_opt_level(opt_level: int) -> int:
    """LLVM's optimisation levels are 0-3; anything else is one clear error naming the argument."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, numbers.Integral) or not 0 <= opt_level <= 3:
        raise ConfigError(f"opt_level= must be an integer from 0 to 3 (LLVM's -O levels); got {opt_level!r}")
    return int(opt_level)


def compile(model: ModelSource, target: str | Target = "host", threads: int | None = None,
            precision: str = "fp32", opt_level: int = 3,
            passes: list[str] | None = None,
            input_shapes: dict[str, tuple[int, ...]] | None = None, profile: bool = False,
            cache: bool | None = None,
            progress: bool | None = None, signature: str | None = None,
            external_data_dir: str | os.PathLike | None = None
            ) -> CompiledModel | SpecializingModel | ExportOnlyModel:
    """Compile a model for a CPU and JIT it: ONNX (path, bytes or ModelProto, or the name of
    a zoo model such as "resnet18", as on the command line: hobbit.zoo), or TensorFlow
    by path: a frozen GraphDef (.pb), a SavedModel directory (`signature` picks the signature,
    default serving_default), a Keras file (.keras; needs TensorFlow) or TFLite (.tflite).

    `target` is "host" (this machine, the default), a CPU hobbit knows ("x86-64-v3",
    "znver4", "neoverse-v1"), "TRIPLE:CPU[:FEATURES]" ("aarch64-linux-gnu:neoverse-n1",
    "x86_64-linux-gnu:znver4:-avx512bf16") or a hobbit.target.Target; every schedule reads
    its vector width, registers and caches from it (hobbit.target). Code this host can run
    (the host's own, or an older CPU of its architecture) is JIT'd as usual; code for another
    architecture, or for CPU features this host lacks, comes back as an ExportOnlyModel,
    which exports a library for that machine but does not run here. Its thread count
    defaults to 1 (the host's CPUs say nothing about the deployment machine's).

    A model with symbolic input dims (not fixed by `input_shapes`), or whose shapes depend
    on the values of small inputs, comes back as a SpecializingModel: it checks each call
    against the declarations and compiles one variant per input signature (see
    hobbit.runtime.specialize).

    `threads` is the thread count per inference (default: HOBBIT_NUM_THREADS, else the CPUs
    this process may use, see hobbit.runtime.cpus; a fresh compile records it as report.threads);
    `precision` "bf16" runs convolutions and fully-connected layers on bf16 weights and
    activations with float32 accumulation (vdpbf16ps: needs AVX512-BF16, else a TargetError;
    hobbit.passes.bf16; on target "cuda", Conv and MatMul on bf16 tensor cores), "tf32" (target
    "cuda" only) runs Conv and MatMul on tensor cores with TF32 operands and float32 sums
    (hobbit.passes.tensor_cores, hobbit.plan.gpu.mma), "fp32" (the default) everything in
    float32;
    `passes` replaces the default graph pass pipeline of that precision (see hobbit.passes);
    `input_shapes` fixes symbolic input dims;
    `profile` builds in per-kernel timers, read with CompiledModel.profile();
    `cache` reuses native code from the compile cache on disk (hobbit.runtime.cache; on by
    default, HOBBIT_CACHE=0 turns it off; profiled builds bypass it); a model loaded from it
    carries a CachedReport without the graph; `progress` shows the stages on stderr
    (default: only on a terminal, once a compile has taken a second);
    `external_data_dir` names the folder of the external-data files of an ONNX model given as
    bytes or a ModelProto, which has no folder of its own: without it such a model is refused
    (a model file reads them from its own folder; hobbit.frontend.onnx.external_data)."""
    if external_data_dir is not None:  # a pickled model may be rebuilt where the current directory differs
        external_data_dir = os.path.abspath(external_data_dir)
    model = zoo.resolve(model)
    source = open_source(model, signature, external_data_dir)
    machine = parse_target(target)
    foreign = machine.runs_on(host_target())
    threads = resolve_threads(threads, machine)
    precision = resolve_precision(precision, machine, passes)
    opt_level = resolve_opt_level(opt_level)

    def build(shapes: dict[str, tuple[int, ...]], values: dict[str, np.ndarray]) -> CompiledModel | ExportOnlyModel:
        with Progress.for_compile(progress) as show:
            if is_gpu(machine):
                from hobbit.compiler_gpu import compile_gpu
                return compile_gpu(source, machine, precision, opt_level, passes,
                                   {**(input_shapes or {}), **shapes}, values, show)
            if foreign:
                return _compile_only(source, machine, foreign, threads, precision, opt_level, passes,
                                     {**(input_shapes or {}), **shapes}, values, show)
            return _compile(source, machine, threads, precision, opt_level, passes,
                            {**(input_shapes or {}), **shapes}, values, profile, cache, show)

    try:
        compiled = build({}, {})
    except (SymbolicInputShape, InputValuesNeeded) as exc:
        declared = source.declared_outputs()
        outputs = [SymbolicSpec(name, shape, dtype) for name, shape, dtype in declared]
        needed = exc.inputs if isinstance(exc, InputValuesNeeded) else []
        described = node_args(source.described(input_shapes))
        compiled = SpecializingModel(source.declared_inputs(input_shapes), outputs, needed, build,
                                     importer=lambda shapes: source.import_graph({**(input_shapes or {}), **shapes}),
                                     node_args=described)
    # What a pickle of the model carries (hobbit.runtime.recipe): threads as resolved, so
    # another process builds the same code and finds it in the compile cache.
    compiled.recipe = Recipe(compile, model, type(source).portable_model,
                             {"target": target, "threads": threads, "precision": precision,
                              "opt_level": opt_level,
                              "passes": passes,
                              "input_shapes": input_shapes, "profile": profile, "cache": cache,
                              "progress": progress, "signature": signature,
                              "external_data_dir": external_data_dir})
    return compiled


def _compile_only(model: Source, target: Target, why: str, threads: int, precision: str, opt_level: int,
                  passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
                  input_values: dict[str, np.ndarray], show: Progress) -> ExportOnlyModel:
    """compile() for a CPU this host cannot run: the pipeline to object code, nothing loaded.
    The compile cache holds code for this process to load, so it is not used."""
    report = lower_to_llvm(model, target, passes, input_shapes, opt_level, threads, False, show, input_values,
                           keep_ir=False, precision=precision)
    show.stage("object code")
    t0 = time.perf_counter()
    graph = report.graph
    native = NativeModel(emit_object(report.optimized, target), target, report.weights, report.plan.arena_bytes,
                         [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs],
                         [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype))
                          for name, v in zip(graph.output_names, graph.outputs)],
                         graph.output_layout, status_records(graph, report.plan), threads)
    report.seconds["object"] = time.perf_counter() - t0
    release_garbage()
    show.finish(f"compiled for {target.triple} '{target.cpu}' (export only)")
    return ExportOnlyModel(native, why, report)


def _compile(model: Source, host: Target, threads: int, precision: str, opt_level: int, passes: list[str] | None,
             input_shapes: dict[str, tuple[int, ...]] | None, input_values: dict[str, np.ndarray],
             profile: bool, cache: bool | None, show: Progress) -> CompiledModel:
    """compile() for code this host runs (`host`: this machine, or a CPU it can stand in for):
    a cache hit, or the full pipeline (stored for next time)."""
    key = None
    t0 = time.perf_counter()
    if compile_cache.enabled(cache) and not profile:
        show.stage("cache lookup")
        options = {"threads": threads, "precision": precision, "opt_level": opt_level,
                   "passes": default_pipeline(precision) if passes is None else list(passes),
                   "input_shapes": {k: list(v) for k, v in (input_shapes or {}).items()},
                   "input_values": {k: [v.dtype.str, list(v.shape), hashlib.sha256(v.tobytes()).hexdigest()]
                                    for k, v in input_values.items()}}
        key = compile_cache.compile_key(model, host, options)
        hit = compile_cache.load(key, host, threads) if key else None
        if hit is not None:
            show.finish("loaded from the compile cache")
            return hit
    lookup_seconds = time.perf_counter() - t0
    report = lower_to_llvm(model, host, passes, input_shapes, opt_level, threads, profile, show, input_values,
                           keep_ir=False, precision=precision)
    show.stage("JIT")
    t0 = time.perf_counter()
    weights = report.weights = shared_weights.share(report.weights)
    view_constants(report.graph, report.plan, weights)  # the shared blob may be another variant's
    graph = report.graph
    inputs = [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs]
    outputs = [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype))
               for name, v in zip(graph.output_names, graph.outputs)]
    objects: list[bytes] = []
    model_obj = CompiledModel(report.optimized, report.target, weights, report.plan.arena_bytes, inputs, outputs,
                              report, on_object=objects.append if key else None, layout=graph.output_layout)
    report.seconds["jit"] = time.perf_counter() - t0
    if key and len(objects) == 1:
        show.stage("writing the compile cache")
        t0 = time.perf_counter()
        compile_cache.store(key, objects[0], weights, report.plan.arena_bytes, inputs, outputs, graph.output_layout)
        report.seconds["cache"] = lookup_seconds + time.perf_counter() - t0
    release_garbage()
    show.finish("compiled")
    return model_obj
