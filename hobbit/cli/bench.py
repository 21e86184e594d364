"""`hobbit bench`: hobbit timed beside its peers in one run (hobbit.bench).

An ONNX model (or several, or the whole zoo) runs against onnxruntime per thread count and
load condition (hobbit.bench.suite), the tables and files coming from hobbit.bench.report; a
TensorFlow model file runs beside TensorFlow and beside hobbit on its ONNX export
(hobbit.bench.tf); --precision int8|bf16 measures low-bit inference, accuracy and speed,
beside onnxruntime and OpenVINO (hobbit.bench.quant); --sweep times one compile of a model with
symbolic dims at several sizes of one dim (or of several dims together: an image's height and
width), beside a static compile of each size and onnxruntime (hobbit.bench.sweep); --summary
FILE writes every precision against its best peer, quiet and under load, the sporadic requests,
the cold compiles and the slowest kernels in one page (hobbit.bench.summary); --kernels times
Baidu DeepBench's inference problems as one-op models in hobbit's schedules, plain loop nests
(with and without Polly), numpy and onnxruntime, fp32 and int8 (hobbit.bench.kernels). Models and
flags are checked before the minutes of benchmarking start, and the exit status is 1 when any
outputs disagree."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import onnx

from hobbit import zoo
from hobbit.bench import (builds, decode, kernel_report, kernels, quant, quant_report, report, scaleout, sporadic,
                          suite, summary, sweep, tf)
from hobbit.bench.kernel_timing import MIN_RUNS
from hobbit.bench.load import LOADS, BuildOptions
from hobbit.bench.result import BenchResult
from hobbit.cli.args import (add_command, input_shape_flag, non_negative_int, parse_threads, positive_int,
                             positive_seconds, target_flag)
from hobbit.cli.inputs import ShapeFlag, declared, input_shapes, require_static, with_input_shapes
from hobbit.cli.model import load_model, not_a_model, pipeline, runnable_here
from hobbit.backend.polly import opt_tool
from hobbit.cli.output import write_text, writing
from hobbit.errors import ConfigError, InputError, MissingDependencyError
from hobbit.frontend.onnx.importer import load_model as read_onnx
from hobbit.frontend.formats import detect_format, open_source
from hobbit.frontend.onnx.source import OnnxSource
from hobbit.runtime.cpus import available_cpus
from hobbit.target import host_target

DESCRIPTION = """For each model and thread count: compile, check the outputs against onnxruntime
(rtol 1e-3, atol 1e-4; no ratio is reported if they disagree), then time both alternately with the
same thread count and print median and p10-p90 latency, the ratio hobbit/onnxruntime, hobbit's
GFLOP/s and its share of this machine's FMA peak (measured first), and the compile time; a summary
table follows, with OpenVINO (f32, latency hint, N threads) and hobbit / the best peer beside
onnxruntime where openvino is installed. --load times both engines again under other load on this
machine or after idle gaps (sporadic requests: gaps:MS, poisson:RATE), --batch runs a
larger batch, --streams measures throughput with several inferences at once; each adds a table whose
ratios are all below 1 when hobbit is faster. --sweep SYMBOL=V1,V2,... instead compiles a model with
symbolic dims once and times it at each value of that dim (--sweep height,width=224x224,160x240: of
several dims together) beside a static compile of that shape and onnxruntime: first and second run,
medians, ratios, compile seconds and the process's memory per value, under each --load that runs in
one process (none, busy-core, blas, alternate). --summary FILE.md writes BENCHMARKS.md's peer tables in one
run: for each model (default the five zoo CNNs) and thread count, fp32 hobbit / the best of onnxruntime (with and
without spinning) and OpenVINO f32, bf16 hobbit / OpenVINO bf16, int8 hobbit / the best of onnxruntime and
OpenVINO int8, quiet and under each --load condition (default none,busy-core,gaps:1,gaps:10,gaps:100,poisson:10;
the sporadic ones in an fp32 table of their own), each model's cold compile in a fresh process with its phases,
and each precision's three slowest kernels as % of the measured peak of its instruction (FMA, vdpbf16ps,
vpdpbusd); in an existing file (BENCHMARKS.md) it replaces only what lies between the lines
<!-- hobbit bench --summary: begin --> and <!-- hobbit bench --summary: end -->. --kernels
deepbench[:gemm|conv|rnn][:server|device] times Baidu DeepBench's inference shapes (default: all three
kinds, the device set; the server set is 251 shapes whose largest GEMMs take a plain loop nest minutes a
run, so sample it with --limit) as one-op models: GFLOP/s and % of the measured peak of hobbit, the naive
loop nest after LLVM's O3 and after Polly (at its default place and early), numpy's BLAS (GEMM),
onnxruntime, and int8 hobbit and onnxruntime where DeepBench runs int8, at each --threads, each output
checked against onnxruntime. Exits with status 1 when any outputs disagree."""

EXAMPLES = """examples:
  hobbit bench                                 zoo resnet18 at 1 thread
  hobbit bench --model model.onnx --threads 1,2 --markdown BENCHMARKS.md
  hobbit bench --model dynamic.onnx --input-shape input=1x3x224x224
  hobbit bench --model mobilenet_v2 --batch 8 --streams 2 --load none,busy-core
  hobbit bench --model mobilenet_v2 --threads 1,2 --load none,gaps:1,gaps:10,gaps:100,poisson:50
                                               sporadic requests: latency after idle, and what idle costs
  hobbit bench --model squeezenet1_1,resnet18 --threads 1,2 --aot
                                               the exported library beside the JIT and onnxruntime
  hobbit bench --target x86-64-v3              AVX2 code, timed on this machine
  hobbit bench --precision int8 --threads 1,2 --markdown int8.md   five zoo CNNs in int8, beside the peers
  hobbit bench --summary peers.md --threads 1,2
                                               every precision against its best peer, quiet, busy and sporadic;
                                               cold compiles; each model's slowest kernels against the peaks
  hobbit bench --model bert.onnx --sweep sequence=16,64,128,256,512 --dynamic sequence=1:512 --threads 1,2
                                               one compile at five lengths, beside static compiles and onnxruntime
                                               (python scripts/export_dynamic_models.py DIR writes such models)
  hobbit bench --kernels deepbench:gemm:device --threads 1,2 --markdown gemm.md --plot gemm.png
                                               DeepBench's 13 device GEMMs in every configuration
  hobbit bench --kernels deepbench:server --limit 6 --configs hobbit,numpy,onnxruntime,hobbit-int8
                                               6 shapes of each server set, four configurations only
  hobbit bench --model DIR/resnet18.onnx --sweep height,width=224x224,160x240,320x320
         --dynamic height=64:320 --dynamic width=64:320
                                               one compile at three image sizes, height and width moved together
                                               (python scripts/export_dynamic_cnns.py DIR writes such models)"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit bench` to the subcommands."""
    p = add_command(sub, "bench", cmd_bench, description=DESCRIPTION, examples=EXAMPLES,
                    summary="time hobbit against onnxruntime and OpenVINO (default: zoo resnet18)")
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
    _load_flags(p)
    p.add_argument("--precision", choices=quant.PRECISIONS, default=None,
                   help="low-bit inference instead (hobbit.bench.quant): int8 (hobbit and onnxruntime on "
                        "onnxruntime's quantize_static QDQ model, and hobbit.quantize's) or bf16 (compile precision="
                        "\"bf16\"), each beside hobbit fp32, onnxruntime and OpenVINO where installed: accuracy "
                        "against fp32 on smooth random images, and speed; takes --model, --threads, --runs, "
                        "--warmup, --markdown")
    p.add_argument("--passes", metavar="A,B,C", help="graph passes to run, in order (default: the standard pipeline)")
    p.add_argument("--disable", metavar="NAME", action="append", default=[], help="drop this pass (repeatable)")
    _sweep_flags(p)
    _kernel_flags(p)
    p.add_argument("--builds", type=parse_builds, default=None, metavar="B[,B...]",
                   help="compile each --model several ways and time them in one run beside onnxruntime "
                        "(hobbit.bench.builds): each B is auto or naive (hobbit.compile's schedule=), optionally "
                        "+polly or +polly-early (its loops=), the first the one the others are compared with, e.g. "
                        "auto,naive,naive+polly,naive+polly-early; --model defaults to the five zoo CNNs; takes "
                        "--threads, --runs (at most, per build), --budget (seconds of runs per build, default 30) "
                        "and --markdown")
    input_shape_flag(p)
    target_flag(p)
    _report_flags(p)


def _sweep_flags(p: argparse.ArgumentParser) -> None:
    """--sweep and --dynamic: one compile of a model with symbolic dims at several sizes (hobbit.bench.sweep)."""
    p.add_argument("--sweep", type=parse_sweep, default=None, metavar="SYMBOL[,SYMBOL...]=V1,V2,...",
                   help="time one compile of the --model (an ONNX model with symbolic dims) at each value of its "
                        "dim SYMBOL, e.g. sequence=16,64,128,256,512 or frames=1000,3000, or at each point of "
                        "several dims moved together, each point their sizes joined by 'x' in the order the dims "
                        "are named, e.g. height,width=224x224,160x240,320x320; beside a static compile of each "
                        "shape and onnxruntime, at each --threads: the one compile's first and second run at each "
                        "value, the medians (p10-p90) of the three engines timed alternately, the ratios "
                        "one/static and one/onnxruntime, the static compile's seconds and the process's resident "
                        "memory after each value. Other symbolic dims (a batch) are 1 unless --input-shape gives "
                        "an input's shape (its sizes for the swept dims are not used); takes --model, --threads, "
                        "--runs, --warmup, --dynamic, --input-shape, --passes, --disable, --target, --markdown, "
                        "--json")
    p.add_argument("--decode", type=positive_int, default=None, metavar="STEPS",
                   help="time greedy decoding of STEPS tokens with a key/value cache (hobbit.bench.decode): the "
                        "--model is one decoding step (inputs input_ids, position_ids, past_*; outputs logits and "
                        "the presents), compiled once by hobbit with the cache length a run-time dim, beside "
                        "onnxruntime, from the same 4-position cache: tokens/s, the ratio, hobbit's compiles and "
                        "the logits' largest difference; exits 1 if a token differs; takes --model, --threads, "
                        "--markdown")
    p.add_argument("--dynamic", type=parse_dynamic, action="append", default=[], metavar="SYMBOL=LOW:HIGH",
                   help="with --sweep: the bounds the one compile gets for SYMBOL, a swept dim (hobbit.compile's "
                        "dynamic_shapes={SYMBOL: (LOW, HIGH)}, where this hobbit takes that argument); repeat it "
                        "for each swept dim, e.g. --dynamic height=64:320 --dynamic width=64:320; without it the "
                        "one compile is hobbit.compile's default for a symbolic dim")


def _kernel_flags(p: argparse.ArgumentParser) -> None:
    """--kernels and the flags that go with it only (hobbit.bench.kernels)."""
    p.add_argument("--kernels", type=parse_kernels, nargs="?", const=kernels.SUITE, default=None,
                   metavar="deepbench[:gemm|conv|rnn][:server|device]",
                   help="time Baidu DeepBench's inference problems as one-op ONNX models (hobbit.bench.kernels): "
                        "a kind (default all three) and a set (default device: 32 shapes; server: 251, whose naive "
                        "loop nests take minutes a run: use --limit); per shape and --threads, GFLOP/s and %% of the "
                        "measured peak of each configuration, every output checked against onnxruntime; "
                        "takes --threads, --runs (at most, per configuration), --warmup, --configs, --limit, "
                        "--budget, --markdown, --json, --plot")
    p.add_argument("--configs", type=parse_kernel_configs, default=None, metavar="NAME[,NAME...]",
                   help=f"with --kernels: the configurations to time, from {', '.join(kernels.CONFIG_NAMES)} "
                        "(default: all; those that cannot run here, e.g. Polly without opt-22, show why in their "
                        "column; named here, they are an error instead)")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="with --kernels: N shapes of each kind, spread evenly over DeepBench's rows (the tables name "
                        "the rows run)")
    p.add_argument("--budget", type=positive_seconds, default=None, metavar="SECONDS",
                   help=f"with --kernels: seconds of timed runs per configuration, shape and thread count (default "
                        f"{kernels.DEFAULT_BUDGET_S:g}; at least {MIN_RUNS} runs); a configuration whose single run "
                        f"takes over {kernels.CAP_FACTOR} times this is reported as over budget; with --builds: "
                        f"seconds of timed runs per build, model and thread count (default 30)")


def argument_type(parse: Callable[[str], object], name: str) -> Callable[[str], object]:
    """An argparse `type` of `parse`, whose ConfigError becomes argparse's usage error (exit 2)."""
    def parsed(text: str) -> object:
        try:
            return parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parsed.__name__ = name
    return parsed


parse_builds = argument_type(builds.parse_builds, "parse_builds")  # --builds auto,naive+polly
parse_kernels = argument_type(kernels.parse_spec, "parse_kernels")  # --kernels deepbench:gemm:device
parse_kernel_configs = argument_type(kernels.parse_configs, "parse_kernel_configs")  # --configs hobbit,onnxruntime


def _load_flags(p: argparse.ArgumentParser) -> None:
    """--load, --batch, --streams and --aot: what else runs while the engines are timed."""
    p.add_argument("--load", type=parse_loads, default=None, metavar="COND[,COND...]",
                   help="load conditions to time both engines under, in the same run: none (nothing else), "
                        "busy-core (a busy-loop process pinned to this process's last CPU), two-procs (two "
                        "processes run the model at once; inferences/s summed), blas (an untimed numpy matrix "
                        "product on all of OpenBLAS's threads right before every timed run), alternate (single "
                        "runs of the two engines back to back, no pause); sporadic requests: gaps:MS (each timed "
                        "run after MS ms of idle that follow the same engine's previous run; its median and p90, "
                        "their ratio to the same engine's back-to-back median, timed too, and the CPU seconds the "
                        "idle process burns per second of idle), poisson:RATE (requests arriving at random, RATE "
                        "per second on average, the same seeded arrival times for each engine, served one at a "
                        "time: p50/p90/p99 of completion minus arrival over max(--runs, "
                        f"{sporadic.POISSON_MIN_REQUESTS}) requests); onnxruntime is timed with and without "
                        "spinning under every condition but none; e.g. none,busy-core or "
                        "none,gaps:1,gaps:10,gaps:100,poisson:50 (default none; with --summary "
                        f"{','.join(summary.DEFAULT_LOADS)})")
    p.add_argument("--batch", type=positive_int, default=1, metavar="N",
                   help="set the first dim of every model input to N (default 1); inferences/s count batch items")
    p.add_argument("--streams", type=positive_int, default=None, metavar="S",
                   help="also measure throughput: S Python threads at once on one model compiled with threads=1, "
                        "against one onnxruntime session with 1 intra-op thread shared by S threads")
    p.add_argument("--aot", action="store_true",
                   help="also export each compiled model as a library, load it with hobbit.load, check its outputs "
                        "equal the JIT's (max abs diff 1e-5) and time it in the same rounds: adds its median and "
                        "the ratio AOT/JIT (not under --load two-procs; needs a C compiler, cc or $CC)")


def _report_flags(p: argparse.ArgumentParser) -> None:
    """--markdown, --json, --plot and --profile: what is written besides the printed tables."""
    p.add_argument("--engine", type=parse_engines, default=None, metavar="ray|dask[,...]",
                   help="score --items rows of each --model through Ray Data and/or Dask (hobbit.ray, hobbit.dask), "
                        "hobbit and onnxruntime in the same harness on the same CPUs (--threads: their count, default "
                        "every CPU), beside each alone in one process: rows/s, per core, and the ratios "
                        "(hobbit.bench.scaleout)")
    p.add_argument("--items", type=positive_int, default=2000, metavar="N",
                   help="rows (images, sentences) per model for --engine (default 2000)")
    p.add_argument("--rounds", type=positive_int, default=1, metavar="N",
                   help="for --engine: run every runner N times in turn and show the median rows/s and the range "
                        "(default 1)")
    p.add_argument("--markdown", metavar="FILE", help="write the table with a header naming the machine (BENCHMARKS.md)")
    p.add_argument("--json", metavar="FILE", help="write every number per model and thread count as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="write a bar chart of the ratios (needs matplotlib)")
    p.add_argument("--profile", action="store_true",
                   help="then list every fused kernel: median ms, share, GFLOP/s and %% of the FMA peak")
    p.add_argument("--summary", metavar="FILE.md",
                   help="write BENCHMARKS.md's peer tables in one run (hobbit.bench.summary): per --model (default "
                        "the five zoo CNNs) and --threads, hobbit / the best peer and the ratio in fp32 (onnxruntime "
                        "with and without spinning, OpenVINO f32), bf16 (OpenVINO bf16) and int8 (onnxruntime and "
                        "OpenVINO on onnxruntime's QDQ model), quiet and under each in-process --load condition; the "
                        "sporadic --load conditions for fp32; each model's cold compile in a fresh process with its "
                        "phases; and each precision's three slowest kernels as %% of the measured peak of its "
                        "instruction; takes --model, --threads, --runs, --warmup, --load. An existing FILE.md (such "
                        "as BENCHMARKS.md) keeps everything outside its '<!-- hobbit bench --summary: begin -->' "
                        "... 'end -->' lines, and is refused without them")


def parse_loads(text: str) -> list[str]:
    """--load none,busy-core,gaps:10 -> ["none", "busy-core", "gaps:10"] (known conditions and well-spelled
    sporadic ones only, duplicates dropped, order kept)."""
    loads = []
    for part in (part.strip() for part in text.split(",")):
        try:
            loads.append(sporadic.canonical(part) if sporadic.condition(part) else part)
        except sporadic.SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    loads = list(dict.fromkeys(load for load in loads if load))
    unknown = [load for load in loads if load not in LOADS and not sporadic.is_sporadic(load)]
    if not loads or unknown:
        raise argparse.ArgumentTypeError(f"expected load conditions from {', '.join(LOADS)}, gaps:MS, poisson:RATE "
                                         f"separated by commas, got {text!r}")
    return loads


SWEEP_EXAMPLE = "e.g. sequence=16,64,128, or height,width=224x224,160x240 for several dims moved together"


def parse_engines(text: str) -> list[str]:
    """--engine ray,dask -> ["ray", "dask"]."""
    engines = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not engines or any(e not in scaleout.ENGINES for e in engines):
        raise argparse.ArgumentTypeError(f"expected engines from {', '.join(scaleout.ENGINES)} separated by commas, "
                                         f"got {text!r}")
    return engines


def parse_sweep(text: str) -> tuple[tuple[str, ...], list[tuple[int, ...]]]:
    """--sweep sequence=16,64,128 -> (("sequence",), [(16,), (64,), (128,)]); --sweep
    height,width=224x224,160x240 -> (("height", "width"), [(224, 224), (160, 240)]): a size per
    named dim at each point, joined by 'x' (sizes >= 1, duplicate points dropped, order kept)."""
    names, sep, values = text.partition("=")
    symbols = tuple(name.strip() for name in names.split(","))
    parts = [part.strip() for part in values.split(",") if part.strip()]
    if not sep or not all(symbols) or not parts:
        raise argparse.ArgumentTypeError(f"expected SYMBOL=V1,V2,... ({SWEEP_EXAMPLE}); got {text!r}")
    if len(set(symbols)) != len(symbols):
        raise argparse.ArgumentTypeError(f"the sweep names a dim twice in {text!r} ({SWEEP_EXAMPLE})")
    points = []
    for part in parts:
        sizes = [size.strip() for size in part.split("x")]
        if len(sizes) != len(symbols) or not all(size.isdigit() and int(size) >= 1 for size in sizes):
            want = "a whole size >= 1" if len(symbols) == 1 else \
                f"{len(symbols)} whole sizes >= 1 joined by 'x' (one per dim: {','.join(symbols)})"
            raise argparse.ArgumentTypeError(f"each value of --sweep must be {want}; got {part!r} in {text!r} "
                                             f"({SWEEP_EXAMPLE})")
        points.append(tuple(int(size) for size in sizes))
    return symbols, list(dict.fromkeys(points))


def parse_dynamic(text: str) -> tuple[str, tuple[int, int]]:
    """--dynamic sequence=1:512 -> ("sequence", (1, 512))."""
    symbol, _, bounds = text.partition("=")
    low, sep, high = bounds.partition(":")
    if not sep or not symbol.strip() or not low.isdigit() or not high.isdigit() or not 1 <= int(low) <= int(high):
        raise argparse.ArgumentTypeError(f"expected SYMBOL=LOW:HIGH with 1 <= LOW <= HIGH, e.g. sequence=1:512; "
                                         f"got {text!r}")
    return symbol.strip(), (int(low), int(high))


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
            raise not_a_model(name)
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
    loads, args.load = args.load, args.load or ["none"]
    if args.kernels:
        return _bench_kernels(args)
    if args.builds:
        return _bench_builds(args)
    if args.configs or args.limit or args.budget:
        raise ConfigError("--configs and --limit go with --kernels, --budget with --kernels or --builds")
    if args.summary:
        return _bench_summary(args, loads or list(summary.DEFAULT_LOADS))
    if args.engine:
        return _bench_engines(args)
    if args.rounds != 1:
        raise ConfigError("--rounds counts the jobs of each runner of --engine: use it with --engine")
    if args.sweep:
        return _bench_sweep(args)
    if args.decode:
        return _bench_decode(args)
    if args.dynamic:
        raise ConfigError("--dynamic gives the bounds of the dims that --sweep sweeps: use it with --sweep")
    if args.precision:
        return _bench_low_bit(args)
    args.model = args.model or "resnet18"
    if os.path.exists(args.model) and detect_format(args.model) != "onnx":
        return _bench_tf(args)
    return _bench_onnx(args)


def _bench_engines(args: argparse.Namespace) -> int:
    """--engine: each model through the distributed engines, beside one process."""
    models = bench_models(args.model or "resnet50,mobilenet_v2")
    cpus = max(args.threads) if args.threads != [1] else available_cpus()
    print(f"scoring {args.items} rows of {', '.join(name for name, _ in models)} on {cpus} CPU(s): one process, "
          f"then {', '.join(args.engine)}; hobbit and onnxruntime each ...", flush=True)
    timings = []
    for name, load in models:
        timings += scaleout.run_engines(os.path.basename(name), load(), args.engine, args.items, cpus,
                                        show=lambda t: print(f"  {t.model} {t.engine} {t.runner}: "
                                                             f"{t.rows_per_second:.1f} rows/s", flush=True),
                                        rounds=args.rounds)
    table = scaleout.markdown(timings)
    print(table, end="")
    if args.markdown:
        machine = report.machine_info(BuildOptions())
        with open(args.markdown, "w") as f:
            f.write(f"CPU: {machine['cpu']} (LLVM host CPU {machine['llvm_cpu']}), {cpus} CPU(s) for every runner; "
                    f"hobbit {machine['hobbit']}, onnxruntime {machine['onnxruntime']}; {machine['date']}, "
                    f"1-minute load average {machine['load_average']} at the end\n\n{table}")
    return 0


def _bench_onnx(args: argparse.Namespace) -> int:
    """ONNX models against onnxruntime: the printed results and tables, then the files asked for."""
    build = BuildOptions.of(pipeline(args), args.target)
    models = bench_models(args.model, args.input_shape, args.batch)
    threads = args.threads
    if args.plot:
        report.pyplot()  # fail before minutes of benchmarking, not after
    built_for = suite.describe_build(build)
    print((f"{built_for}\n" if built_for else "")
          + f"measuring the FMA peak at {', '.join(map(str, threads))} thread(s), then benchmarking "
          f"{', '.join(name for name, _ in models)}: compile, check against onnxruntime, time both ...",
          flush=True)

    def show(result: BenchResult) -> None:
        print(result.format() + "\n", flush=True)

    machine = report.machine_info(build)
    results = suite.run_suite(models, threads, runs=args.runs, warmup=args.warmup, build=build,
                              report=show, loads=args.load, batch=args.batch, streams=args.streams, aot=args.aot)
    tables = (report.markdown_table(results), report.scaling_table(results), report.memory_table(results),
              report.load_tables(results), report.sporadic_tables(results))
    print("\n".join(table for table in tables if table), end="")
    warning = suite.contention_warning(threads)
    if warning:
        print(f"hobbit: warning: {warning}", file=sys.stderr)
    _write_reports(args, results, machine, build)
    if args.profile:
        for name, load in models:
            for count in threads:
                print("\n" + suite.profile_model(load(), name, count, args.runs, build), flush=True)
    return 0 if all(r.mismatch is None for r in results) else 1


def _write_reports(args: argparse.Namespace, results: list[BenchResult], machine: dict, build: BuildOptions) -> None:
    """--markdown (headed by the command line that made it), --json and --plot."""
    if args.markdown or args.json:
        command = _command_line(args, build)
        if args.markdown:
            write_text(report.markdown_report(results, machine, command, args.warmup), args.markdown)
        if args.json:
            with writing(args.json):
                report.write_json(results, machine, args.json)
            print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        with writing(args.plot):
            report.plot_ratios(results, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)


def _command_line(args: argparse.Namespace, build: BuildOptions) -> str:
    """The `hobbit bench` command that measures the same again, for the reports' header."""
    return (f"hobbit bench --model {args.model} --threads {','.join(map(str, args.threads))} "
            f"--runs {args.runs}" + (f" --load {','.join(args.load)}" if args.load != ["none"] else "")
            + "".join(f" {flag}" for flag in args.input_shape)
            + (f" --batch {args.batch}" if args.batch > 1 else "")
            + (f" --streams {args.streams}" if args.streams else "")
            + (" --aot" if args.aot else "")
            + (f" --target {build.target}" if build.target != "host" else ""))


def _bench_kernels(args: argparse.Namespace) -> int:
    """`hobbit bench --kernels SPEC` (hobbit.bench.kernels): DeepBench's problems, every configuration."""
    _takes_only(args, "--kernels", "--threads, --runs, --warmup, --configs, --limit, --budget, --markdown, --json "
                "and --plot",
                (("--model", args.model), ("--load", args.load != ["none"]), ("--streams", args.streams),
                 ("--aot", args.aot), ("--batch", args.batch > 1), ("--precision", args.precision),
                 ("--sweep", args.sweep), ("--decode", args.decode), ("--dynamic", args.dynamic),
                 ("--summary", args.summary), ("--engine", args.engine), ("--profile", args.profile),
                 ("--passes/--disable", args.passes or args.disable), ("--input-shape", args.input_shape),
                 ("--signature", args.signature)))
    configs, notes = kernels.select_configs(args.configs)
    if args.plot:
        report.pyplot()  # fail before minutes of benchmarking, not after
    budget = args.budget or kernels.DEFAULT_BUDGET_S
    cases = kernels.cases_of(args.kernels, args.limit)
    machine = report.machine_info()
    threads = ",".join(map(str, args.threads))
    print(f"measuring the peaks at {threads} thread(s), then {len(cases)} shapes of {args.kernels} in "
          f"{', '.join(c.name for c in configs)}: build, check against onnxruntime, time ...", flush=True)
    bench = kernels.KernelBench(configs, args.threads, args.runs, args.warmup, budget, notes)
    rows = bench.run(cases, report=lambda row: print(kernel_report.format_row(row), flush=True))
    print("\n" + kernel_report.speed_table(rows) + "\n" + kernel_report.compile_table(rows), end="")
    command = (f"hobbit bench --kernels {args.kernels} --threads {threads} --runs {args.runs} --warmup {args.warmup}"
               + (f" --configs {','.join(args.configs)}" if args.configs else "")
               + (f" --limit {args.limit}" if args.limit else "") + f" --budget {budget:g}")
    if args.markdown:
        write_text(kernel_report.markdown_report(rows, bench.peaks, machine, command, args.runs, args.warmup, budget),
                   args.markdown)
    if args.json:
        settings = {"runs": args.runs, "warmup": args.warmup, "budget_s": budget, "cap_s": bench.cap_s,
                    "limit": args.limit, "configs": [c.name for c in configs], "unavailable": notes}
        with writing(args.json):
            kernel_report.write_json(rows, bench.peaks, machine, command, settings, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        with writing(args.plot):
            kernel_report.plot(rows, bench.peaks, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    agree = all(cell.status != kernels.MISMATCH for row in rows for cell in row.cells.values())
    return 0 if agree else 1


def _bench_builds(args: argparse.Namespace) -> int:
    """`hobbit bench --builds A,B,...` (hobbit.bench.builds): each model compiled each way, timed in turns."""
    _takes_only(args, "--builds", "--model, --threads, --runs, --budget and --markdown",
                (("--load", args.load != ["none"]), ("--streams", args.streams), ("--aot", args.aot),
                 ("--batch", args.batch > 1), ("--precision", args.precision), ("--plot", args.plot),
                 ("--json", args.json), ("--profile", args.profile), ("--configs", args.configs),
                 ("--limit", args.limit), ("--passes/--disable", args.passes or args.disable),
                 ("--input-shape", args.input_shape), ("--signature", args.signature)))
    models = low_bit_models(args.model)
    if any(b.loops != "llvm" for b in args.builds):
        opt_tool()
    budget = args.budget or 30.0
    machine = report.machine_info()
    labels = ", ".join(b.label for b in args.builds)
    print(f"{', '.join(name for name, _ in models)} built {labels} at {args.threads} thread(s): compile, check "
          f"against onnxruntime, time in turns ...", flush=True)
    timings = []
    for name, load in models:
        model = load()
        for threads in args.threads:
            found = builds.compare_builds(model, name, args.builds, threads, args.runs, budget)
            for t in found:
                median = "outputs disagree" if t.mismatch else f"{t.median * 1e3:.1f} ms"
                print(f"  {name} {threads}t {t.label}: {median}", flush=True)
            timings += found
    table = builds.markdown(timings)
    print("\n" + table, end="")
    if args.markdown:
        command = (f"hobbit bench --builds {','.join(b.label for b in args.builds)} --model {args.model or 'all'} "
                   f"--threads {','.join(map(str, args.threads))} --runs {args.runs} --budget {budget:g}")
        write_text(f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']}, onnxruntime "
                   f"{machine['onnxruntime']}. {report.describe_machine(machine)}\n\n{table}", args.markdown)
    return 0 if all(t.mismatch is None for t in timings) else 1


def _bench_tf(args: argparse.Namespace) -> int:
    """A TensorFlow model: hobbit on it, TensorFlow on it, hobbit on its ONNX export (hobbit.bench.tf).
    TensorFlow fixes its thread count once per process, hence one --threads value per run."""
    if len(args.threads) > 1:
        raise ConfigError("a TensorFlow model is benchmarked at one thread count per run (TensorFlow fixes its "
                          "thread pool once per process): give --threads N")
    if args.load != ["none"] or args.streams or args.aot or args.batch > 1 or args.target != host_target():
        raise ConfigError("for a TensorFlow model, `hobbit bench` takes --threads, --runs, --warmup, --signature "
                          "and --markdown (no --load, --streams, --aot, --batch or --target yet)")
    result = tf.run_tf_benchmark(args.model, args.threads[0], args.runs, args.warmup, args.signature)
    print(result.format_text())
    table = tf.markdown_table([result])
    print(table, end="")
    if args.markdown:
        machine = report.machine_info()
        header = (f"`hobbit bench --model {args.model} --threads {args.threads[0]} --runs {args.runs}` on "
                  f"{machine['cpu']} (LLVM: {machine['llvm_cpu']}): medians (p10-p90) in ms\n\n")
        write_text(header + table, args.markdown)
    return 0 if result.mismatch is None else 1


def _bench_decode(args: argparse.Namespace) -> int:
    """`hobbit bench --decode STEPS` (hobbit.bench.decode): one decoding-step ONNX model."""
    if not args.model:
        raise ConfigError("--decode needs --model, a decoding step with a key/value cache")
    model = onnx.load(args.model)
    decode.decode_inputs(model)
    print(f"generating {args.decode} tokens with {args.model} at {','.join(map(str, args.threads))} thread(s), "
          f"hobbit (one compile) and onnxruntime ...", flush=True)
    rows = decode.run_decode(model, args.decode, args.threads)
    table = decode.decode_table(rows)
    print(table, end="")
    if args.markdown:
        write_text(f"{report.describe_machine(report.machine_info(BuildOptions.of(pipeline(args), args.target)))}\n\n"
                   f"`hobbit bench --model {args.model} --decode {args.decode} --threads "
                   f"{','.join(map(str, args.threads))}`\n\n{table}", args.markdown)
    return 0 if all(r.same_tokens for r in rows) else 1


def _bench_sweep(args: argparse.Namespace) -> int:
    """`hobbit bench --sweep SYMBOL[,SYMBOL...]=V1,V2,...` (hobbit.bench.sweep): one ONNX model, its
    symbolic dims checked before anything compiles."""
    refused = [load for load in args.load if load not in sweep.SWEEP_LOADS]
    if refused:
        raise ConfigError(f"`hobbit bench --sweep` times under --load {','.join(sweep.SWEEP_LOADS)}; "
                          f"not {','.join(refused)}")
    others = [flag for flag, used in (("--streams", args.streams),
                                      ("--aot", args.aot), ("--batch", args.batch > 1), ("--plot", args.plot),
                                      ("--profile", args.profile), ("--precision", args.precision),
                                      ("--signature", args.signature)) if used]
    if others:
        raise ConfigError(f"`hobbit bench --sweep` takes --model, --threads, --runs, --warmup, --load, --dynamic, "
                          f"--input-shape, --passes, --disable, --target, --markdown and --json; not {', '.join(others)}")
    name = args.model or "resnet18"
    model = load_model(name)
    source = open_source(model)
    if not isinstance(source, OnnxSource):
        raise ConfigError(f"{name} is a {source.format} model: --sweep times an ONNX model (one --model)")
    symbols, points = args.sweep
    sizes = _symbol_sizes(source, args.input_shape, symbols)
    bounds = dict(args.dynamic)
    sweep.check_sweep(source.declared_inputs(), name, symbols, points, sizes, bounds)
    del source  # its copy of the weights would count in the memory column
    build = BuildOptions.of(pipeline(args), args.target)
    machine = report.machine_info(build)
    swept = f"{','.join(symbols)}={','.join('x'.join(map(str, p)) for p in points)}"
    print(f"sweeping {swept.replace('=', ' over ', 1)} for {name} at {','.join(map(str, args.threads))} "
          f"thread(s): one compile, its first runs, then per value a static compile, a check against "
          f"onnxruntime, and the three engines timed ...", flush=True)
    rows = sweep.run_sweep(model, name, symbols, points, args.threads, args.runs, args.warmup, build,
                           sizes, bounds, report=lambda p: print(p.format(), flush=True), loads=args.load)
    print("\n" + sweep.compiles_line(rows) + sweep.sweep_table(rows), end="")
    if args.markdown:
        command = (f"hobbit bench --model {name} --sweep {swept}"
                   + "".join(f" --dynamic {s}={lo}:{hi}" for s, (lo, hi) in bounds.items())
                   + "".join(f" {flag}" for flag in args.input_shape)
                   + f" --threads {','.join(map(str, args.threads))} --runs {args.runs}"
                   + (f" --load {','.join(args.load)}" if args.load != ["none"] else "")
                   + (f" --target {build.target}" if build.target != "host" else ""))
        write_text(sweep.markdown_report(rows, machine, command, args.warmup), args.markdown)
    if args.json:
        with writing(args.json):
            sweep.write_json(rows, machine, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0 if all(p.mismatch is None for p in rows) else 1


def _symbol_sizes(source: OnnxSource, flags: list[ShapeFlag], swept: tuple[str, ...]) -> dict[str, int]:
    """The sizes --input-shape gives the model's named symbolic dims, but the swept ones."""
    shapes = input_shapes(declared(source, flags), flags)
    sizes: dict[str, tuple[int, str]] = {}
    for d in source.declared_inputs():
        for size, want, symbol in zip(shapes.get(d.name, ()), d.shape, d.symbols):
            if want is None and symbol is not None and symbol not in swept:
                first = sizes.setdefault(symbol, (size, d.name))
                if first[0] != size:
                    raise InputError(f"--input-shape gives dim '{symbol}' two sizes: {first[0]} (input "
                                     f"'{first[1]}') and {size} (input '{d.name}')")
    return {symbol: size for symbol, (size, _) in sizes.items()}


def low_bit_models(spec: str | None) -> list[tuple[str, Callable[[], onnx.ModelProto]]]:
    """--model with --precision: None or 'all' for the five zoo CNNs, else zoo names or .onnx paths
    separated by commas, checked before anything is built."""
    names = list(quant.MODELS) if spec in (None, "all") else [part.strip() for part in spec.split(",") if part.strip()]
    bad = [n for n in names if n not in zoo.MODELS and not os.path.exists(n)]
    if bad:
        raise ConfigError(f"--model: {', '.join(bad)} is neither a zoo model ({', '.join(quant.MODELS)}) nor a file")
    return [(os.path.basename(n) if os.path.exists(n) else n,
             (lambda n=n: read_onnx(n)) if os.path.exists(n) else (lambda n=n: zoo.build(n))) for n in names]


def _bench_low_bit(args: argparse.Namespace) -> int:
    """`hobbit bench --precision P` (hobbit.bench.quant): takes --model, --threads, --runs, --warmup, --markdown."""
    _takes_only(args, "--precision", "--model, --threads, --runs, --warmup and --markdown",
                (("--load", args.load != ["none"]), ("--streams", args.streams), ("--aot", args.aot),
                 ("--batch", args.batch > 1), ("--plot", args.plot), ("--json", args.json),
                 ("--profile", args.profile), ("--passes/--disable", args.passes or args.disable),
                 ("--input-shape", args.input_shape), ("--signature", args.signature)))
    if args.precision == "int8":
        _require_quantization("the int8 bench")
    models = low_bit_models(args.model)
    machine = report.machine_info()
    print(f"benchmarking {args.precision} on {', '.join(n for n, _ in models)} at "
          f"{','.join(map(str, args.threads))} thread(s): "
          f"quantize, check the fp32 reference, accuracy, then time every engine ...", flush=True)
    results = quant.run_suite(models, args.precision, args.threads, args.runs, args.warmup,
                              report=lambda r: print(r.format() + "\n", flush=True))
    print(quant_report.speed_table(results) + "\n" + quant_report.accuracy_table(results), end="")
    for note in quant_report.missing_notes(results):
        print(f"note: {note}", file=sys.stderr)
    if args.markdown:
        command = (f"hobbit bench --precision {args.precision} --model {args.model or ','.join(quant.MODELS)} "
                   f"--threads {','.join(map(str, args.threads))} --runs {args.runs}")
        with writing(args.markdown), open(args.markdown, "w") as f:
            f.write(quant_report.markdown_report(results, machine, command, args.warmup))
        print(f"wrote {args.markdown}", file=sys.stderr)
    return 0 if all(r.mismatch is None for r in results) else 1


def _bench_summary(args: argparse.Namespace, loads: list[str]) -> int:
    """`hobbit bench --summary FILE` (hobbit.bench.summary): takes --model, --threads, --runs, --warmup, --load."""
    _takes_only(args, "--summary", "--model, --threads, --runs, --warmup and --load",
                (("--precision", args.precision), ("--sweep", args.sweep), ("--decode", args.decode),
                 ("--dynamic", args.dynamic), ("--streams", args.streams), ("--aot", args.aot),
                 ("--batch", args.batch > 1), ("--markdown", args.markdown), ("--json", args.json),
                 ("--plot", args.plot), ("--profile", args.profile),
                 ("--passes/--disable", args.passes or args.disable), ("--input-shape", args.input_shape),
                 ("--signature", args.signature)))
    summary.check_loads(loads)
    existing = _read_if_there(args.summary)
    summary.check_file(existing, args.summary)
    _require_quantization("the summary's int8 tables")
    machine = report.machine_info()
    models = low_bit_models(args.model)
    print(f"measuring the peaks, then for {', '.join(n for n, _ in models)}: cold compiles, then at "
          f"{','.join(map(str, args.threads))} thread(s) fp32, bf16 and int8 under {','.join(loads)}, "
          f"then the per-kernel profiles ...", flush=True)
    peaks = summary.measure_peaks(args.threads)
    summaries = summary.run_summary(models, args.threads, loads, args.runs, args.warmup,
                                    show=lambda text: print(text + "\n", flush=True))
    # the file's name only: the folder it was written to is the measuring machine's
    command = (f"hobbit bench --summary {os.path.basename(args.summary)} "
               f"--model {args.model or ','.join(quant.MODELS)} "
               f"--threads {','.join(map(str, args.threads))} --runs {args.runs} --warmup {args.warmup} "
               f"--load {','.join(loads)}")
    text = summary.markdown(summaries, peaks, machine, command, args.threads, loads, args.runs, args.warmup)
    print(text, end="")
    write_text(summary.place(text, existing, args.summary), args.summary)
    agree = all(r.mismatch is None for s in summaries for r in [*s.fp32, *(q for rs in s.low_bit.values() for q in rs)])
    return 0 if agree else 1


def _read_if_there(path: str) -> str | None:
    """The text of the file `path`, or None where there is none yet."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _takes_only(args: argparse.Namespace, mode: str, takes: str, flags: tuple[tuple[str, object], ...]) -> None:
    """A ConfigError naming the flags of `flags` that are set (and --target when it is not the
    host), which `hobbit bench MODE` does not take."""
    others = [flag for flag, used in flags if used]
    if others or args.target != host_target():
        raise ConfigError(f"`hobbit bench {mode}` takes {takes}; not {', '.join(others) or '--target'}")


def _require_quantization(what: str) -> None:
    """Fail before minutes of work where onnxruntime's quantization tools are missing."""
    try:
        import onnxruntime.quantization  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(f"{what} quantizes with onnxruntime: pip install 'hobbit[bench]'") from exc
