"""The reports of `hobbit bench`: what machine the numbers were measured on, the markdown
tables (plain with OpenVINO beside onnxruntime where installed, thread scaling, memory, one per
load condition, the sporadic requests' gaps and Poisson tables), the BENCHMARKS.md page that
explains them, JSON with every number, and a bar chart of the ratios (matplotlib, optional).

They only read BenchResults (hobbit.bench.result); the measuring is hobbit.bench.suite's."""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable
from typing import Any

import hobbit
from hobbit.bench import sporadic
from hobbit.bench.aot import PARITY_ATOL
from hobbit.bench.load import BLOCK, COOLDOWN_S, MODES, BuildOptions, describe_mode, mode_key
from hobbit.bench.openvino import NOT_INSTALLED, SETTINGS as OPENVINO_SETTINGS, openvino_version
from hobbit.bench.ort import NO_SPIN
from hobbit.bench.result import (ATOL, ENGINE_LABELS, RTOL, TOLERANCE, BenchResult, Timing, format_cores,
                                 megabytes)
from hobbit.bench.suite import contention_warning, describe_build
from hobbit.errors import HobbitError
from hobbit.runtime.peak import fma_peak, fma_peak_gflops
from hobbit.target import host_target


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
            "openvino": openvino_version(),
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


def format_ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.1f}"


def format_span(t: Timing) -> str:
    """'median (p10–p90)' in ms, as every table of the benchmark writes a latency."""
    return f"{format_ms(t.median)} ({format_ms(t.p10)}–{format_ms(t.p90)})"


def markdown_table(results: list[BenchResult]) -> str:
    """One row per model and thread count of the plain condition (load none, no streams; empty
    when there is none); rows whose outputs disagree carry no timings. Where OpenVINO was timed,
    its median and hobbit / the best peer (the faster of onnxruntime and OpenVINO) follow the
    onnxruntime ratio, and why it was not timed anywhere it was not follows the table (one line
    when it is not installed). When the exported library was timed, its median and the ratio
    AOT/JIT come next."""
    results = [r for r in results if r.mode == "none"]
    if not results:
        return ""
    aot = any(r.aot is not None for r in results)
    peer = any(r.openvino is not None for r in results)
    header = ("| model | threads | hobbit median (p10–p90) ms | onnxruntime median (p10–p90) ms | ratio "
              + ("| OpenVINO f32 median (p10–p90) ms | hobbit / best peer " if peer else "")
              + ("| AOT library median (p10–p90) ms | AOT/JIT " if aot else "")
              + "| hobbit GFLOP/s executed | % of FMA peak | GFLOP/s, Winograd as direct | compile s |")
    lines = [header, "| --- " * (9 + 2 * aot + 2 * peer) + "|"]
    for r in results:
        if r.mismatch is not None:
            cells = ["—", "—", "outputs disagree"] + ["—", "—"] * (aot + peer) + ["—", "—", "—"]
        else:
            percent = "—" if r.peak_percent is None else f"{r.peak_percent:.0f}%"
            peer_cells = ["—" if r.openvino is None else format_span(r.openvino), f"{r.peer_ratio:.2f}"]
            cells = [format_span(r.hobbit), format_span(r.onnxruntime), f"{r.ratio:.2f}"] + peer_cells * peer \
                + _aot_cells(r, format_span) * aot + [f"{r.executed_gflops:.1f}", percent, f"{r.gflops:.1f}"]
        lines.append(f"| {r.model} | {r.threads} | " + " | ".join(cells) + f" | {r.compile_seconds:.1f} |")
    notes = openvino_notes(results)
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes)


def openvino_notes(results: list[BenchResult]) -> list[str]:
    """Why OpenVINO has no timings where it has none: one line when it is not installed, else
    one per model and thread count (it failed, or its outputs disagree)."""
    noted = [r for r in results if r.openvino is None and r.openvino_note is not None]
    if noted and all(r.openvino_note == NOT_INSTALLED for r in noted):
        return [f"{NOT_INSTALLED}: onnxruntime is the only peer."]
    return [f"{r.model}, {r.threads} thread(s): {r.openvino_note}; not timed." for r in noted]


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
    fresh process, hobbit.bench.memory), in MB: after building (hobbit's compile, onnxruntime's
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
        lines.append(f"| {model} | {threads} | {megabytes(ours.built)} / {megabytes(ours.run)} / {megabytes(ours.peak)} "
                     f"| {megabytes(theirs.built)} / {megabytes(theirs.run)} / {megabytes(theirs.peak)} "
                     f"| {ours.run / theirs.run:.2f} | {ours.peak / theirs.peak:.2f} "
                     f"| {megabytes(ours.base)} / {megabytes(theirs.base)} |")
    return "\n".join(lines) + "\n"


def _median_p90(t: Timing) -> str:
    return f"{format_ms(t.median)} ({format_ms(t.p90)})"


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


def _sporadic_rows(rows: list[BenchResult], statistics: tuple[str, ...], versus: tuple[str, ...]) -> list[str]:
    """Per result, a row per engine: `statistics` (ms), its back-to-back median and its median over
    that, hobbit's `versus` statistics over the engine's (dashes on hobbit's own row), idle cost."""
    lines = []
    for r in rows:
        head = [r.model, str(r.threads), f"{sporadic.condition(r.mode)[1]:g}"]
        if r.mismatch is not None:
            dashes = ["—"] * (len(statistics) + len(versus) + 2)
            lines.append("| " + " | ".join(head + ["—", "outputs disagree"] + dashes) + " |")
            continue
        for engine, timing in r.timings().items():
            base = (r.back_to_back or {}).get(engine)
            slowdown = r.slowdown(engine)
            cells = [ENGINE_LABELS[engine]] + [format_ms(getattr(timing, name)) for name in statistics]
            cells += ["—" if base is None else format_ms(base), "—" if slowdown is None else f"{slowdown:.2f}"]
            cells += ["—" if engine == "hobbit" else f"{getattr(r.hobbit, name) / getattr(timing, name):.2f}"
                      for name in versus]
            cells.append(format_cores((r.idle_cpu or {}).get(engine)))
            lines.append("| " + " | ".join(head + cells) + " |")
        if r.idle_floor is not None:
            lines.append("| " + " | ".join(head + [f"({FLOOR_LABEL})"] + ["—"] * (len(statistics) + len(versus) + 2)
                                            + [format_cores(r.idle_floor)]) + " |")
    return lines


def sporadic_tables(results: list[BenchResult]) -> str:
    """The sporadic requests (hobbit.bench.sporadic): a table for the gaps:MS conditions (median and
    p90 latency after each gap) and one for the poisson:RATE conditions (p50, p90, p99 of completion
    minus arrival). A row per engine: its latency, its back-to-back median from the plain condition of
    the same run and the slowdown over it, hobbit's ratio to it (below 1: hobbit faster) and what the
    idle process burns, in CPU seconds per second of idle. Empty when neither was measured."""
    parts = []
    gaps = [r for r in results if sporadic.is_sporadic(r.mode) and sporadic.condition(r.mode)[0] == sporadic.GAPS]
    poisson = [r for r in results if sporadic.is_sporadic(r.mode) and sporadic.condition(r.mode)[0] == sporadic.POISSON]
    if gaps:
        parts.append(
            "Sporadic requests, **gaps:MS**: each timed run of an engine comes MS ms after that engine's previous "
            "run, the process idle in between (no other engine's work); warm-ups back to back.\n\n"
            "| model | threads | idle gap ms | engine | median ms | p90 ms | back-to-back median ms "
            "| median / back-to-back | hobbit / engine, median | hobbit / engine, p90 | idle CPU s per idle s |\n"
            + "| --- " * 11 + "|\n" + "\n".join(_sporadic_rows(gaps, ("median", "p90"), ("median", "p90")))
            + "\n")
    if poisson:
        requests = "/".join(map(str, sorted({r.runs for r in poisson})))
        parts.append(
            f"Sporadic requests, **poisson:RATE**: {requests} requests per engine arrive at random, RATE per second "
            "on average (exponential inter-arrival times, seeded; the same arrival times for every engine), "
            "served one at a time; latency is completion minus arrival, queueing included.\n\n"
            "| model | threads | requests/s | engine | p50 ms | p90 ms | p99 ms | back-to-back median ms "
            "| p50 / back-to-back | hobbit / engine, p50 | hobbit / engine, p99 | idle CPU s per idle s |\n"
            + "| --- " * 12 + "|\n"
            + "\n".join(_sporadic_rows(poisson, ("median", "p90", "p99"), ("median", "p99"))) + "\n")
    return "\n".join(parts)


def load_tables(results: list[BenchResult]) -> str:
    """One table per load condition and for the streams mode, each under its description: median
    and p90 latency, their ratios, and inferences/s. Each result has two rows: hobbit against
    onnxruntime's default session, whose idle intra-op threads spin, and against one with
    allow_spinning=0 (hobbit.bench.ort.NO_SPIN), both timed in the same rounds. Every ratio is below 1
    when hobbit is faster (latency hobbit/onnxruntime, throughput onnxruntime/hobbit). Empty for a
    plain run (load none, batch 1, no streams), which the first table shows in full. The sporadic
    conditions have tables of their own (sporadic_tables)."""
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
    runs = sorted({r.runs for r in results})
    inputs = sorted({r.inputs for r in results if r.inputs})
    return (
        "# Benchmarks\n\n"
        f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']} against onnxruntime "
        f"{machine['onnxruntime']} (ORT_ENABLE_ALL, sequential, intra_op_num_threads = N)"
        + (f" and OpenVINO {machine['openvino']} ({OPENVINO_SETTINGS}, INFERENCE_PRECISION_HINT f32; in the "
           f"plain condition)" if machine.get("openvino") and any(r.openvino for r in results) else "")
        + ", "
        f"{'/'.join(map(str, runs))} timed runs each after {warmup} warm-ups, the engines alternating in "
        f"blocks of {BLOCK} with a {COOLDOWN_S * 1e3:.0f} ms pause. Outputs are compared first "
        f"({TOLERANCE}); a model whose outputs disagree gets no timings.\n\n"
        f"{describe_machine(machine)} Measured float32 FMA peak, the best of {trials} short trials spread over "
        f"under two seconds, each thread pinned to its own CPU (other work only slows a trial; the median trial shows how busy the "
        f"machine was): {peaks}.\n\n"
        + (f"Target: {built['description']}; the FMA peak and the % of it are this host's.\n\n"
           if (built := machine.get("built_for")) else "")
        + (f"**Warning:** {warning}.\n\n" if warning else "")
        + f"Inputs: seeded N(0, 1) data ({'; '.join(inputs)}); zoo models carry random weights. "
        "Ratio is hobbit's median over onnxruntime's; below 1 means hobbit is faster. GFLOP/s executed is the "
        "arithmetic of hobbit's compiled graph (2 per multiply-add in convolutions and matrix products, a "
        "Winograd conv's tile GEMMs and transforms as computed, 1 per element elsewhere) over its median "
        "latency, and % of FMA peak is of that; \"Winograd as direct\" counts each Winograd conv as the direct "
        "conv it replaces, which compares across conv algorithms and can pass the peak."
        + (" OpenVINO's outputs are checked against onnxruntime's like hobbit's; hobbit / best peer is hobbit's "
           "median over the faster of onnxruntime and OpenVINO." if any(r.openvino for r in results) else "")
        + "\n\n"
        + (f"Load tables: streams is the number of inferences in flight at once; inferences/s count batch items "
           f"over the wall time of the timed rounds (with one stream: batch / mean latency); every ratio is below 1 "
           f"when hobbit is faster (latency hobbit/onnxruntime, throughput onnxruntime/hobbit). Each model has two "
           f"rows: onnxruntime's default session, whose idle intra-op threads spin, and one with "
           f"`{NOT_SPINNING}` (what a user on a shared machine sets), timed in the same rounds as hobbit; "
           "the hobbit cells of the two rows are the same measurement.\n\n"
           if (loaded := load_tables(results)) else "")
        + (aot_note(results) or "")
        + (f"Sporadic requests: {SPORADIC_NOTE}\n\n" if (sporadic_part := sporadic_tables(results)) else "")
        + ("Memory: resident set size (VmRSS, and VmHWM for the peak) of each engine in a fresh process of its "
           "own that imports only that engine and numpy, reads the model file, builds it (hobbit: a cold "
           "compile; onnxruntime: a session with the same options) and runs it once; MB = 10^6 bytes.\n\n"
           if (memory := memory_table(results)) else "")
        + "\n".join(part for part in (markdown_table(results), scaling_table(results), memory, loaded, sporadic_part)
                    if part))


FLOOR_LABEL = "no engine: the sleeps alone"
SPORADIC_NOTE = (
    "each engine (hobbit, onnxruntime's default session and one with allow_spinning=0) is timed after idle "
    f"gaps in its own turns: a pause of at least the gap and of {sporadic.SETTLE_S * 1e3:.0f} ms, one untimed "
    "run, then its timed runs, each right after a sleep of the gap (gaps:MS) or at the arrival times of one "
    "seeded Poisson sequence, the same for every engine, served one at a time in chunks of "
    f"{sporadic.POISSON_CHUNK} requests (poisson:RATE). Back-to-back is the same engine's median in the plain "
    "condition of this run. Idle CPU is the process's CPU time during the sleeps (every thread, "
    "CLOCK_PROCESS_CPUTIME_ID) over their wall time: 1.000 is one core kept busy by the idle process; the row "
    f"\"({FLOOR_LABEL})\" is the same gaps around an engine that does nothing, the floor that every engine's "
    "figure includes.")


def describe_machine(machine: dict[str, Any]) -> str:
    """'Machine: CPU (LLVM CPU, vector width), cores, memory, load average at the start.' (machine_info)"""
    memory = f", {machine['memory_gib']:.0f} GiB" if machine.get("memory_gib") else ""
    return (f"Machine: {machine['cpu']} (LLVM CPU {machine['llvm_cpu']}, {machine['vector_bits']}-bit vectors), "
            f"{machine['cores']} cores{memory}, 1-minute load average {machine['load_average']} at the start.")


def aot_note(results: list[BenchResult]) -> str | None:
    """How the exported library was timed and what its column includes, or None when it was not."""
    calls = [r.ctypes_call_us for r in results if r.ctypes_call_us is not None]
    if not calls:
        return None
    return ("AOT library: for each model and thread count the compiled model is exported (`m.export`) into a "
            "temporary folder and loaded back with `hobbit.load`; its outputs must equal the JIT's (max abs diff "
            f"at most {PARITY_ATOL:g}, else the benchmark stops), and it is timed in the same rounds as "
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
                        "aot_parity_atol": PARITY_ATOL, "sporadic_settle_s": sporadic.SETTLE_S,
                        "poisson_chunk": sporadic.POISSON_CHUNK, "poisson_min_requests": sporadic.POISSON_MIN_REQUESTS},
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
    series = sorted({(mode_key(r.mode), r.mode, r.threads) for r in results})
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(models) + 2), 4.5))
    for i, (_, mode, n) in enumerate(series):
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
