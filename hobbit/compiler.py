"""compile(): one path for every backend.

frontend -> the backend's graph passes -> its plans (memory planning) -> its LLVM module ->
LLVM's optimiser -> the backend's finish (hobbit.backend.base: kept for the in-process JIT,
an ELF object for a CPU this host cannot run, PTX/cubin or an AMDGPU code object for a GPU)
-> the model of what it made (hobbit.runtime.finish). The target picks the backend
(hobbit.backend.select); nothing else here asks which device it is."""

from __future__ import annotations

import hashlib
import numbers
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hobbit import zoo
from hobbit.backend.base import Backend, Module
from hobbit.backend.cpu.module import pack_weights
from hobbit.backend.llvm import Optimized, PartCompiler
from hobbit.backend.polly import check_loops, opt_tool
from hobbit.backend.select import backend_for
from hobbit.errors import CodegenError, ConfigError, InputValuesNeeded, SymbolicInputShape
from hobbit.frontend.common.source import ModelInput, Source
from hobbit.frontend.formats import open_source
from hobbit.graph.ir import Graph
from hobbit.passes import run_pipeline
from hobbit.plan.memory import MemoryPlan
from hobbit.runtime import cache as compile_cache
from hobbit.runtime import gpu_cache
from hobbit.runtime.cpus import default_threads
from hobbit.runtime.export_only import ExportOnlyModel
from hobbit.runtime.finish import finished_model
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.jit import CompiledModel
from hobbit.runtime.memory import collector_paused, release_garbage, small_pages
from hobbit.runtime.nodearg import node_args
from hobbit.runtime.progress import Progress
from hobbit.runtime.recipe import Recipe
from hobbit.runtime.specialize import SpecializingModel, SymbolicSpec
from hobbit.runtime.dynamic import Build, DynamicModel
from hobbit.graph.extents import NotDynamic, extents_from_json, extents_to_json
from hobbit.dynamic_compile import (cache_pairs, declared_ranges, dynamic_graph, first_bound, input_ranges,
                                    per_sample, run_time_symbols, smallest_sizes)
from hobbit.target import Target, host_target, parse_target

ModelSource = ModelInput | Source


@dataclass
class CompileReport:
    """What the compiler did, for `inspect` and `--emit` (every backend's)."""

    graph: Graph
    plan: MemoryPlan
    target: Target  # or a GpuTarget
    threads: int  # threads per inference the code was built for (1 on a GPU)
    llvm_ir: str | None  # None after compile() for a CPU, which keeps no IR text (lower_to_llvm does)
    seconds: dict[str, float] = field(default_factory=dict)
    optimized: object = None
    weights: np.ndarray | None = None  # the packed constants; the graph's constants are views of it


def lower_to_llvm(model: ModelSource, target: Target | str | None = None, passes: list[str] | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None,
                  opt_level: int = 3, threads: int | None = None, profile: bool = False,
                  progress: Progress | None = None,
                  input_values: dict[str, np.ndarray] | None = None, keep_ir: bool = True,
                  precision: str = "fp32", schedule: str = "auto", loops: str = "llvm") -> CompileReport:
    """Model -> graph after the passes, memory plan and optimised LLVM module, on the target's
    backend (hobbit.backend.base); `target`, `precision`, `schedule` and `loops` are as
    compile()'s. See _lower."""
    target = parse_target(target)
    backend, loops = resolve_codegen(target, schedule, loops, opt_level)
    precision = backend.check_precision(precision, target, passes)
    threads = resolve_threads(threads, target)
    opt_level = resolve_opt_level(opt_level)
    return _lower(open_source(model), backend, target, threads, precision, opt_level, passes, input_shapes,
                  input_values, profile, keep_ir, progress or Progress(None), loops=loops)[0]


@small_pages()
def _lower(source: Source, backend: Backend, target: Target, threads: int, precision: str, opt_level: int,
           passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
           input_values: dict[str, np.ndarray] | None, profile: bool, keep_ir: bool,
           show: Progress, graph: Graph | None = None, loops: str = "llvm") -> tuple[CompileReport, Module, Optimized]:
    """import -> the backend's passes -> its plans (memory planning) -> its module -> LLVM's
    optimiser: the report, the module as built (its launches, for a GPU's finish) and what
    LLVM made of it. LLVM's threads take the module's kernels as they are finished
    (hobbit.backend.module_parts).

    The constants are packed right after memory planning, while no IR exists yet: packing
    holds the old arrays and the blob at once (the JIT stage's peak when it came last,
    ResNet-18 339 MB); the graph keeps views into the blob. The llvmlite module is dropped
    as soon as its text exists (its Python objects took ~70 MB for ResNet-50, ~9x the text);
    `keep_ir=False` drops the text too once parsed (unless the backend keeps it). Between
    stages, what the last one replaced is freed and handed back to the system
    (hobbit.runtime.memory.release_garbage), so it does not add to the next stage's peak.
    `graph`: the graph after the passes where the caller made it (a model with run-time dims);
    `loops`: LLVM's loop optimiser, with or without Polly (hobbit.backend.polly).
    All of it runs with numpy's huge-page advice off (hobbit.runtime.memory.small_pages)."""
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    if graph is None:
        show.stage("import")
        graph = source.import_graph(input_shapes, input_values)
        times["import"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        show.stage("passes")
        graph = run_pipeline(graph, backend.pipeline(precision, target, passes), target)
    plan = backend.plan(graph, target, threads)
    release_garbage()
    weights = pack_weights(graph, plan)
    release_garbage()
    times["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("codegen")
    parts = PartCompiler(target, opt_level, backend.compile_threads(target), jit_code=backend.in_process(target),
                         loops=loops)
    try:
        with collector_paused():
            module = backend.build_module(graph, plan, target, threads, profile, show.kernel, parts)
        release_garbage()
        times["codegen"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        show.stage("LLVM optimise")
        optimized = parts.finish(module.text)
    finally:
        parts.close()
    times["llvm"] = time.perf_counter() - t0
    text = None
    if keep_ir or backend.keeps_ir:
        text = module.whole_text() if module.whole_text else module.text
    report = CompileReport(graph, plan, target, threads, text, times, optimized.module, weights)
    return report, Module(text or "", module.launches), optimized


def resolve_threads(threads: int | None, target: Target | None = None) -> int:
    """The `threads` argument -> the thread count to build for: a positive integer as given,
    None -> default_threads() (HOBBIT_NUM_THREADS, else the CPUs this process may use), or 1
    for a target this host cannot run (this host's CPUs say nothing about that machine's),
    and 1 for a backend whose code runs on no team of host threads (a GPU's parallelism is
    its grids'). Checked up front so a bad value is one clear error naming the argument, not
    a TypeError deep in planning, and 0 is refused rather than read as "the default"."""
    if target is not None and not backend_for(target).team:
        return 1
    if threads is None:
        return 1 if target is not None and target.runs_on(host_target()) else default_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ConfigError(f"threads= must be a positive integer, or None for the default "
                          f"(HOBBIT_NUM_THREADS, else the CPUs this process may use); got {threads!r}")
    return int(threads)


def resolve_codegen(target: Target, schedule: str, loops: str, opt_level: int) -> tuple[Backend, str]:
    """The backend of `target` at `schedule` (hobbit.backend.select) and the loop optimiser,
    checked before anything is imported: Polly (hobbit.backend.polly) runs inside LLVM's
    optimiser on a CPU's module, so it needs opt-22, an opt_level above 0 and a CPU target."""
    backend = backend_for(target, schedule)
    loops = check_loops(loops)
    if loops != "llvm":
        if not backend.team:
            raise ConfigError(f"loops={loops!r} optimises CPU code; GPU code is optimised by LLVM's own pipeline")
        if opt_level == 0:
            raise ConfigError(f"loops={loops!r} runs inside LLVM's optimiser, which opt_level=0 skips")
        opt_tool()
    return backend, loops


def resolve_opt_level(opt_level: int) -> int:
    """LLVM's optimisation levels are 0-3; anything else is one clear error naming the argument."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, numbers.Integral) or not 0 <= opt_level <= 3:
        raise ConfigError(f"opt_level= must be an integer from 0 to 3 (LLVM's -O levels); got {opt_level!r}")
    return int(opt_level)


def compile(model: ModelSource, target: str | Target = "host", threads: int | None = None,
            precision: str = "fp32", opt_level: int = 3,
            passes: list[str] | None = None,
            input_shapes: dict[str, tuple[int | tuple[int, int], ...]] | None = None, profile: bool = False,
            cache: bool | None = None,
            progress: bool | None = None, signature: str | None = None,
            external_data_dir: str | os.PathLike | None = None,
            dynamic_shapes: dict[str, tuple[int, int]] | bool | None = None,
            schedule: str = "auto", loops: str = "llvm"
            ) -> CompiledModel | DynamicModel | SpecializingModel | ExportOnlyModel:
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

    A model with symbolic input dims (not fixed by `input_shapes`) comes back as a
    DynamicModel where every kernel it needs computes inside run-time extents: one module
    runs every size of those dims (hobbit.runtime.dynamic). `dynamic_shapes` bounds them,
    {symbol: (low, high)} by the names the model gives its dims (a symbol left out grows as
    calls need); False turns the run-time dims off. A model whose only symbolic dim is a
    batch dim, a model whose run-time dims some kernel cannot follow (`reason` on the model
    says which), or one whose shapes depend on the values of small inputs, comes back as a
    SpecializingModel: it checks each call against the declarations and bounds and compiles
    one variant per input signature (see hobbit.runtime.specialize). Code for a GPU or another
    CPU is compiled for fixed shapes: its `reason` names the dims to fix, and bounds asked for
    there are a ConfigError (static_only).

    `threads` is the thread count per inference (default: HOBBIT_NUM_THREADS, else the CPUs
    this process may use, see hobbit.runtime.cpus; a fresh compile records it as report.threads);
    `precision` "bf16" runs convolutions and fully-connected layers on bf16 weights and
    activations with float32 accumulation (vdpbf16ps: needs AVX512-BF16, else a TargetError;
    hobbit.passes.bf16; on target "cuda", Conv and MatMul on bf16 tensor cores), "tf32" (target
    "cuda" only) runs Conv and MatMul on tensor cores with TF32 operands and float32 sums
    (hobbit.passes.tensor_cores, hobbit.plan.gpu.mma), "fp32" (the default) everything in
    float32;
    `passes` replaces the default graph pass pipeline of that precision (see hobbit.passes);
    `input_shapes` fixes symbolic input dims, {name: shape}; a dim given as (low, high) in a
    shape is a run-time dim with those bounds instead (dynamic_compile.input_ranges);
    `profile` builds in per-kernel timers, read with CompiledModel.profile();
    `cache` reuses native code from the compile cache on disk (hobbit.runtime.cache, and
    hobbit.runtime.gpu_cache for a GPU's device code; on by
    default, HOBBIT_CACHE=0 turns it off; profiled builds bypass it); a model loaded from it
    carries a CachedReport without the graph; `progress` shows the stages on stderr
    (default: only on a terminal, once a compile has taken a second);
    `external_data_dir` names the folder of the external-data files of an ONNX model given as
    bytes or a ModelProto, which has no folder of its own: without it such a model is refused
    (a model file reads them from its own folder; hobbit.frontend.onnx.external_data);
    `schedule` "auto" (the default) picks hobbit's schedules from shapes and target; "naive"
    emits convolutions, matrix products, pooling and reductions as plain loop nests, with no
    tiling, packing or microkernel (hobbit.backend.cpu.naive: the input of the Polly
    experiment, slow without it); `loops` "llvm" (the default) optimises with llvmlite's O3
    pipeline, "polly" with opt-22's (Debian's llvm-22; else a MissingDependencyError) and
    Polly in it right before the loop vectoriser (its default place), "polly-early" with
    Polly before the standard pipeline (hobbit.backend.polly)."""
    if external_data_dir is not None:  # a pickled model may be rebuilt where the current directory differs
        external_data_dir = os.path.abspath(external_data_dir)
    model = zoo.resolve(model)
    source = open_source(model, signature, external_data_dir)
    machine = parse_target(target)
    backend, loops = resolve_codegen(machine, schedule, loops, opt_level)
    threads = resolve_threads(threads, machine)
    precision = backend.check_precision(precision, machine, passes)
    opt_level = resolve_opt_level(opt_level)

    resolved = input_ranges(source, input_shapes, dynamic_shapes)
    fixed, run_time = resolved.shapes, resolved.dynamic_shapes

    def build(shapes: dict[str, tuple[int, ...]], values: dict[str, np.ndarray]) -> CompiledModel | ExportOnlyModel | GpuModel:
        with Progress.for_compile(progress) as show:
            return _build(source, backend, machine, threads, precision, opt_level, passes,
                          {**(fixed or {}), **shapes}, values, profile, cache, show, loops)

    try:
        compiled = build({}, {})
    except (SymbolicInputShape, InputValuesNeeded) as exc:
        declared = source.declared_outputs()
        outputs = [SymbolicSpec(name, shape, dtype) for name, shape, dtype in declared]
        needed = exc.inputs if isinstance(exc, InputValuesNeeded) else []
        inputs = resolved.declared or source.declared_inputs(fixed)
        described = node_args(_described(source.described(fixed), inputs))
        reason = "the model's shapes depend on the values of inputs" if needed else None
        if not needed:
            try:
                with Progress.for_compile(progress) as show:
                    dynamic = compile_dynamic(source, backend, machine, threads, precision, opt_level, passes,
                                              fixed, inputs, run_time, profile, cache, show, described, loops)
                dynamic.recipe = _recipe(model, source, target, threads, precision, opt_level, passes,
                                         input_shapes, profile, cache, progress, signature, external_data_dir,
                                         dynamic_shapes, schedule, loops)
                return dynamic
            except NotDynamic as why:
                reason = str(why)
            except InputValuesNeeded as values:
                needed, reason = values.inputs, "the model's shapes depend on the values of inputs"
        compiled = SpecializingModel(inputs, outputs, needed, build,
                                     importer=lambda shapes: source.import_graph({**(fixed or {}), **shapes}),
                                     node_args=described, ranges=declared_ranges(inputs, run_time))
        compiled.reason = reason
    # What a pickle of the model carries (hobbit.runtime.recipe): threads as resolved, so
    # another process builds the same code and finds it in the compile cache.
    compiled.recipe = _recipe(model, source, target, threads, precision, opt_level, passes, input_shapes, profile,
                              cache, progress, signature, external_data_dir, dynamic_shapes, schedule, loops)
    return compiled


def _described(described: tuple[list, list], declared: list) -> tuple[list, list]:
    """The inputs as onnxruntime would describe them, with every dim the declarations fix as
    its size (a size that input_shapes= gives beside a range, or fixes through a shared symbol)."""
    sizes = {d.name: d.shape for d in declared if not d.sequence}
    inputs = []
    for name, dims, kind in described[0]:
        shape = sizes.get(name)
        if shape is not None and len(shape) == len(dims):
            dims = [size if size is not None else dim for dim, size in zip(dims, shape)]
        inputs.append((name, dims, kind))
    return inputs, described[1]


def _recipe(model: object, source: Source, target: object, threads: int, precision: str, opt_level: int,
            passes: list[str] | None, input_shapes: object, profile: bool, cache: bool | None,
            progress: bool | None, signature: str | None, external_data_dir: str | None,
            dynamic_shapes: object, schedule: str, loops: str) -> Recipe:
    return Recipe(compile, model, type(source).portable_model,
                  {"target": target, "threads": threads, "precision": precision, "opt_level": opt_level,
                   "passes": passes, "input_shapes": input_shapes, "profile": profile, "cache": cache,
                   "progress": progress, "signature": signature, "external_data_dir": external_data_dir,
                   "dynamic_shapes": dynamic_shapes, "schedule": schedule, "loops": loops})


def compile_dynamic(source: Source, backend: Backend, target: Target, threads: int, precision: str,
                    opt_level: int, passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
                    declared: list, dynamic_shapes: object, profile: bool, cache: bool | None, show: Progress,
                    described: tuple, loops: str = "llvm") -> DynamicModel:
    """One module for every size of the model's symbolic dims (hobbit.runtime.dynamic), or
    NotDynamic. The CPU JIT only: code for another machine and GPU code are compiled per shape
    (see static_only)."""
    if not backend.in_process(target):
        static_only(declared, target, dynamic_shapes)
    symbols, ranges = run_time_symbols(declared, dynamic_shapes)
    try:
        return _dynamic_model(source, backend, target, threads, precision, opt_level, passes, input_shapes,
                              declared, symbols, ranges, profile, cache, show, described, None, loops)
    except NotDynamic as together:
        try:
            batch, fixed = per_sample(source, input_shapes, declared, symbols)
        except NotDynamic:
            raise together from None
        slot = symbols.index(batch)
        return _dynamic_model(source, backend, target, threads, precision, opt_level, passes, input_shapes,
                              fixed, symbols[:slot] + symbols[slot + 1:], ranges[:slot] + ranges[slot + 1:],
                              profile, cache, show, described, (batch, ranges[slot], declared), loops)


def static_only(declared: list, target: Target, dynamic_shapes: object) -> None:
    """A target whose code this process does not JIT (a GPU, another CPU) is compiled for fixed
    shapes: the dims it needs fixed, by input, dim and symbol, and how to fix them. A ConfigError
    where run-time dims were asked for (dynamic_shapes= bounds, input_shapes= ranges), else
    NotDynamic: the model compiles one variant per shape, and its `reason` says this."""
    dims = [(d.name, axis, symbol) for d in declared if not d.sequence
            for axis, (size, symbol) in enumerate(zip(d.shape, d.symbols)) if size is None]
    where = (f"{target.vendor} GPU code ({target.arch})" if hasattr(target, "vendor")
             else f"code for {target.triple} ({target.cpu})")
    if dynamic_shapes is False:
        raise NotDynamic("run-time dims are off (dynamic_shapes=False)")
    if not dims:  # only sequences' lengths are open
        raise NotDynamic(f"{where} is compiled for fixed shapes")
    listed = ", ".join(f"input '{name}' dim {axis}" + (f" ('{symbol}')" if symbol else "")
                       for name, axis, symbol in dims)
    example = ", ".join(f"'{d.name}': ({', '.join('N' if n is None else str(n) for n in d.shape)}"
                        f"{',' if len(d.shape) == 1 else ''})" for d in declared if None in d.shape and not d.sequence)
    message = (f"{where} is compiled for fixed shapes: it needs {listed} fixed; give them with "
               f"input_shapes={{{example}}}")
    if isinstance(dynamic_shapes, dict) and dynamic_shapes:
        raise ConfigError(f"run-time dims (dynamic_shapes= bounds, input_shapes= ranges) run on this process's "
                          f"CPU JIT only; {message}")
    raise NotDynamic(f"{message} (one compile for those sizes); as it is, each new shape compiles a variant "
                     f"on its first run")


def _dynamic_model(source: Source, backend: Backend, target: Target, threads: int, precision: str,
                   opt_level: int, passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
                   declared: list, symbols: list[str], ranges: list, profile: bool, cache: bool | None,
                   show: Progress, described: tuple, batch: tuple | None, loops: str) -> DynamicModel:
    """The DynamicModel of `symbols` (see compile_dynamic); `batch`: (symbol, range, the
    declarations with it) for a model that runs each sample on its own."""
    def build(bound: tuple[int, ...]) -> Build:
        key = None
        if compile_cache.enabled(cache) and not profile:
            shapes = [[d.name, list(d.shape), list(d.symbols)] for d in declared]
            key = _cache_key(source, backend, target, threads, precision, opt_level, passes, input_shapes, {},
                             {"symbols": symbols, "bound": list(bound), "declared": shapes}, loops)
            hit = _cache_hit(key, show, lambda k: compile_cache.load(k, target, threads))
            extents = hit.report.extra.get("extents") if hit is not None and hit.report.extra else None
            if extents is not None:
                return Build(hit, bound, [extents_from_json(e) for e in extents["inputs"]],
                             [extents_from_json(e) for e in extents["outputs"]],
                             tuple(extents.get("smallest", [1] * len(symbols))),
                             tuple((int(i), int(o)) for i, o in extents.get("in_place", [])))
        graph = dynamic_graph(source, backend, target, precision, passes, input_shapes, declared, symbols, ranges,
                              bound)
        report, module, optimized = _lower(source, backend, target, threads, precision, opt_level, passes,
                                           input_shapes, None, profile, False, show, graph, loops)
        inputs = [v.extents or (None,) * len(v.shape) for v in graph.inputs[:-1]]
        outputs = [v.extents or (None,) * len(v.shape) for v in graph.outputs]
        smallest = smallest_sizes(graph, bound, symbols)
        pairs = tuple(cache_pairs(graph))
        extra = {"extents": {"inputs": [extents_to_json(e) for e in inputs],
                             "outputs": [extents_to_json(e) for e in outputs], "smallest": list(smallest),
                             "in_place": [list(p) for p in pairs]}}
        t0 = time.perf_counter()
        native = backend.finish(optimized, module, report.graph, report.plan, target)
        return Build(finished_model(native, report, t0, show, key, 0.0, extra), bound, inputs, outputs, smallest,
                     pairs)

    first = build(first_bound(ranges))
    ranges = [(max(low, least), high) for (low, high), least in zip(ranges, first.smallest)]
    return DynamicModel(declared, symbols, ranges, build, first, described, batch)


def _cache_key(source: Source, backend: Backend, target: Target, threads: int, precision: str, opt_level: int,
               passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
               input_values: dict[str, np.ndarray], dynamic: dict | None = None, loops: str = "llvm",
               tools: list | None = None) -> str | None:
    """The compile-cache entry of these options (None: the model cannot say what it is);
    `dynamic`, for a module with run-time dims, what decides its code beyond them. The
    backend (its schedule: "cpu" or "cpu-naive") and the loop optimiser decide the code too;
    `tools`, for a GPU, the device toolchain (hobbit.runtime.gpu_cache.toolchain)."""
    options = {"threads": threads, "precision": precision, "opt_level": opt_level, "backend": backend.name,
               "loops": loops,
               "passes": backend.pipeline(precision, target, None if passes is None else list(passes)),
               "input_shapes": {k: list(v) for k, v in (input_shapes or {}).items()},
               "input_values": {k: [v.dtype.str, list(v.shape), hashlib.sha256(v.tobytes()).hexdigest()]
                                for k, v in input_values.items()}}
    if dynamic is not None:
        options["dynamic"] = dynamic
    if tools is not None:
        options["tools"] = tools
    return compile_cache.compile_key(source, target, options)


def _cache_hit(key: str | None, show: Progress, load: Callable[[str], CompiledModel | GpuModel | None]
               ) -> CompiledModel | GpuModel | None:
    """load(key) from the compile cache, CPU (hobbit.runtime.cache) or GPU (hobbit.runtime.
    gpu_cache), shown as a stage; None on a miss or where the model gave no key."""
    show.stage("cache lookup")
    hit = load(key) if key else None
    if hit is not None:
        show.finish("loaded from the compile cache")
    return hit


def _build(source: Source, backend: Backend, target: Target, threads: int, precision: str, opt_level: int,
           passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
           input_values: dict[str, np.ndarray], profile: bool, cache: bool | None,
           show: Progress, loops: str = "llvm") -> CompiledModel | ExportOnlyModel | GpuModel:
    """One variant, on every backend: a compile-cache hit where the backend's finish is this
    process's JIT or a GPU's device code, else lower (import -> passes -> plans -> module ->
    LLVM), the backend's finish, and the model of what it made (hobbit.runtime.finish; stored
    in the cache when looked up there). CPU entries hold code for this process to map
    (hobbit.runtime.cache), GPU entries a GpuModel's export folder (hobbit.runtime.gpu_cache:
    a hit skips LLVM and ptxas, 2-4 s for a zoo model); code for another CPU is not cached."""
    key = device_key = None
    t0 = time.perf_counter()
    if backend.in_process(target) and compile_cache.enabled(cache) and not profile:
        key = _cache_key(source, backend, target, threads, precision, opt_level, passes, input_shapes, input_values,
                         loops=loops)
        hit = _cache_hit(key, show, lambda k: compile_cache.load(k, target, threads))
        if hit is not None:
            return hit
    elif gpu_cache.serves(target) and compile_cache.enabled(cache) and not profile:
        tools = gpu_cache.toolchain(target)
        device_key = _cache_key(source, backend, target, threads, precision, opt_level, passes, input_shapes,
                                input_values, loops=loops, tools=tools)

        def planned() -> tuple[Graph, MemoryPlan]:
            """The graph and plan the cached code was built from: the model must still be the
            one of the key (a model file edited since would give other kernels)."""
            if _cache_key(source, backend, target, threads, precision, opt_level, passes, input_shapes,
                          input_values, loops=loops, tools=tools) != device_key:
                raise CodegenError("emulate() rebuilds a cached GPU model's kernels for the host from its model, "
                                   "which has changed since compile(): compile it again")
            return _planned(source, backend, target, threads, precision, passes, input_shapes, input_values)
        hit = _cache_hit(device_key, show, lambda k: gpu_cache.load(k, planned))
        if hit is not None:
            return hit
    lookup_seconds = time.perf_counter() - t0
    report, module, optimized = _lower(source, backend, target, threads, precision, opt_level, passes,
                                       input_shapes, input_values, profile, False, show, loops=loops)
    show.stage(backend.finish_stage(target))
    t0 = time.perf_counter()
    native = backend.finish(optimized, module, report.graph, report.plan, target)
    model = finished_model(native, report, t0, show, key, lookup_seconds)
    if device_key is not None:
        t0 = time.perf_counter()
        gpu_cache.store(device_key, model)
        report.seconds["cache"] = lookup_seconds + time.perf_counter() - t0
    return model


def _planned(source: Source, backend: Backend, target: Target, threads: int, precision: str,
             passes: list[str] | None, input_shapes: dict[str, tuple[int, ...]] | None,
             input_values: dict[str, np.ndarray]) -> tuple[Graph, MemoryPlan]:
    """The graph after the backend's passes and its plan, as _lower makes them (no module)."""
    graph = source.import_graph(input_shapes, input_values)
    graph = run_pipeline(graph, backend.pipeline(precision, target, passes), target)
    return graph, backend.plan(graph, target, threads)
