"""The `hobbit` command: run, compile, inspect, benchmark and quantize ONNX models.

Every subcommand takes MODEL as a path to an .onnx file or the name of a
built-in zoo model (`hobbit zoo` lists them). Errors hobbit raises on purpose
are printed as one message and exit with status 2, like argparse's usage errors;
Ctrl-C exits with status 130 (128 + SIGINT, what a shell reports for a process
killed by it) and no traceback; see `hobbit COMMAND --help`."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from typing import TextIO

import numpy as np
import onnx

import hobbit
from hobbit import bench, bench_quant, bench_tf, conformance, zoo
from hobbit.bench import random_inputs
from hobbit.cli_inputs import ShapeFlag, declared, input_shapes, load_feeds, parse_input_file, parse_input_shape, \
    require_static, with_input_shapes
from hobbit.cli_output import check_outputs, writing
from hobbit.backend.llvm import emit_assembly, emit_object
from hobbit.emit.naming import kernel_name
from hobbit.compiler import CompileReport, lower_to_llvm
from hobbit.interrupt import interrupted
from hobbit.errors import ConfigError, HobbitError, InputError, TargetError
from hobbit.frontend.onnx import load_model as read_onnx
from hobbit.frontend.source import OnnxSource, Source, detect_format, open_source
from hobbit.passes import DEFAULT_PIPELINE, GPU_PRECISIONS, PASSES, PRECISIONS, default_pipeline
from hobbit.passes.memory import needs_code
from hobbit.quantize.calibrate import declared_inputs
from hobbit.quantize.files import CalibrationFiles
from hobbit.target import CPUS, GpuTarget, Target, host_target, is_gpu, parse_target

EXIT_ERROR = 2

_EPILOG = """examples:
  hobbit run resnet18                       compile a zoo model and run it on random input
  hobbit run model.onnx --input input=x.npy run your model on your data
  hobbit run dynamic.onnx --input-shape input=8x3x224x224
                                            fix a symbolic (batch) dim, run on random input
  hobbit inspect model.onnx                 fused kernels, memory plan, weights size
  hobbit compile model.onnx --emit asm -o model.s
  hobbit compile dynamic.onnx --input-shape input=1x3x224x224 --emit llvm
  hobbit bench                              resnet18: hobbit vs onnxruntime, 1 thread
  hobbit bench --model all --threads 1,2 --plot ratios.png
                                            every zoo model at 1 and 2 threads, chart of ratios
  hobbit bench --load none,busy-core,two-procs --streams 2
                                            the same under load, and throughput of 2 threads on one model
  hobbit quantize model.onnx --calibration images.npy -o model-int8.onnx
                                            int8 QDQ model calibrated on your data
  hobbit zoo                                list the built-in models"""


def load_model(spec: str) -> onnx.ModelProto | str:
    """MODEL argument -> something hobbit.compile accepts: an existing file path (compiled from
    the path, so it shares compile-cache entries with hobbit.compile(path)), or a zoo model."""
    if os.path.exists(spec):
        return spec
    if spec in zoo.MODELS:
        return zoo.build(spec)
    raise _not_a_model(spec)


def model_source(args: argparse.Namespace) -> Source:
    """MODEL and --signature -> the model's Source (its format read from the path)."""
    return open_source(load_model(args.model), args.signature)


def _not_a_model(spec: str) -> HobbitError:
    return HobbitError(f"{spec!r} is neither an existing file nor a zoo model "
                       f"(zoo models: {', '.join(zoo.MODELS)})")


def pipeline(args: argparse.Namespace) -> list[str] | None:
    """--passes / --disable -> the `passes` argument of hobbit.compile (None = default pipeline)."""
    if args.passes is None and not args.disable:
        return None
    default = default_pipeline(getattr(args, "precision", None) or "fp32", getattr(args, "target", None))
    names = default if args.passes is None else [p.strip() for p in args.passes.split(",") if p.strip()]
    for name in list(names) + list(args.disable):
        if name not in PASSES:
            raise HobbitError(f"unknown pass {name!r}; known passes: {', '.join(PASSES)}")
    return [p for p in names if p not in args.disable]


def _report(args: argparse.Namespace, opt_level: int = 0) -> CompileReport:
    """The compile behind `compile` and `inspect`: one fixed-shape build, so --input-shape must
    size every symbolic dim (checked before compiling)."""
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape)
    require_static(source.declared_inputs(shapes),
                   f"`hobbit {args.command}` builds one fixed-shape variant, so each symbolic dim needs a size")
    return lower_to_llvm(source, args.target, passes=pipeline(args), input_shapes=shapes or None,
                         opt_level=opt_level, threads=args.threads, precision=args.precision)


def runnable_here(target: Target | GpuTarget, command: str) -> Target | GpuTarget:
    """The target of a command that runs code in this process: one this host can run, or a GPU
    (whose run says plainly when there is none)."""
    if is_gpu(target):
        return target
    why = target.runs_on(host_target())
    if why:
        raise TargetError(f"`hobbit {command}` runs the model here, and code for {target.triple} '{target.cpu}' "
                          f"cannot run on this host: {why}; use `hobbit compile --emit lib --target ...` to "
                          f"export it for that machine")
    return target


# -- subcommands -------------------------------------------------------------------------
def _summary(array: np.ndarray, count: int = 5) -> str:
    flat = array.reshape(-1)
    values = ", ".join(f"{v:.6g}" for v in flat[:count].tolist())
    more = ", ..." if flat.size > count else ""
    stats = f"  (min {flat.min():.4g}, max {flat.max():.4g})" if flat.size and flat.dtype.kind in "fiu" else ""
    return f"[{values}{more}]{stats}"


def cmd_run(args: argparse.Namespace) -> int:
    """Inputs are read and checked first; their shapes and --input-shape fix the symbolic dims,
    so the compile builds the one variant the run needs."""
    runnable_here(args.target, "run")
    source = model_source(args)
    model_inputs = declared(source, args.input_shape)
    shapes = input_shapes(model_inputs, args.input_shape)
    given = load_feeds(model_inputs, args.input, shapes)
    shapes.update({name: array.shape for name, array in given.items()})
    specs = source.declared_inputs(shapes)
    missing = [spec for spec in specs if spec.name not in given]
    require_static(missing, "random inputs need a size for each symbolic dim",
                   " (or give data with --input NAME=FILE.npy)")
    sequences = [spec.name for spec in missing if spec.sequence]
    if sequences:
        raise InputError(f"inputs {sequences} are sequences of tensors; `hobbit run` cannot make them up "
                         f"(use the Python API)")
    t0 = time.perf_counter()
    model = hobbit.compile(source.model, target=args.target, threads=args.threads, precision=args.precision,
                           passes=pipeline(args), input_shapes=shapes or None, signature=args.signature)
    compile_s = time.perf_counter() - t0
    feeds = {**random_inputs(missing, args.seed), **given}
    for spec in specs:
        origin = "from file" if spec.name in given else "random"
        print(f"input  {spec.name}: {spec.dtype.name}{list(spec.shape)} ({origin})")
    outputs = model.run(feeds)
    times = []
    for _ in range(args.runs):
        t1 = time.perf_counter()
        model.run(feeds)
        times.append(time.perf_counter() - t1)
    for spec, out in zip(model.outputs, outputs):
        print(f"output {spec.name}: {out.dtype.name}{list(out.shape)} {_summary(out)}")
    print(f"compile: {compile_s:.2f} s")
    print(f"latency: {np.median(times) * 1e3:.3f} ms (median of {args.runs} runs after one warm-up)")
    return 0


def _write(text: str, path: str | None) -> None:
    if path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    with writing(path), open(path, "w") as f:
        f.write(text)
    print(f"wrote {path} ({len(text)} characters)", file=sys.stderr)


# What each --emit stage is made from: the IR stages are the module as hobbit generates it (the
# input of LLVM's optimiser, what `opt` and `llc` would be given), the machine stages LLVM's -O3
# code for the target.
_EMIT_OPT_LEVEL = {"llvm": 0, "bc": 0, "graph": 0, "asm": 3, "obj": 3}


def _gpu_model(args: argparse.Namespace):
    """The GpuModel behind `compile`/`inspect --target cuda|rocm`: one fixed-shape build."""
    from hobbit import cli_gpu
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape)
    require_static(source.declared_inputs(shapes),
                   f"`hobbit {args.command}` builds one fixed-shape variant, so each symbolic dim needs a size")
    return cli_gpu.compile_for_gpu(args, source, shapes, pipeline(args))


def cmd_compile(args: argparse.Namespace) -> int:
    if is_gpu(args.target):
        from hobbit import cli_gpu
        return cli_gpu.emit(args, _gpu_model(args), _write, _write_bytes)
    if args.emit == "lib":
        return _export(args)
    if args.emit in ("bc", "obj") and args.output is None and sys.stdout.isatty():
        raise ConfigError(f"--emit {args.emit} is binary: write it to a file with -o FILE (or redirect stdout)")
    report = _report(args, opt_level=_EMIT_OPT_LEVEL[args.emit])
    if args.emit == "llvm":
        _write(report.llvm_ir, args.output)
    elif args.emit == "asm":
        _write(emit_assembly(report.optimized, report.target), args.output)
    elif args.emit == "graph":
        _write(str(report.graph), args.output)
    elif args.emit == "bc":
        _write_bytes(report.optimized.as_bitcode(), args.output)
    else:
        _write_bytes(emit_object(report.optimized, report.target), args.output)
    return 0


def _write_bytes(data: bytes, path: str | None) -> None:
    if path is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with writing(path), open(path, "wb") as f:
        f.write(data)
    print(f"wrote {path} ({len(data)} bytes)", file=sys.stderr)


def _export(args: argparse.Namespace) -> int:
    """`--emit lib -o DIR`: the model as a library with a C API (hobbit.runtime.export)."""
    if not args.output:
        raise ConfigError("--emit lib writes a folder (library, header, weights, manifest): give it with -o DIR")
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape)
    model = hobbit.compile(source.model, target=args.target, threads=args.threads, precision=args.precision,
                           passes=pipeline(args), input_shapes=shapes or None, signature=args.signature)
    with writing(args.output):
        files = model.export(args.output, name=args.name, weights=args.weights)
    for path in files.written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB ({nbytes} bytes)"


def cmd_inspect(args: argparse.Namespace) -> int:
    if is_gpu(args.target):
        from hobbit import cli_gpu
        return cli_gpu.inspect(_gpu_model(args))
    report = _report(args)
    graph, plan = report.graph, report.plan
    passes = pipeline(args)
    passes = default_pipeline(args.precision) if passes is None else passes
    print(f"model {graph.name}: {len(graph.nodes)} nodes after passes "
          f"({', '.join(passes) or 'none'}, then legalize)")
    for v in graph.inputs:
        print(f"  input  {v.name}: {v.type}")
    for v in graph.outputs:
        print(f"  output {v.name}: {v.type}")
    rows = []
    for node in graph.nodes:
        ops = kernel_name(node).split("[", 1)[0] if needs_code(node) else "view:" + node.op
        out = node.outputs[0]
        rows.append((ops, ", ".join(node.fused_names), str(out.type), str(plan.place(out))))
    width = [max(len(r[i]) for r in rows) if rows else 0 for i in range(4)]
    header = ("ops", "onnx nodes", "output", "memory")
    width = [max(w, len(h)) for w, h in zip(width, header)]
    print("  #  " + "  ".join(h.ljust(w) for h, w in zip(header, width)).rstrip())
    for i, row in enumerate(rows):
        print(f"{i:3d}  " + "  ".join(c.ljust(w) for c, w in zip(row, width)).rstrip())
    kernels = sum(1 for n in graph.nodes if needs_code(n))
    print(f"kernels: {kernels}")
    print(f"threads: {report.threads} (scratch and work counters are sized for them)")
    print(f"arena: {_mib(plan.arena_bytes)}")
    print(f"weights: {_mib(plan.weights_bytes)}")
    return 0


def positive_int(text: str) -> int:
    """--threads N, --runs N, ...: refused by argparse (a usage error) unless N >= 1, so 0 cannot
    slip through as "the default" or time nothing."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """--warmup N: 0 is allowed (no warm-up), a negative count is a usage error."""
    return _whole_number(text, 0)


def _whole_number(text: str, least: int) -> int:
    try:
        count = int(text)
    except ValueError:
        count = least - 1
    if count < least:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
    return count


def positive_seconds(text: str) -> float:
    """--timeout SECONDS: a time limit above zero (fractions allowed)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return seconds


def regex(text: str) -> str:
    """--filter REGEX: compiled once here so a bad pattern is a usage error, not a traceback."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a valid regular expression ({exc}): {text!r}") from exc
    return text


def parse_threads(text: str) -> list[int]:
    """--threads 1,2 -> [1, 2] (each at least 1, duplicates dropped, order kept)."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected thread counts >= 1 separated by commas, got {text!r}")
    return list(dict.fromkeys(counts))


def _bench_tf(args: argparse.Namespace) -> int:
    """A TensorFlow model: hobbit on it, TensorFlow on it, hobbit on its ONNX export (hobbit.bench_tf).
    TensorFlow fixes its thread count once per process, hence one --threads value per run."""
    if len(args.threads) > 1:
        raise ConfigError("a TensorFlow model is benchmarked at one thread count per run (TensorFlow fixes its "
                          "thread pool once per process): give --threads N")
    if args.load != ["none"] or args.streams or args.aot or args.batch > 1 or args.target != host_target():
        raise ConfigError("for a TensorFlow model, `hobbit bench` takes --threads, --runs, --warmup, --signature "
                          "and --markdown (no --load, --streams, --aot, --batch or --target yet)")
    result = bench_tf.run_tf_benchmark(args.model, args.threads[0], args.runs, args.warmup, args.signature)
    print(result.format_text())
    table = bench_tf.markdown_table([result])
    print(table, end="")
    if args.markdown:
        machine = bench.machine_info()
        header = (f"`hobbit bench --model {args.model} --threads {args.threads[0]} --runs {args.runs}` on "
                  f"{machine['cpu']} (LLVM: {machine['llvm_cpu']}): medians (p10-p90) in ms\n\n")
        _write(header + table, args.markdown)
    return 0 if result.mismatch is None else 1


def parse_loads(text: str) -> list[str]:
    """--load none,busy-core -> ["none", "busy-core"] (known conditions only, duplicates dropped, order kept)."""
    loads = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [load for load in loads if load not in bench.LOADS]
    if not loads or unknown:
        raise argparse.ArgumentTypeError(f"expected load conditions from {', '.join(bench.LOADS)} separated by "
                                         f"commas, got {text!r}")
    return loads


def bench_models(spec: str, flags: list[ShapeFlag] | None = None, batch: int = 1
                 ) -> list[tuple[str, Callable[[], onnx.ModelProto | str]]]:
    """--model: 'all' (every zoo model), a path, or comma-separated zoo names/paths, checked up
    front: names, and the declared inputs of every file (and of zoo models given --input-shape),
    so a model that cannot be benchmarked fails before minutes of benchmarking, not after."""
    if spec == "all":
        names = list(zoo.MODELS)
    elif os.path.exists(spec):
        names = [spec]
    else:
        names = [part.strip() for part in spec.split(",") if part.strip()]
    for name in names:
        if not os.path.exists(name) and name not in zoo.MODELS:
            raise _not_a_model(name)
    loaders = [(name, lambda name=name: _bench_model(name, flags or [], batch)) for name in names]
    for name, load in loaders:
        if flags or os.path.exists(name):
            load()
    return loaders


def _bench_model(name: str, flags: list[ShapeFlag], batch: int) -> onnx.ModelProto | str:
    """The model with its --input-shape dims written into its declared inputs (the benchmark
    compiles both engines from the model alone); --batch > 1 then sets every first dim."""
    source = open_source(load_model(name))
    if not isinstance(source, OnnxSource):
        raise ConfigError(f"{name} is a {source.format} model: `hobbit bench` times a TensorFlow model on its own "
                          "(--model FILE), beside TensorFlow")
    proto = source.proto()
    shapes = input_shapes(declared(source, flags), flags)
    if batch > 1:
        clash = [f"{n}={'x'.join(map(str, dims))}" for n, dims in shapes.items() if dims and dims[0] != batch]
        if clash:
            raise InputError(f"--batch {batch} sets the first dim of every input of {name}, but --input-shape "
                             f"gives {', '.join(clash)}")
    why = f"`hobbit bench` times one fixed-shape build of {name}, so each symbolic dim needs a size"
    require_static(source.declared_inputs(shapes), why, free_axis0=batch > 1)
    return with_input_shapes(proto, shapes) if shapes else source.model


def cmd_bench(args: argparse.Namespace) -> int:
    runnable_here(args.target, "bench")
    if args.precision:
        return bench_quant.cmd_bench(args)
    args.model = args.model or "resnet18"
    if os.path.exists(args.model) and detect_format(args.model) != "onnx":
        return _bench_tf(args)
    build = bench.BuildOptions.of(pipeline(args), args.target)
    models = bench_models(args.model, args.input_shape, args.batch)
    threads = args.threads
    if args.plot:
        bench.pyplot()  # fail before minutes of benchmarking, not after
    built_for = bench.describe_build(build)
    print((f"{built_for}\n" if built_for else "")
          + f"measuring the FMA peak at {', '.join(map(str, threads))} thread(s), then benchmarking "
          f"{', '.join(name for name, _ in models)}: compile, check against onnxruntime, time both ...",
          flush=True)

    def show(result: bench.BenchResult) -> None:
        print(result.format() + "\n", flush=True)

    machine = bench.machine_info(build)
    results = bench.run_suite(models, threads, runs=args.runs, warmup=args.warmup, build=build,
                              report=show, loads=args.load, batch=args.batch, streams=args.streams, aot=args.aot)
    tables = (bench.markdown_table(results), bench.scaling_table(results), bench.memory_table(results),
              bench.load_tables(results))
    print("\n".join(table for table in tables if table), end="")
    warning = bench.contention_warning(threads)
    if warning:
        print(f"hobbit: warning: {warning}", file=sys.stderr)
    if args.markdown or args.json:
        command = (f"hobbit bench --model {args.model} --threads {','.join(map(str, threads))} "
                   f"--runs {args.runs}" + (f" --load {','.join(args.load)}" if args.load != ["none"] else "")
                   + "".join(f" {flag}" for flag in args.input_shape)
                   + (f" --batch {args.batch}" if args.batch > 1 else "")
                   + (f" --streams {args.streams}" if args.streams else "")
                   + (" --aot" if args.aot else "")
                   + (f" --target {build.target}" if build.target != "host" else ""))
        if args.markdown:
            _write(bench.markdown_report(results, machine, command, args.warmup), args.markdown)
        if args.json:
            with writing(args.json):
                bench.write_json(results, machine, args.json)
            print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        with writing(args.plot):
            bench.plot_ratios(results, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.profile:
        for name, load in models:
            for count in threads:
                print("\n" + bench.profile_model(load(), name, count, args.runs, build), flush=True)
    return 0 if all(r.mismatch is None for r in results) else 1


def cmd_zoo(args: argparse.Namespace) -> int:
    if args.name is None:
        width = max(len(name) for name in zoo.MODELS)
        for name, fn in zoo.MODELS.items():
            print(f"{name:{width}s}  {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    model = zoo.build(args.name)
    path = args.output or f"{args.name}.onnx"
    with writing(path):
        onnx.save(model, path)
    print(f"wrote {path}")
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    """The calibration files are checked against the model's inputs before anything compiles."""
    model = load_model(args.model)
    if detect_format(model) != "onnx":
        raise ConfigError(f"`hobbit quantize` reads ONNX models; {args.model!r} is {detect_format(model)}")
    proto = read_onnx(model)
    batches = CalibrationFiles(args.calibration, declared_inputs(proto))
    quantized = hobbit.quantize(proto, calibration=batches, method=args.method, per_channel=not args.per_tensor,
                                percentile=args.percentile, threads=args.threads, progress=True)
    with writing(args.output):
        onnx.save(quantized, args.output)
    print(f"wrote {args.output} ({len(batches)} calibration batches, {args.method}, "
          f"{'per-tensor' if args.per_tensor else 'per-channel'} weights)", file=sys.stderr)
    return 0


def cmd_conformance(args: argparse.Namespace) -> int:
    """Exit status 1 when a test fails that is not on the expected-failure list, else 0."""
    every = conformance.node_tests()
    cases = [c for c in every if re.search(args.filter, c.name)]
    if not cases:
        raise ConfigError(f"--filter {args.filter!r} matches none of the {len(every)} node tests "
                          f"(names look like {every[0].name}, {every[-1].name})")
    runnable_here(args.target, "conformance")
    target = args.target
    options = {"target": "host" if target == host_target() else f"{target.triple}:{target.cpu}:{target.features}"}
    if args.markdown:
        results, ort_results, seconds = conformance.measure(cases, progress=print, timeout=args.timeout,
                                                            options=options)
        with writing(args.markdown), open(args.markdown, "w") as f:
            f.write(conformance.markdown(cases, results, ort_results, seconds))
        s = conformance.summary(results, ort_results)
        print(f"{s['tests']} node tests: onnxruntime passed {s['onnxruntime']}, hobbit {s['hobbit']}; "
              f"hobbit passed {s['hobbit_of_onnxruntime']} of onnxruntime's ({100 * s['share']:.1f}%)")
    else:
        def show(name: str, outcome: conformance.Outcome) -> None:
            print(f"{'pass' if outcome.passed else 'FAIL'}  {name}  {outcome.reason}", flush=True)

        results = conformance.run_suite("hobbit", cases, show, timeout=args.timeout, options=options)
    listing = conformance.EXPECTED_FAILURES
    found = conformance.verdict(results, conformance.read_expected_failures(listing))
    print(found.format(os.path.relpath(listing) if listing.exists() else f"none found at {listing}"))
    if args.write_expected_failures:
        conformance.write_expected_failures(results, listing)
        print(f"wrote {listing}", file=sys.stderr)
        return 0
    return 1 if found.unexpected else 0


# -- argument parsing --------------------------------------------------------------------
class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions like argparse does, but prints an 'examples:' epilog line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


_RUN_EXAMPLES = """examples:
  hobbit run resnet18                          a zoo model on random input
  hobbit run model.onnx --input input=x.npy    your data (dtype and shape checked before compiling)
  hobbit run dynamic.onnx --input-shape input=8x3x224x224
                                               a model with a dynamic batch, at batch 8"""
_COMPILE_EXAMPLES = """examples:
  hobbit compile model.onnx -o model.ll        the LLVM IR hobbit generates
  hobbit compile model.onnx --emit asm --threads 1
  hobbit compile dynamic.onnx --input-shape input=1x3x224x224 --emit graph
  hobbit compile squeezenet1_1 --emit lib -o build/squeezenet
                                               libsqueezenet.so + squeezenet.h + weights
  hobbit compile squeezenet1_1 --emit lib --target aarch64-linux-gnu:neoverse-v1 -o build/arm
                                               the same for an AArch64 (SVE) machine
  hobbit compile model.onnx --emit asm --target x86-64-v3
                                               AVX2 code for machines without AVX-512"""
_INSPECT_EXAMPLES = """examples:
  hobbit inspect resnet18
  hobbit inspect model.onnx --disable fuse     the plan without fusion
  hobbit inspect dynamic.onnx --input-shape input=4x3x224x224"""
_QUANTIZE_EXAMPLES = """examples:
  hobbit quantize model.onnx --calibration images.npy -o model-int8.onnx
                                               samples stacked on axis 0 of one .npy
  hobbit quantize resnet18 --calibration calib/ -o resnet18-int8.onnx --method entropy
                                               one .npy (or .npz per input name) per batch in calib/
  hobbit run model-int8.onnx                   the quantized model runs like any other
calibration data: FILE.npy (one-input models): samples stacked on axis 0; an array of the
  input's rank gives batches of one, one of rank+1 gives x[i] as batches. FILE.npz: the same,
  one array per input name. DIR: one batch per .npy file (a leading batch axis of 1 is added
  when the array is one rank short) or per .npz file (arrays named after the inputs)."""
_BENCH_EXAMPLES = """examples:
  hobbit bench                                 zoo resnet18 at 1 thread
  hobbit bench --model model.onnx --threads 1,2 --markdown BENCHMARKS.md
  hobbit bench --model dynamic.onnx --input-shape input=1x3x224x224
  hobbit bench --model mobilenet_v2 --batch 8 --streams 2 --load none,busy-core
  hobbit bench --model squeezenet1_1,resnet18 --threads 1,2 --aot
                                               the exported library beside the JIT and onnxruntime
  hobbit bench --target x86-64-v3              AVX2 code, timed on this machine
  hobbit bench --precision int8 --threads 1,2 --markdown int8.md   five zoo CNNs in int8, beside the peers"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL",
                   help="a model: an .onnx file, a TensorFlow frozen graph (.pb), SavedModel directory, Keras "
                        "file (.keras, needs TensorFlow) or TFLite file (.tflite), or a zoo model name (see `hobbit zoo`)")
    p.add_argument("--signature", metavar="NAME", default=None,
                   help="the SavedModel or Keras signature to compile (default: serving_default)")
    p.add_argument("--passes", metavar="A,B,C",
                   help=f"graph passes to run, in order (default: {','.join(DEFAULT_PIPELINE)}; "
                        f"known: {', '.join(PASSES)}); an empty string runs none")
    p.add_argument("--disable", metavar="NAME", action="append", default=[],
                   help="drop this pass from the pipeline (repeatable)")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="threads per inference to build for (default: $HOBBIT_NUM_THREADS, else the CPUs "
                        "this process may use: its affinity mask, capped by any cgroup CPU quota)")
    p.add_argument("--precision", choices=sorted(set(PRECISIONS + GPU_PRECISIONS)), default="fp32",
                   help="fp32 (default), or bf16: convolutions and fully-connected layers on bf16 weights and "
                        "activations with float32 sums (needs a CPU with AVX512-BF16, e.g. Zen 4, Sapphire Rapids), "
                        "or, for --target cuda, tf32 or bf16: convolutions and matmuls on tensor cores with operands in "
                        "that format")
    _input_shape(p)
    _target(p)


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", type=target_arg, default="host", metavar="T",
                   help="the CPU to generate code for: 'host' (default: this machine), a CPU name "
                        f"({', '.join(CPUS)}), or TRIPLE:CPU[:FEATURES] (e.g. aarch64-linux-gnu:neoverse-v1, "
                        "x86_64-linux-gnu:znver4:-avx512bf16); code this host cannot run is for --emit only; "
                        "or a GPU: cuda[:sm_80|sm_90], rocm[:gfx90a|gfx942]")


def target_arg(text: str) -> Target | GpuTarget:
    """--target T: refused by argparse (a usage error) unless hobbit knows the CPU."""
    try:
        return parse_target(text)
    except TargetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _input_shape(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", metavar="NAME=DIMS", type=parse_input_shape, action="append", default=[],
                   help="the shape of input NAME, dims joined by 'x' (e.g. input=8x3x224x224), to size its "
                        "symbolic dims such as a dynamic batch; static dims must match the model (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hobbit", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="hobbit compiles ONNX models to native code for this CPU (via LLVM) and runs them.")
    parser.add_argument("--version", action="version", version=f"hobbit {hobbit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", formatter_class=_HelpFormatter, epilog=_RUN_EXAMPLES,
                       help="compile a model and run it on given or random inputs",
                       description="Compile MODEL, run it, and print each output's shape, first values and "
                                   "the latency. Inputs not given with --input are filled with seeded random "
                                   "data (N(0,1) for floats); a model with symbolic dims (a dynamic batch) "
                                   "then needs --input-shape to size them.")
    _common(p)
    p.add_argument("--input", metavar="NAME=FILE.npy", type=parse_input_file, action="append", default=[],
                   help="feed input NAME from a .npy file, checked against the model before compiling; its "
                        "shape sizes NAME's symbolic dims (repeatable)")
    p.add_argument("--runs", type=positive_int, default=10, metavar="N",
                   help="timed runs for the latency figure (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", formatter_class=_HelpFormatter, epilog=_COMPILE_EXAMPLES,
                       help="print the LLVM IR, assembly or optimised graph of a model",
                       description="Compile MODEL for --target (default: this machine) and write one stage "
                                   "of the result: the LLVM IR hobbit generates (before LLVM's optimiser) as text "
                                   "or bitcode, the optimised machine code as assembly or an object, the graph "
                                   "after the passes (fused groups), or an exported library.")
    _common(p)
    p.add_argument("--emit", choices=["llvm", "bc", "asm", "obj", "graph", "lib"], default="llvm",
                   help="what to write (default llvm): the LLVM IR hobbit generates as text (llvm) or bitcode "
                        "(bc), LLVM's -O3 code for the target as assembly (asm) or an ELF object (obj), the "
                        "graph after the passes (graph); 'lib' writes a shared library with a C header, its "
                        "weights and a manifest into the folder -o DIR (hobbit.load(DIR) runs it again)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--name", help="with --emit lib: the C prefix of the library's functions "
                                  "(default: the folder's name)")
    p.add_argument("--weights", choices=["auto", "embed", "file"], default="auto",
                   help="with --emit lib: the weights inside the library (embed), in NAME.weights beside it "
                        "(file), or inside up to 16 MiB and beside it above (auto, the default)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("inspect", formatter_class=_HelpFormatter, epilog=_INSPECT_EXAMPLES,
                       help="show fused kernels, their ONNX nodes, shapes and the memory plan",
                       description="List the graph after the passes: one line per fused group (e.g. "
                                   "Conv+Add+Relu) with the ONNX nodes it came from, its output type and "
                                   "where the output lives (arena offset, graph output, ...), then the arena "
                                   "and weights sizes.")
    _common(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("bench", formatter_class=_HelpFormatter, epilog=_BENCH_EXAMPLES,
                       help="time hobbit against onnxruntime (default: zoo resnet18)",
                       description="For each model and thread count: compile, check the outputs against "
                                   "onnxruntime (rtol 1e-3, atol 1e-4; no ratio is reported if they disagree), "
                                   "then time both alternately with the same thread count and print median and "
                                   "p10-p90 latency, the ratio hobbit/onnxruntime, hobbit's GFLOP/s and its share "
                                   "of this machine's FMA peak (measured first), and the compile time; a summary "
                                   "table follows. --load times both engines again under other load on this "
                                   "machine, --batch runs a larger batch, --streams measures throughput with "
                                   "several inferences at once; each adds a table whose ratios are all below 1 "
                                   "when hobbit is faster. Exits with status 1 when any outputs disagree.")
    p.add_argument("--model", default=None, metavar="NAME|PATH|all",
                   help="zoo model name, .onnx path, a comma list of those, or 'all' zoo models (default resnet18; "
                        "with --precision the five fp32 zoo CNNs); "
                        "or one TensorFlow model (.pb, SavedModel directory, .keras, .tflite), timed beside "
                        "TensorFlow and beside hobbit on its ONNX export (tf2onnx)")
    p.add_argument("--signature", metavar="NAME", default=None,
                   help="with a SavedModel or Keras --model: the signature to time (default: serving_default)")
    p.add_argument("--runs", type=positive_int, default=30, metavar="N",
                   help="timed runs per engine after warm-up (default 30)")
    p.add_argument("--warmup", type=non_negative_int, default=3, metavar="N",
                   help="untimed warm-up runs per engine (default 3)")
    p.add_argument("--threads", type=parse_threads, default=[1], metavar="N[,N...]",
                   help="thread counts for both engines (onnxruntime intra_op_num_threads), e.g. 1,2 (default 1)")
    p.add_argument("--load", type=parse_loads, default=["none"], metavar="COND[,COND...]",
                   help="load conditions to time both engines under, in the same run: none (nothing else), "
                        "busy-core (a busy-loop process pinned to this process's last CPU), two-procs (two "
                        "processes run the model at once; inferences/s summed), blas (an untimed numpy matrix "
                        "product on all of OpenBLAS's threads right before every timed run), alternate (single "
                        "runs of the two engines back to back, no pause); e.g. none,busy-core (default none)")
    p.add_argument("--batch", type=positive_int, default=1, metavar="N",
                   help="set the first dim of every model input to N (default 1); inferences/s count batch items")
    p.add_argument("--streams", type=positive_int, default=None, metavar="S",
                   help="also measure throughput: S Python threads at once on one model compiled with threads=1, "
                        "against one onnxruntime session with 1 intra-op thread shared by S threads")
    p.add_argument("--aot", action="store_true",
                   help="also export each compiled model as a library, load it with hobbit.load, check its outputs "
                        "equal the JIT's (max abs diff 1e-5) and time it in the same rounds: adds its median and "
                        "the ratio AOT/JIT (not under --load two-procs; needs a C compiler, cc or $CC)")
    p.add_argument("--precision", choices=bench_quant.PRECISIONS, default=None,
                   help="low-bit inference instead (hobbit.bench_quant): int8 (hobbit and onnxruntime on "
                        "onnxruntime's quantize_static QDQ model, and hobbit.quantize's) or bf16 (compile precision="
                        "\"bf16\"), each beside hobbit fp32, onnxruntime and OpenVINO where installed: accuracy "
                        "against fp32 on smooth random images, and speed; takes --model, --threads, --runs, "
                        "--warmup, --markdown")
    p.add_argument("--passes", metavar="A,B,C", help="graph passes to run, in order (default: the standard pipeline)")
    p.add_argument("--disable", metavar="NAME", action="append", default=[], help="drop this pass (repeatable)")
    _input_shape(p)
    _target(p)
    p.add_argument("--markdown", metavar="FILE", help="write the table with a header naming the machine (BENCHMARKS.md)")
    p.add_argument("--json", metavar="FILE", help="write every number per model and thread count as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="write a bar chart of the ratios (needs matplotlib)")
    p.add_argument("--profile", action="store_true",
                   help="then list every fused kernel: median ms, share, GFLOP/s and %% of the FMA peak")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("quantize", formatter_class=_HelpFormatter, epilog=_QUANTIZE_EXAMPLES,
                       help="quantize an ONNX model to int8 (QDQ) from calibration data",
                       description="Fold BatchNorm into the convolutions, run MODEL in hobbit over the "
                                   "calibration batches to measure each activation's range, and write an ONNX "
                                   "QDQ model: int8 weights (symmetric, per output channel unless --per-tensor), "
                                   "int32 biases, uint8 activations. onnxruntime and `hobbit run` read it. "
                                   "Progress (stage, batches done) goes to stderr.")
    p.add_argument("model", metavar="MODEL", help="an .onnx file or a zoo model name (see `hobbit zoo`)")
    p.add_argument("--calibration", required=True, metavar="DIR|FILE.npy|FILE.npz",
                   help="calibration data, e.g. a few hundred representative inputs (see below)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="where to write the quantized model")
    p.add_argument("--method", choices=["minmax", "percentile", "entropy"], default="minmax",
                   help="how each activation's range is chosen (default minmax): the whole range seen; "
                        "percentile: |x| clipped at --percentile; entropy: the clipping of least KL "
                        "divergence (TensorRT's method)")
    p.add_argument("--percentile", type=float, default=99.999, metavar="P",
                   help="with --method percentile: the percentile of |x| kept (default 99.999)")
    p.add_argument("--per-tensor", action="store_true",
                   help="one scale per weight tensor instead of one per output channel")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="threads for the calibration runs (default: as `hobbit run`)")
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("conformance", help="run the ONNX backend node tests on hobbit (and onnxruntime)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run the node tests shipped with the onnx package. Alone, it prints pass/FAIL\n"
                                   "and the reason per test for hobbit as each finishes. With --markdown it also\n"
                                   "runs onnxruntime on the same tests and writes the per-operator table\n"
                                   "(CONFORMANCE.md). --write-expected-failures rewrites the expected-failure list\n"
                                   "of tests/test_onnx_backend.py from hobbit's results (entries for tests that a\n"
                                   "--filter left out are kept).\n\n"
                                   "Exit status: 1 when a test fails that is not on the expected-failure list;\n"
                                   "0 otherwise, also when listed tests now pass (they are named, to be removed\n"
                                   "from the list); 2 for a usage error or a filter that matches no test.",
                       epilog="examples:\n"
                              "  hobbit conformance                          every node test, hobbit only\n"
                              "  hobbit conformance --filter '^test_conv'    the Conv tests\n"
                              "  hobbit conformance --markdown CONFORMANCE.md --timeout 120\n"
                              "                                              hobbit and onnxruntime, per operator")
    p.add_argument("--filter", default="", metavar="REGEX", type=regex,
                   help="only tests whose name matches REGEX (Python re.search)")
    p.add_argument("--timeout", default=conformance.DEFAULT_TIMEOUT, type=positive_seconds, metavar="SECONDS",
                   help="time limit per test (default %(default)g); a test past it is recorded as failed "
                        "('timed out') and the run goes on")
    p.add_argument("--markdown", metavar="FILE", help="write the hobbit vs onnxruntime table (CONFORMANCE.md)")
    p.add_argument("--write-expected-failures", action="store_true",
                   help="rewrite tests/onnx_backend/expected_failures.txt from hobbit's failures")
    _target(p)
    p.set_defaults(func=cmd_conformance)

    p = sub.add_parser("zoo", help="list the built-in models, or save one as an .onnx file",
                       description="With no NAME, list the zoo models. With NAME, save that model (random "
                                   "weights, torchvision layout) to NAME.onnx or -o FILE.")
    p.add_argument("name", nargs="?", choices=list(zoo.MODELS), metavar="NAME", help="model to save")
    p.add_argument("-o", "--output", metavar="FILE", help="where to save it (default NAME.onnx)")
    p.set_defaults(func=cmd_zoo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `hobbit` command (argv: sys.argv[1:] by default); returns the process exit status.
    Warnings it raises print as one line each (show_warning) while it runs."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        try:
            check_outputs(args)
            return args.func(args)
        except HobbitError as exc:
            print(f"hobbit: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            return interrupted()


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """warnings.showwarning for the command: `hobbit: warning: MESSAGE` on one line, without
    Python's file, line number, category and source line, which mean nothing to a user."""
    text = " ".join(str(message).removeprefix("hobbit: ").split())
    print(f"hobbit: warning: {text}", file=sys.stderr if file is None else file)


if __name__ == "__main__":
    sys.exit(main())
