"""The GPU benchmark: hobbit's CUDA backend against PyTorch on the zoo's CNNs, PyTorch both
eager (cuDNN) and replaying a CUDA graph, each output checked against hobbit's CPU path.

    python -m hobbit.bench.gpu [--models resnet18,vgg16,my.onnx] [--batches 1,32] [--precision fp32,tf32]
                               [--budget 400] [--out table.md] [--json rows.json]
    python -m hobbit.bench.gpu --prebuild --jobs 6   # compile them all into the compile cache, in parallel
    python -m hobbit.bench.gpu --dry-run             # no GPU needed: what can be checked on a CPU

For each model and batch (the zoo's models take any batch: hobbit.bench.suite.with_batch):
hobbit.compile(model) on the host gives the reference outputs, once for every precision;
hobbit.compile(model, target="cuda", precision=...) runs on the GPU and must match them within
RTOL/ATOL (the zoo's GPU tolerances, tests/backend/gpu/zoo_cases.py; tf32: TF32_TOL of the
largest output); PyTorch runs the same ONNX graph with the same weights op by op
(hobbit.bench.torch), TF32 off for fp32 so that both compute in float32, on for tf32, cuDNN's
autotuner on, and the same forward again captured in a CUDA graph (hobbit.bench.gpu_torch says
why a graph rather than torch.compile). An engine whose outputs disagree is not timed: its row
says so, as the CPU benchmark's do, so that no speed is quoted for a wrong answer. Each engine
is timed by wall clock around whole runs that end synchronised: hobbit's run copies the input
from a torch CUDA tensor into its buffer (from host memory where PyTorch cannot run), replays
its CUDA graph and leaves the outputs on the GPU; PyTorch's eager run is the forward and
torch.cuda.synchronize(), its graph run a replay and the same. Medians and p10-p90 over the
runs after the warm-ups, ratio hobbit/PyTorch (below 1: hobbit is faster), as a markdown table
(hobbit.bench.gpu_table) and, with --json, as JSON. Where PyTorch is missing or sees no GPU its
rows say so and hobbit's are still measured.

--prebuild fills the compile cache (hobbit.bench.gpu_prebuild) so that a later run spends
its time measuring; --dry-run compiles every model for cuda (kernels, ptxas registers and
spills, or what is unsupported) and checks the PyTorch interpreter against hobbit's CPU
outputs on the CPU, for the first model: the parts of this benchmark that need no GPU."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx

import hobbit
from hobbit import zoo
from hobbit.bench.gpu_table import DISAGREE, bench_json, markdown, stat
from hobbit.bench.gpu_torch import graph_replay, set_precision, torch_device
from hobbit.bench.suite import with_batch
from hobbit.bench.torch import TorchGraph, import_torch
from hobbit.errors import ConfigError, HobbitError, UnsupportedModelError

__all__ = ["Row", "bench_one", "compare", "dry_run", "main", "markdown", "run_bench"]
ZOO = ["squeezenet1_1", "mobilenet_v2", "resnet18", "resnet50", "vgg16"]
PRECISIONS = ("fp32", "tf32")
RTOL, ATOL = 1e-3, 1e-4
# precision tf32: both engines round GEMM operands to TF32, so outputs are checked relative to
# their largest magnitude (SqueezeNet emulated in TF32 vs onnxruntime float32: 5.5e-4 of it).
TF32_TOL = 5e-3
MIN_RUNS = 3


@dataclass
class Row:
    model: str
    batch: int
    hobbit_ms: list[float] = field(default_factory=list)
    torch_ms: list[float] = field(default_factory=list)  # PyTorch eager
    error: float | None = None  # max |hobbit GPU - hobbit CPU|
    torch_error: float | None = None  # max |PyTorch eager - hobbit CPU|
    ok: bool | None = None  # hobbit GPU within tolerance of hobbit CPU (False: not timed)
    torch_ok: bool | None = None
    kernels: int = 0
    compile_s: float = 0.0
    note: str = ""
    precision: str = "fp32"
    graph_ms: list[float] = field(default_factory=list)  # PyTorch's forward replayed as a CUDA graph
    graph_error: float | None = None
    graph_ok: bool | None = None
    torch_note: str = ""  # why a PyTorch row is missing (not installed, no GPU, unsupported op)


def model_at(factory: Callable[[], onnx.ModelProto], batch: int) -> onnx.ModelProto:
    model = factory()
    return model if batch == 1 else with_batch(model, batch)


def feeds_for(compiled: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded N(0, 1) data for every input of a compiled model."""
    rng = np.random.default_rng(seed)
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in compiled.inputs}


def reference(model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """(feeds, hobbit's CPU outputs for them): what every engine and precision is checked against."""
    cpu = hobbit.compile(model)
    feeds = feeds_for(cpu)
    return feeds, cpu.run(feeds)


def measure(step: Callable[[], object], runs: int, warmup: int, seconds: float) -> list[float]:
    """Milliseconds of `runs` calls of `step` after `warmup` unmeasured ones; fewer (but at least
    MIN_RUNS) where they outlast `seconds`."""
    for _ in range(warmup):
        step()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < runs and (len(times) < MIN_RUNS or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def compare(got: list[np.ndarray], want: list[np.ndarray], precision: str = "fp32") -> tuple[float, bool]:
    """The largest absolute difference over all outputs, and whether all are within RTOL/ATOL
    (tf32: within TF32_TOL of each output's largest magnitude)."""
    error, ok = 0.0, True
    if len(got) != len(want):
        return float("inf"), False
    for g, w in zip(got, want):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return float("inf"), False
        error = max(error, float(np.max(np.abs(g - w))) if g.size else 0.0)
        if precision == "tf32":
            ok = ok and bool(np.max(np.abs(g - w), initial=0.0) <= TF32_TOL * np.max(np.abs(w), initial=0.0))
        else:
            ok = ok and bool(np.allclose(g, w, rtol=RTOL, atol=ATOL))
    return error, ok


def _hobbit(row: Row, model: onnx.ModelProto, feeds: dict[str, np.ndarray], want: list[np.ndarray],
            device_feeds: dict[str, Any], timing: tuple[int, int, float], target: str = "cuda") -> None:
    """hobbit's GPU engine into `row`: compiled for `target`, checked, and timed only if its
    outputs agree."""
    t0 = time.perf_counter()
    try:
        gpu = hobbit.compile(model, target=target, precision=row.precision)
    except HobbitError as exc:  # PyTorch is still measured: the row says what hobbit lacks
        row.note = f"hobbit: {type(exc).__name__}: {_first_line(exc)}"
        return
    row.compile_s, row.kernels = time.perf_counter() - t0, len(gpu.launches)
    try:
        row.error, row.ok = compare(gpu.run(feeds), want, row.precision)
        if row.ok:
            row.hobbit_ms = measure(lambda: gpu.run(device_feeds, device_outputs=True), *timing)
        else:
            row.note = f"hobbit: {DISAGREE} (max abs error {row.error:.1e}): not timed"
    except HobbitError as exc:
        row.note = f"hobbit: {type(exc).__name__}: {_first_line(exc)}"
    finally:
        gpu.close()


def _torch(row: Row, model: onnx.ModelProto, tensors: dict[str, Any], want: list[np.ndarray], device: str,
           timing: tuple[int, int, float], graphs: bool) -> None:
    """PyTorch eager and its CUDA-graph replay into `row`, each timed only if its outputs agree."""
    torch = import_torch()
    cuda = device.startswith("cuda")
    if cuda:
        set_precision(torch, row.precision)
    try:
        baseline = TorchGraph(model, device)
    except UnsupportedModelError as exc:
        row.torch_note = f"PyTorch: {_first_line(exc)}"
        return
    ordered = [tensors[n] for n in baseline.input_names]

    def forward() -> list:
        out = baseline(*ordered)
        if cuda:
            torch.cuda.synchronize()
        return out
    with torch.inference_mode():
        row.torch_error, row.torch_ok = compare([t.cpu().numpy() for t in forward()], want, row.precision)
        if row.torch_ok:
            row.torch_ms = measure(forward, *timing)
        if not graphs:
            return
        if not cuda:
            row.torch_note = "PyTorch CUDA graph: needs a CUDA device"
            return
        step, graph = graph_replay(torch, lambda: baseline(*ordered), timing[1])
        row.graph_error, row.graph_ok = compare([t.cpu().numpy() for t in step()], want, row.precision)
        if row.graph_ok:
            row.graph_ms = measure(step, *timing)
        del graph, step


def bench_one(name: str, model: onnx.ModelProto, batch: int, device: str | None, runs: int, warmup: int,
              seconds: float, precision: str = "fp32",
              checked: tuple[dict[str, np.ndarray], list[np.ndarray]] | None = None, graphs: bool = True,
              no_torch: str = "", target: str = "cuda") -> Row:
    """One model at one batch and precision: hobbit GPU and PyTorch (eager, and a CUDA graph on
    a GPU) checked against `checked` (feeds, hobbit CPU outputs; computed here if None) and
    timed where they agree. `device` is PyTorch's ("cuda"; "cpu" lets the tests drive it with a
    fake driver; PyTorch's ROCm build calls its GPU "cuda" too), or None where it cannot run,
    `no_torch` saying why. `target`: hobbit's ("cuda", "rocm:gfx942", ...)."""
    row = Row(name, batch, precision=precision)
    feeds, want = checked if checked is not None else reference(model)
    timing = (runs, warmup, seconds)
    tensors: dict[str, Any] = {}
    if device is not None:
        torch = import_torch()
        tensors = {k: torch.from_numpy(v).to(device) for k, v in feeds.items()}
    # On the GPU the inputs are torch CUDA tensors (__cuda_array_interface__): copied device to device.
    device_feeds = tensors if device is not None and device.startswith("cuda") else feeds
    _hobbit(row, model, feeds, want, device_feeds, timing, target)
    if device is None:
        row.torch_note = f"PyTorch rows unavailable: {no_torch or 'no device given'}"
    else:
        _torch(row, model, tensors, want, device, timing, graphs)
    return row


def precisions_of(precision: str) -> list[str]:
    """"fp32", "tf32" or both comma-separated -> the list; anything else is a ConfigError."""
    out = [p for p in precision.split(",") if p]
    bad = [p for p in out if p not in PRECISIONS]
    if bad or not out:
        raise ConfigError(f"precision {precision!r}: the GPU benchmark measures {', '.join(PRECISIONS)} "
                          f"(comma-separated for several)")
    return out


def run_bench(models: dict[str, Callable[[], onnx.ModelProto]], batches: list[int], device: str | None = "cuda",
              runs: int = 100, warmup: int = 5, seconds: float = 3.0, budget: float = float("inf"),
              show: Callable[[str], None] = lambda line: None, precision: str = "fp32", graphs: bool = True,
              no_torch: str = "", target: str = "cuda") -> list[Row]:
    """Every model at every batch (batch-major: all models at the first batch first) in every
    precision of `precision` ("fp32,tf32": the CPU reference computed once for both), one Row
    each; a failure is a Row with its note, and what is left once `budget` seconds are spent
    is skipped."""
    start = time.perf_counter()
    rows = []
    built: dict[str, onnx.ModelProto] = {}  # each model built once (vgg16's weights take a while)
    wanted = precisions_of(precision)
    for batch in batches:
        for name, factory in models.items():
            model, checked = None, None
            for prec in wanted:
                if time.perf_counter() - start > budget:
                    rows.append(Row(name, batch, precision=prec, note=f"skipped: the {budget:.0f} s budget was spent"))
                    continue
                try:
                    if model is None:
                        if name not in built:
                            built[name] = factory()
                        model = model_at(lambda: built[name], batch)
                        checked = reference(model)
                    row = bench_one(name, model, batch, device, runs, warmup, seconds, prec, checked, graphs,
                                    no_torch, target)
                except Exception as exc:  # a bench reports each model's failure and goes on with the next
                    row = Row(name, batch, precision=prec, note=f"{type(exc).__name__}: {_first_line(exc)}")
                rows.append(row)
                show(f"{name} batch {batch} {prec}: {_summary(row)}")
                if device is not None and device.startswith("cuda"):
                    import_torch().cuda.empty_cache()
    return rows


def _first_line(exc: BaseException) -> str:
    """A failure in one table cell: the unsupported ops counted, else the message's first line."""
    if isinstance(exc, UnsupportedModelError):
        counts = Counter(item.op_type for item in exc.items)
        return "unsupported: " + ", ".join(f"{op} ×{n}" for op, n in counts.most_common())
    text = str(exc).strip()
    lines = text.splitlines()
    return (lines[0] + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""))[:300] if lines else ""


def _summary(row: Row) -> str:
    error = "—" if row.error is None else f"{row.error:.2e}"
    return (f"hobbit {stat(row.hobbit_ms)} ms, torch {stat(row.torch_ms)} ms, graph {stat(row.graph_ms)} ms, "
            f"max err {error} ok={row.ok} {row.note} {row.torch_note}").rstrip()


@dataclass
class DryRow:
    model: str
    kernels: int = 0
    max_registers: int = 0
    spills: int = 0
    compile_s: float = 0.0
    note: str = ""


def dry_run(models: dict[str, Callable[[], onnx.ModelProto]], show: Callable[[str], None] = lambda line: None,
            precision: str = "fp32", target: str = "cuda"
            ) -> tuple[list[DryRow], tuple[str, float, bool] | None]:
    """Each model compiled for `target` (or why not), and the PyTorch interpreter's outputs on
    the CPU against hobbit's CPU outputs for the first model: (name, max abs error, within
    tolerance)."""
    rows = []
    for name, factory in models.items():
        row = DryRow(name)
        t0 = time.perf_counter()
        try:
            gpu = hobbit.compile(factory(), target=target, precision=precision)
        except HobbitError as exc:
            row.note = f"{type(exc).__name__}: {_first_line(exc)}"
        else:
            row.kernels = len(gpu.launches)
            row.max_registers = max((r.registers for r in gpu.resources.values()), default=0)
            row.spills = sum(r.spill_stores + r.spill_loads for r in gpu.resources.values())
            row.note = "" if gpu.cubin is not None or gpu.target.vendor != "cuda" else "no ptxas: PTX only"
        row.compile_s = time.perf_counter() - t0
        rows.append(row)
        show(f"{name}: {row.kernels} kernels, {row.max_registers} registers max, {row.spills} spill bytes "
             f"{row.note}".rstrip())
    if not models:
        return rows, None
    name, factory = next(iter(models.items()))
    torch = import_torch()
    model = factory()
    cpu = hobbit.compile(model)
    feeds = feeds_for(cpu)
    baseline = TorchGraph(model, "cpu")
    with torch.inference_mode():
        got = [t.numpy() for t in baseline(*[torch.from_numpy(feeds[n]) for n in baseline.input_names])]
    error, ok = compare(got, cpu.run(feeds))
    show(f"PyTorch interpreter vs hobbit CPU on {name}: max abs error {error:.2e}, within tolerance: {ok}")
    return rows, (name, error, ok)


def dry_markdown(rows: list[DryRow]) -> str:
    lines = ["| model | kernels | max registers | spill bytes | compile s | note |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        note = r.note.replace("|", "\\|")
        lines.append(f"| {r.model} | {r.kernels or '—'} | {r.max_registers or '—'} | {r.spills} | "
                     f"{r.compile_s:.1f} | {note} |")
    return "\n".join(lines)


def environment() -> str:
    """One line naming the GPU and the software measured."""
    try:
        torch = import_torch()
    except HobbitError:
        return f"PyTorch not installed; numpy {np.__version__}"
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU visible to PyTorch"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "none"
    return f"GPU: {name}; torch {torch.__version__}, cuDNN {cudnn}; numpy {np.__version__}"


def gpu_missing(target: str = "cuda") -> str:
    """Why hobbit's runtime for `target`'s vendor cannot run here ("" where a device is visible
    to its driver)."""
    from hobbit.runtime import cuda, hip  # looked up at each call: the tests put fake drivers there
    rocm = target.split(":")[0] == "rocm"
    vendor, init, count_of = ("HIP", "hipInit", "hipGetDeviceCount") if rocm else ("CUDA", "cuInit", "cuDeviceGetCount")
    try:
        d = hip.hip_module() if rocm else cuda.driver_module()
        success = d.hipError_t.hipSuccess if rocm else d.CUresult.CUDA_SUCCESS
        status = getattr(d, init)(0)
        status = status[0] if isinstance(status, tuple) else status
        if status != success:
            return f"{init} failed ({status})"
        count = getattr(d, count_of)()[1]
    except Exception as exc:  # DeviceError without the bindings; the bindings' own without the driver library
        return f"no {vendor} driver: {_first_line(exc)}"
    return "" if count > 0 else f"the {vendor} driver sees no device"


def models_of(spec: str) -> dict[str, Callable[[], onnx.ModelProto]]:
    """--models: zoo names and .onnx files (named by their stem), comma-separated."""
    models: dict[str, Callable[[], onnx.ModelProto]] = {}
    for item in (s for s in spec.split(",") if s):
        if item.endswith(".onnx"):
            if not os.path.isfile(item):
                raise ConfigError(f"--models: no such ONNX file {item!r}")
            models[os.path.splitext(os.path.basename(item))[0]] = lambda path=item: onnx.load(path)
        else:
            models[item] = lambda name=item: zoo.build(name)
    return models


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hobbit.bench.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo models or .onnx files")
    parser.add_argument("--batches", default="1,32", help="comma-separated batch sizes")
    parser.add_argument("--runs", type=int, default=100, help="timed runs per engine (fewer past --seconds)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per engine and model, at least 3 runs")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds in all; the rest is skipped")
    parser.add_argument("--precision", default="fp32",
                        help="fp32 (TF32 off in both), tf32 (hobbit's tensor cores against PyTorch with TF32 "
                             "allowed in cuDNN and matmul), or fp32,tf32")
    parser.add_argument("--no-graphs", action="store_true", help="leave out the PyTorch CUDA-graph column")
    parser.add_argument("--target", default="cuda", help="hobbit's GPU target: cuda, cuda:sm_80, rocm:gfx942, ...")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: compile for --target, check the torch baseline")
    parser.add_argument("--prebuild", action="store_true",
                        help="only compile every model, batch and precision into the compile cache")
    parser.add_argument("--jobs", type=int, default=4, help="--prebuild's parallel compiles")
    parser.add_argument("--out", help="also write the markdown table to this file")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    return parser


def _write(path: str | None, text: str) -> None:
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    models = models_of(args.models)
    batches = [int(b) for b in args.batches.split(",") if b]

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)
    if args.prebuild:
        from hobbit.bench.gpu_prebuild import prebuild, prebuild_markdown
        built = prebuild(args.models, batches, precisions_of(args.precision), args.jobs, show, args.target)
        text = prebuild_markdown(built)
        print(text)
        _write(args.out, text)
        return 1 if any(b.note for b in built) else 0
    if args.dry_run:
        rows, check = dry_run(models, show, precisions_of(args.precision)[0], args.target)
        text = dry_markdown(rows)
        if check is not None:
            text += f"\n\nPyTorch interpreter vs hobbit CPU on {check[0]}: max abs error {check[1]:.2e} " \
                    f"(rtol {RTOL}, atol {ATOL}: {'within' if check[2] else 'NOT within'})"
        print(text)
        _write(args.out, text)
        return 1 if check is not None and not check[2] else 0
    missing = gpu_missing(args.target)
    if missing:
        print(f"no GPU for hobbit's {args.target} ({missing}); --dry-run checks what needs none", file=sys.stderr)
        _write(args.json, json.dumps(bench_json([], environment(), f"not run: {missing}"), indent=1))
        return 2
    device, no_torch = torch_device()
    rows = run_bench(models, batches, device, args.runs, args.warmup, args.seconds, args.budget, show,
                     args.precision, not args.no_graphs, no_torch, args.target)
    wanted = precisions_of(args.precision)
    tolerance = f"fp32: rtol {RTOL}, atol {ATOL}; tf32: {TF32_TOL} of the largest output"
    header = (f"{environment()}. Precisions {', '.join(wanted)} (fp32: TF32 off in both; tf32: on in both); wall "
              f"clock per synchronised run, {args.warmup} warm-ups; tolerance vs hobbit CPU: {tolerance}; an engine "
              f"whose outputs disagree is not timed.")
    text = header + "\n\n" + markdown(rows)
    print(text)
    _write(args.out, text)
    _write(args.json, json.dumps(bench_json(rows, header, "ran"), indent=1))
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
