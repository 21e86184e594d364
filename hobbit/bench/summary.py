"""`hobbit bench --summary FILE`: every precision against its best peer, in one markdown page.

BENCHMARKS.md's headline tables come from one command, so that the lead can regenerate
them on a machine and trust that every cell was measured the same way in the same run. For
each model (default: the five zoo CNNs) at each thread count it runs what the other
benchmarks already measure, and only arranges their results:

- fp32 (hobbit.bench.suite.run_loads): hobbit beside onnxruntime, onnxruntime with
  allow_spinning=0 and OpenVINO f32, quiet and under each other in-process load condition
  (default busy-core), then the sporadic conditions (gaps:MS, poisson:RATE);
- bf16 and int8 (hobbit.bench.quant.bench_model): hobbit bf16 beside OpenVINO bf16, hobbit
  int8 on onnxruntime's QDQ model beside onnxruntime and OpenVINO on the same model, under
  the same load conditions;
- the cold compile (hobbit.bench.coldcompile), once per model at the first thread count;
- the per-kernel profile (hobbit.bench.suite.profile_times) of each precision, its three
  slowest kernels set against the measured peak of that precision's micro-instruction
  (hobbit.runtime.peak: FMA for fp32, vdpbf16ps for bf16, vpdpbusd for int8).

The page's header names the CPU (its /proc/cpuinfo model name and LLVM's host CPU), the
date, the command and the peers' versions; an engine that is not there (OpenVINO not
installed, no AVX512-BF16) is a line saying so, and its cells are dashes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from hobbit.bench import coldcompile, quant, quant_report, report, sporadic, suite
from hobbit.bench.coldcompile import PHASES, ColdCompile
from hobbit.bench.load import LOADS, NO_SPIN_ENGINE, BuildOptions, describe_mode
from hobbit.bench.openvino import NOT_INSTALLED
from hobbit.bench.quant import BF16, INT8_ORT_MODEL, OV_BF16, ORT_INT8, OV_INT8, QuantBenchResult
from hobbit.bench.result import ENGINE_LABELS, OPENVINO_ENGINE, BenchResult, Timing
from hobbit.errors import ConfigError, HobbitError
from hobbit.runtime.peak import INSTRUCTIONS, PRECISION_OF, instruction_peak, missing
from hobbit.runtime.profile import KernelTime

DEFAULT_LOADS = ("none", "busy-core", "gaps:1", "gaps:10", "gaps:100", "poisson:10")
PRECISIONS = ("fp32", "bf16", "int8")
INSTRUCTION_OF = {precision: micro for micro, precision in PRECISION_OF.items()}
TOP = 3  # slowest kernels per model, precision and thread count
TARGET = 0.8  # issue 29: every cell at most 0.8 of the best peer of its precision
# hobbit's engine and its peers, per low-bit precision (hobbit.bench.quant's engine names).
LOW_BIT = {"bf16": (BF16, (OV_BF16,)), "int8": (INT8_ORT_MODEL, (ORT_INT8, OV_INT8))}
FP32_PEERS = ("onnxruntime", NO_SPIN_ENGINE, OPENVINO_ENGINE)


@dataclass(frozen=True)
class Profile:
    """The kernels of one model at one precision and thread count, or why there are none."""

    model: str
    precision: str
    threads: int
    times: list[KernelTime] | None
    note: str | None = None


@dataclass
class ModelSummary:
    """Everything measured of one model."""

    name: str
    fp32: list[BenchResult] = field(default_factory=list)
    low_bit: dict[str, list[QuantBenchResult]] = field(default_factory=dict)
    cold: ColdCompile | None = None
    profiles: list[Profile] = field(default_factory=list)


def table_loads(loads: Sequence[str]) -> list[str]:
    """The conditions of the latency tables: the in-process ones of `loads`, none first."""
    return ["none", *(load for load in loads if load != "none" and not sporadic.is_sporadic(load))]


def check_loads(loads: Sequence[str]) -> None:
    """A ConfigError for a condition the summary cannot time every precision under."""
    refused = [load for load in loads if load not in LOADS and not sporadic.is_sporadic(load) or load == "two-procs"]
    if refused:
        raise ConfigError(f"the summary times every precision in one process: not under {', '.join(refused)} "
                          f"(it takes {', '.join(load for load in LOADS if load != 'two-procs')}, gaps:MS and "
                          f"poisson:RATE)")


def measure_peaks(threads: Sequence[int]) -> dict[str, dict[int, Any]]:
    """Each precision's instruction peak (hobbit.runtime.peak.Peak, or None where this CPU lacks
    it) at each thread count, measured while nothing else of ours runs."""
    return {precision: {n: instruction_peak(INSTRUCTION_OF[precision], n) for n in threads}
            for precision in PRECISIONS}


def run_summary(models: Iterable[tuple[str, Callable[[], onnx.ModelProto]]], threads: Sequence[int],
                loads: Sequence[str] = DEFAULT_LOADS, runs: int = 30, warmup: int = 3,
                build: BuildOptions = BuildOptions(), show: Callable[[str], None] | None = None,
                ) -> list[ModelSummary]:
    """Measure every model (module docstring), cold compiles first: each in a fresh process,
    while this one is quiet. `show` gets each result's text as it comes."""
    check_loads(loads)
    show = show or (lambda text: None)
    timed = table_loads(loads)
    loaded = [(name, load()) for name, load in models]
    summaries = []
    for name, model in loaded:
        summary = ModelSummary(name, cold=coldcompile.measure(model, name, threads[0], build))
        show(f"cold compile of {name}: {summary.cold.seconds:.2f} s")
        summaries.append(summary)
    for summary, (name, model) in zip(summaries, loaded):
        for n in threads:
            found = suite.run_loads(model, name, [*timed, *(l for l in loads if sporadic.is_sporadic(l))], runs, n,
                                    warmup, build, no_spin=True, openvino=True, peer_loads=timed)
            for result in found:
                show(result.format())
            summary.fp32 += found
        sources = {}
        for precision in LOW_BIT:
            sources[precision] = quant.model_sources(model, precision)
            found = quant.bench_model(name, model, precision, threads, runs, warmup, loads=timed,
                                      sources=sources[precision])
            for result in found:
                show(result.format())
            summary.low_bit[precision] = found
        compiled = {"fp32": model, "bf16": model, "int8": sources["int8"].ort_qdq}
        for precision in PRECISIONS:
            for n in threads:
                summary.profiles.append(profile(compiled[precision], name, precision, n, runs, build))
    return summaries


def profile(model: onnx.ModelProto, name: str, precision: str, threads: int, runs: int,
            build: BuildOptions) -> Profile:
    """The per-kernel times of `model` compiled at `precision` (int8: a QDQ model, compiled as
    fp32 is), or the reason it does not compile here."""
    try:
        times = suite.profile_times(model, threads, runs, build, precision="bf16" if precision == "bf16" else "fp32")
    except HobbitError as exc:
        return Profile(name, precision, threads, None, f"{type(exc).__name__}: {exc}")
    return Profile(name, precision, threads, times)


# -- the page ----------------------------------------------------------------------------------
BEGIN = "<!-- hobbit bench --summary: begin -->"
END = "<!-- hobbit bench --summary: end -->"


def place(page: str, existing: str | None, path: str) -> str:
    """The text of the file `path` with `page` in it: between the BEGIN and END markers of the
    file's `existing` text (so `hobbit bench --summary BENCHMARKS.md` regenerates its section
    and leaves the rest of the file as it was), or the page within the markers for a new file.
    An existing file without both markers is refused (check_file) rather than overwritten."""
    framed = f"{BEGIN}\n{page.rstrip()}\n{END}"
    if existing is None:
        return framed + "\n"
    start, end = _section(existing, path)
    return existing[:start] + framed + existing[end + len(END):]


def check_file(existing: str | None, path: str) -> None:
    """A ConfigError for an existing file that has no place for the page: checked before the
    measurements, which take most of an hour for the five CNNs."""
    if existing is not None:
        _section(existing, path)


def _section(existing: str, path: str) -> tuple[int, int]:
    """Where the BEGIN and END markers of the file's text start, or a ConfigError."""
    start, end = existing.find(BEGIN), existing.find(END)
    if start < 0 or end < start:
        raise ConfigError(f"{path} exists and has no '{BEGIN}' ... '{END}' lines around a summary to replace: "
                          f"add them where the tables go, or name a new file")
    return start, end


def figure(ms: float) -> str:
    """A latency in ms to 4 significant digits, as the issue's tables write them."""
    if ms >= 1e3:
        return f"{ms:.0f}"
    return np.format_float_positional(ms, precision=4, unique=False, fractional=False, trim="k")


def _pair(ours: Timing | None, peers: dict[str, Timing]) -> tuple[str, str, str]:
    """(cell 'hobbit / best peer', ratio cell, the best peer) from hobbit's timing and the peers'."""
    if ours is None or not peers:
        mine = "—" if ours is None else figure(ours.median)
        return f"{mine} / {'—' if not peers else figure(min(t.median for t in peers.values()))}", "—", "—"
    best = min(peers, key=lambda name: peers[name].median)
    ratio = ours.median / peers[best].median
    return (f"{figure(ours.median)} / {figure(peers[best].median)}", quant_report.ratio_cell(ratio, TARGET), best)


def fp32_cells(result: BenchResult | None) -> tuple[str, str, str]:
    if result is None:
        return "—", "—", "—"
    if result.mismatch is not None:
        return "outputs disagree", "—", "—"
    timings = result.timings()
    cells = _pair(result.hobbit, {name: timings[name] for name in FP32_PEERS if name in timings})
    return cells[0], cells[1], ENGINE_LABELS.get(cells[2], cells[2])


def low_bit_cells(precision: str, result: QuantBenchResult | None) -> tuple[str, str, str]:
    if result is None:
        return "—", "—", "—"
    if result.mismatch is not None:
        return "reference disagrees", "—", "—"
    ours, peers = LOW_BIT[precision]
    return _pair(result.timings.get(ours), {p: result.timings[p] for p in peers if p in result.timings})


def latency_table(summaries: list[ModelSummary], threads: Sequence[int], load: str) -> str:
    """The issue's layout: per model and thread count, hobbit / the best peer and their ratio at
    each precision (✗: above TARGET), and which peer was best."""
    heads = ["model", "threads", "fp32 hobbit / best", "ratio", "bf16 hobbit / OpenVINO", "ratio",
             "int8 hobbit / best", "ratio", "best peers: fp32, int8"]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for s in summaries:
        for n in threads:
            fp32 = next((r for r in s.fp32 if r.threads == n and r.mode == load), None)
            cells = [s.name, str(n), *fp32_cells(fp32)[:2]]
            best = [fp32_cells(fp32)[2]]
            for precision in LOW_BIT:
                result = next((r for r in s.low_bit.get(precision, []) if r.threads == n and r.mode == load), None)
                pair, ratio, peer = low_bit_cells(precision, result)
                cells += [pair, ratio]
                if precision == "int8":
                    best.append(peer)
            lines.append("| " + " | ".join(cells + [", ".join(best)]) + " |")
    return "\n".join(lines) + "\n"


def cold_table(summaries: list[ModelSummary]) -> str:
    """Per model: the cold compile's wall seconds, importing hobbit before it, and its phases."""
    lines = ["| model | threads | compile s | " + " | ".join(f"{phase} s" for phase in PHASES)
             + " | rest s | `import hobbit` s |", "|" + " --- |" * (len(PHASES) + 5)]
    for s in summaries:
        if s.cold is None:
            continue
        c = s.cold
        phases = [f"{c.phases[phase]:.2f}" if phase in c.phases else "—" for phase in PHASES]
        lines.append(f"| {s.name} | {c.threads} | {c.seconds:.2f} | " + " | ".join(phases)
                     + f" | {c.rest:.2f} | {c.hobbit_import:.2f} |")
    return "\n".join(lines) + "\n"


def kernel_table(summaries: list[ModelSummary], peaks: dict[str, dict[int, Any]]) -> str:
    """Per model, precision and thread count, its TOP slowest kernels: ms, share of the kernels'
    total, GFLOP/s executed and their % of that precision's measured peak at that thread count."""
    lines = ["| model | precision | threads | kernel | ms | share | GFLOP/s | % of peak |",
             "|" + " --- |" * 8]
    for s in summaries:
        for p in s.profiles:
            head = f"| {s.name} | {p.precision} | {p.threads} | "
            if p.times is None:
                lines.append(head + f"not compiled: {p.note} | — | — | — | — |")
                continue
            total = sum(t.seconds for t in p.times) or 1.0
            peak = peaks[p.precision].get(p.threads)
            for t in sorted(p.times, key=lambda t: -t.seconds)[:TOP]:
                percent = "—" if peak is None else f"{100 * t.executed_gflops / peak.best:.1f}%"
                kernel = t.kernel.replace("|", "\\|")
                lines.append(head + f"`{kernel}` | {figure(t.seconds * 1e3)} | {100 * t.seconds / total:.1f}% "
                             f"| {t.executed_gflops:.1f} | {percent} |")
    return "\n".join(lines) + "\n"


def describe_peaks(peaks: dict[str, dict[int, Any]]) -> str:
    parts = []
    for precision, by_threads in peaks.items():
        instruction = INSTRUCTION_OF[precision]
        if all(peak is None for peak in by_threads.values()):
            parts.append(f"{precision} ({instruction}): not measured, {missing(instruction)}")
            continue
        parts.append(f"{precision} ({instruction}): " + ", ".join(
            f"{peak.best:.0f} at {n} thread{'s' * (n > 1)} (median trial {peak.median:.0f})"
            for n, peak in by_threads.items()))
    return "; ".join(parts)


def notes(summaries: list[ModelSummary]) -> list[str]:
    """Every engine that did not run, and why: OpenVINO once when it is not installed."""
    plain = [r for s in summaries for r in s.fp32 if r.mode == "none"]
    low_bit = [r for s in summaries for results in s.low_bit.values() for r in results]
    found = [note for note in report.openvino_notes(plain) if not note.startswith(NOT_INSTALLED)]
    found += [note for note in quant_report.missing_notes(low_bit) if NOT_INSTALLED not in note]
    if any(NOT_INSTALLED in r.missing.values() for r in low_bit) or any(
            r.openvino_note == NOT_INSTALLED for r in plain):
        found.insert(0, f"{NOT_INSTALLED}: onnxruntime is the only fp32 and int8 peer, and bf16 has none.")
    return found


def markdown(summaries: list[ModelSummary], peaks: dict[str, dict[int, Any]], machine: dict[str, Any],
             command: str, threads: Sequence[int], loads: Sequence[str], runs: int, warmup: int) -> str:
    """The page: how it was made, on what CPU, then one latency table per load condition, the
    sporadic requests, the cold compiles and the slowest kernels. Its title is a second-level
    heading, so that it sits as one section in BENCHMARKS.md (see place)."""
    versions = quant_report.versions()
    openvino = f"OpenVINO {machine['openvino']}" if machine.get("openvino") else "OpenVINO not installed"
    memory = f", {machine['memory_gib']:.0f} GiB" if machine.get("memory_gib") else ""
    fp32 = [r for s in summaries for r in s.fp32]
    parts = [
        "## hobbit against its peers: fp32, bf16 and int8, quiet and under load; sporadic requests; "
        "cold compile; slowest kernels\n",
        f"Generated by `{command}` on {machine['date']}.\n",
        f"CPU: {machine['cpu']} (/proc/cpuinfo), LLVM host CPU {machine['llvm_cpu']}, "
        f"{machine['vector_bits']}-bit vectors, {machine['cores']} cores{memory}; 1-minute load average "
        f"{machine['load_average']} at the start.\n",
        f"Versions: hobbit {machine['hobbit']}, onnxruntime {versions['onnxruntime']}, {openvino}.\n",
        f"Measured peaks, GFLOP/s (2 per multiply-add; the best of short trials on pinned threads): "
        f"{describe_peaks(peaks)}.\n",
        "Peers as their users run them: onnxruntime (ORT_ENABLE_ALL, sequential, intra_op_num_threads = N), "
        "with its default spinning and with allow_spinning=0; OpenVINO (CPU, one stream, N threads, latency "
        "hint; f32 forced for fp32, INFERENCE_PRECISION_HINT bf16 for bf16, its default for the int8 model). "
        "int8: onnxruntime's quantize_static U8S8 QDQ model (per-channel weights, MinMax, 16 calibration "
        "images), the same file for hobbit, onnxruntime and OpenVINO. Medians in ms at batch 1, "
        f"{runs} timed runs per engine after {warmup} warm-ups, the engines of a model alternating in one "
        f"process. Ratio = hobbit over the best peer of the same precision (below 1: hobbit faster; ✗: above "
        f"issue 29's {TARGET}).\n",
        *(f"- {note}\n" for note in notes(summaries)),
    ]
    for load in table_loads(loads):
        parts.append(f"### Latency, {'quiet' if load == 'none' else load}: {describe_mode(load)}\n\n"
                     + latency_table(summaries, threads, load))
    sporadic_part = report.sporadic_tables(fp32)
    if sporadic_part:
        parts.append(f"### Sporadic requests, fp32\n\n{report.SPORADIC_NOTE}\n\n{sporadic_part}")
    first = summaries[0].cold.threads if summaries and summaries[0].cold else threads[0]
    parts.append(f"### Cold compile, fp32\n\nEach model's first `hobbit.compile(model, threads={first}, "
                 "cache=False)` in a fresh Python process with an empty HOBBIT_CACHE_DIR: the call's wall "
                 "seconds, the compile report's phases (model import, passes with planning and weight packing, "
                 "codegen of the LLVM IR, LLVM's optimisation, the JIT's machine code), what they leave of the "
                 "call (rest), and the seconds of importing hobbit's compiler before it.\n\n" + cold_table(summaries))
    parts.append(f"### Slowest kernels\n\nPer model, precision and thread count, the {TOP} slowest fused kernels "
                 f"(compiled with profile=True, the median of {runs} runs each): ms, share of all kernels' time, "
                 "GFLOP/s of the arithmetic they execute and its % of the measured peak of the precision's "
                 "instruction at that thread count (fp32: FMA; bf16: vdpbf16ps; int8: vpdpbusd, GOP/s). A bf16 "
                 "model's kernels that stay float32 (depthwise, element-wise, F(4x4) Winograd) are set against "
                 "the vdpbf16ps peak too.\n\n" + kernel_table(summaries, peaks))
    return "\n".join(parts)
