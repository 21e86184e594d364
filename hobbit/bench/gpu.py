"""The GPU benchmark: hobbit's CUDA backend against PyTorch eager (cuDNN, fp32) on the zoo's
CNNs, each output checked against hobbit's CPU path.

    python -m hobbit.bench.gpu [--models resnet18,vgg16] [--batches 1,32] [--budget 400]
    python -m hobbit.bench.gpu --dry-run    # no GPU needed: what can be checked on a CPU

For each model and batch (the zoo's models take any batch: hobbit.bench.suite.with_batch):
hobbit.compile(model) on the host gives the reference outputs; hobbit.compile(model,
target="cuda") runs on the GPU and must match them within RTOL/ATOL (the zoo's GPU
tolerances, tests/backend/gpu/zoo_cases.py); PyTorch runs the same ONNX graph with the same weights
op by op (hobbit.bench.torch), TF32 off so that both compute in float32, cuDNN's autotuner
on. Each engine is timed by wall clock around whole runs that end synchronised: hobbit's
run copies the input from a torch CUDA tensor into its buffer, replays its CUDA graph and
leaves the outputs on the GPU; PyTorch's is the eager forward and torch.cuda.synchronize().
Medians and p10-p90 over the runs after the warm-ups, ratio hobbit/PyTorch (below 1:
hobbit is faster), as a markdown table.

--dry-run compiles every model for cuda (kernels, ptxas registers and spills, or what is
unsupported) and checks the PyTorch interpreter against hobbit's CPU outputs on the CPU,
for the first model: the parts of this benchmark that need no GPU."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx

import hobbit
from hobbit import zoo
from hobbit.bench.suite import with_batch
from hobbit.bench.torch import TorchGraph, import_torch
from hobbit.errors import HobbitError, UnsupportedModelError

ZOO = ["squeezenet1_1", "mobilenet_v2", "resnet18", "resnet50", "vgg16"]
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
    torch_ms: list[float] = field(default_factory=list)
    error: float | None = None  # max |hobbit GPU - hobbit CPU|
    torch_error: float | None = None  # max |PyTorch - hobbit CPU|
    ok: bool | None = None  # hobbit GPU within RTOL/ATOL of hobbit CPU
    torch_ok: bool | None = None
    kernels: int = 0
    compile_s: float = 0.0
    note: str = ""


def model_at(factory: Callable[[], onnx.ModelProto], batch: int) -> onnx.ModelProto:
    model = factory()
    return model if batch == 1 else with_batch(model, batch)


def feeds_for(compiled: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded N(0, 1) data for every input of a compiled model."""
    rng = np.random.default_rng(seed)
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in compiled.inputs}


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


def bench_one(name: str, model: onnx.ModelProto, batch: int, device: str, runs: int, warmup: int,
              seconds: float, precision: str = "fp32") -> Row:
    """One model at one batch: hobbit CPU reference, hobbit GPU checked and timed, PyTorch
    checked and timed on `device` ("cuda"; "cpu" lets the tests drive it with a fake driver)."""
    torch = import_torch()
    row = Row(name, batch)
    cpu = hobbit.compile(model)
    feeds = feeds_for(cpu)
    want = cpu.run(feeds)
    del cpu
    tensors = {k: torch.from_numpy(v).to(device) for k, v in feeds.items()}
    t0 = time.perf_counter()
    try:
        gpu = hobbit.compile(model, target="cuda", precision=precision)
    except HobbitError as exc:  # PyTorch is still measured: the row says what hobbit lacks
        row.note = f"hobbit: {type(exc).__name__}: {_first_line(exc)}"
    else:
        row.compile_s, row.kernels = time.perf_counter() - t0, len(gpu.launches)
        try:
            row.error, row.ok = compare(gpu.run(feeds), want, precision)
            # On the GPU the inputs are torch CUDA tensors (__cuda_array_interface__): copied device to device.
            device_feeds = tensors if device.startswith("cuda") else feeds
            row.hobbit_ms = measure(lambda: gpu.run(device_feeds, device_outputs=True), runs, warmup, seconds)
        finally:
            gpu.close()
    baseline = TorchGraph(model, device)
    ordered = [tensors[n] for n in baseline.input_names]

    def forward() -> list:
        out = baseline(*ordered)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return out
    with torch.inference_mode():
        row.torch_error, row.torch_ok = compare([t.cpu().numpy() for t in forward()], want, precision)
        row.torch_ms = measure(forward, runs, warmup, seconds)
    return row


def run_bench(models: dict[str, Callable[[], onnx.ModelProto]], batches: list[int], device: str = "cuda",
              runs: int = 100, warmup: int = 5, seconds: float = 3.0, budget: float = float("inf"),
              show: Callable[[str], None] = lambda line: None, precision: str = "fp32") -> list[Row]:
    """Every model at every batch (batch-major: all models at the first batch first), one Row
    each; a failure is a Row with its note, and what is left once `budget` seconds are spent
    is skipped."""
    start = time.perf_counter()
    rows = []
    built: dict[str, onnx.ModelProto] = {}  # each model built once (vgg16's weights take a while)
    for batch in batches:
        for name, factory in models.items():
            if time.perf_counter() - start > budget:
                rows.append(Row(name, batch, note=f"skipped: the {budget:.0f} s budget was spent"))
                continue
            try:
                if name not in built:
                    built[name] = factory()
                row = bench_one(name, model_at(lambda: built[name], batch), batch, device, runs, warmup, seconds,
                                precision)
            except Exception as exc:  # a bench reports each model's failure and goes on with the next
                row = Row(name, batch, note=f"{type(exc).__name__}: {_first_line(exc)}")
            rows.append(row)
            show(f"{name} batch {batch}: {_summary(row)}")
            if device.startswith("cuda"):
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


def _stat(times: list[float]) -> str:
    if not times:
        return "—"
    p10, p50, p90 = np.percentile(times, [10, 50, 90])
    return f"{p50:.3f} ({p10:.3f}–{p90:.3f})"


def _summary(row: Row) -> str:
    error = "—" if row.error is None else f"{row.error:.2e}"
    return f"hobbit {_stat(row.hobbit_ms)} ms, torch {_stat(row.torch_ms)} ms, max err {error} ok={row.ok} {row.note}"


def markdown(rows: list[Row]) -> str:
    lines = ["| model | batch | hobbit GPU median (p10–p90) ms | PyTorch eager median (p10–p90) ms | hobbit/torch "
             "| "
             "hobbit images/s | max abs err vs hobbit CPU (hobbit / torch) | within tolerance (hobbit / torch) | "
             "kernels | runs | compile s | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = f"{np.median(r.hobbit_ms) / np.median(r.torch_ms):.2f}" if r.hobbit_ms and r.torch_ms else "—"
        rate = f"{r.batch / np.median(r.hobbit_ms) * 1e3:.0f}" if r.hobbit_ms else "—"
        errors = " / ".join("—" if e is None else f"{e:.1e}" for e in (r.error, r.torch_error))
        oks = " / ".join("—" if o is None else ("yes" if o else "**NO**") for o in (r.ok, r.torch_ok))
        runs = f"{len(r.hobbit_ms)} / {len(r.torch_ms)}" if r.hobbit_ms else "—"
        compile_s = f"{r.compile_s:.1f}" if r.compile_s else "—"
        note = r.note.replace("|", "\\|")
        lines.append(f"| {r.model} | {r.batch} | {_stat(r.hobbit_ms)} | {_stat(r.torch_ms)} | {ratio} | {rate} | "
                     f"{errors} | {oks} | {r.kernels or '—'} | {runs} | {compile_s} | {note} |")
    return "\n".join(lines)


@dataclass
class DryRow:
    model: str
    kernels: int = 0
    max_registers: int = 0
    spills: int = 0
    compile_s: float = 0.0
    note: str = ""


def dry_run(models: dict[str, Callable[[], onnx.ModelProto]], show: Callable[[str], None] = lambda line: None,
            precision: str = "fp32"
            ) -> tuple[list[DryRow], tuple[str, float, bool] | None]:
    """Each model compiled for cuda (or why not), and the PyTorch interpreter's outputs on the
    CPU against hobbit's CPU outputs for the first model: (name, max abs error, within tolerance)."""
    rows = []
    for name, factory in models.items():
        row = DryRow(name)
        t0 = time.perf_counter()
        try:
            gpu = hobbit.compile(factory(), target="cuda", precision=precision)
        except HobbitError as exc:
            row.note = f"{type(exc).__name__}: {_first_line(exc)}"
        else:
            row.kernels = len(gpu.launches)
            row.max_registers = max((r.registers for r in gpu.resources.values()), default=0)
            row.spills = sum(r.spill_stores + r.spill_loads for r in gpu.resources.values())
            row.note = "" if gpu.cubin is not None else "no ptxas: PTX only"
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


def environment(torch: Any) -> str:
    """One line naming the GPU and the software measured."""
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "none"
    return f"GPU: {name}; torch {torch.__version__}, cuDNN {cudnn}; numpy {np.__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hobbit.bench.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo models")
    parser.add_argument("--batches", default="1,32", help="comma-separated batch sizes")
    parser.add_argument("--runs", type=int, default=100, help="timed runs per engine (fewer past --seconds)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per engine and model, at least 3 runs")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds in all; the rest is skipped")
    parser.add_argument("--precision", choices=["fp32", "tf32"], default="fp32",
                        help="fp32 (TF32 off in both), or tf32: hobbit's tensor cores against PyTorch with "
                             "TF32 allowed in cuDNN and matmul")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: compile for cuda, check the torch baseline")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    models = {n: (lambda n=n: zoo.build(n)) for n in names}

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)
    torch = import_torch()
    if args.dry_run:
        rows, check = dry_run(models, show, args.precision)
        text = dry_markdown(rows)
        if check is not None:
            text += f"\n\nPyTorch interpreter vs hobbit CPU on {check[0]}: max abs error {check[1]:.2e} " \
                    f"(rtol {RTOL}, atol {ATOL}: {'within' if check[2] else 'NOT within'})"
        failed = check is not None and not check[2]
    else:
        if not torch.cuda.is_available():
            print("no CUDA GPU is visible to PyTorch; --dry-run checks what needs none", file=sys.stderr)
            return 2
        torch.backends.cudnn.benchmark = True
        tf32 = args.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        rows = run_bench(models, [int(b) for b in args.batches.split(",")], "cuda", args.runs, args.warmup,
                         args.seconds, args.budget, show, args.precision)
        tolerance = f"{TF32_TOL} of the largest output" if tf32 else f"rtol {RTOL}, atol {ATOL}"
        text = (f"{environment(torch)}. {'tf32 both (TF32 on)' if tf32 else 'fp32 both (TF32 off)'}; wall clock "
                f"per synchronised run, {args.warmup} warm-ups; tolerance vs hobbit CPU: {tolerance}.\n\n"
                + markdown(rows))
        failed = any(r.ok is False for r in rows)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
