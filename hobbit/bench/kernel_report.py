"""The reports of `hobbit bench --kernels` (hobbit.bench.kernels): a line per measured row while
it runs, markdown tables (GFLOP/s and % of the measured peak per configuration; hobbit's compile
seconds), the page around them naming the machine and DeepBench's commit, JSON with every number,
and a plot of GFLOP/s per shape, one panel per kind and thread count. They only read KernelRows."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from hobbit.bench import deepbench_shapes
from hobbit.bench.kernel_timing import MIN_RUNS
from hobbit.bench.kernels import (CAP_FACTOR, CONFIG_NAMES, INT8_ASKED, MAX_WEIGHT_BYTES, MISMATCH, NOT_RUN, OK,
                                  SKIPPED, TABLES, Cell, KernelRow, Peaks)
from hobbit.bench.report import describe_machine, pyplot
from hobbit.bench.result import TOLERANCE

# A cell whose p10-p90 range of GFLOP/s spans more than this share of its median shows it
# ("±N%"): the run was noisy there (other work on the machine, a clock change).
NOISY = 0.10
STATUS_TEXT = {MISMATCH: "outputs disagree", NOT_RUN: "—"}


def format_cell(cell: Cell) -> str:
    """'73.0 (73%)' GFLOP/s at the median and % of the peak, '±N%' after it where the run was
    noisy; the status where it was not timed."""
    if cell.status != OK:
        return STATUS_TEXT.get(cell.status, cell.status)
    text = f"{cell.gflops:.1f}" + ("" if cell.peak_percent is None else f" ({cell.peak_percent:.0f}%)")
    low, high = cell.gflops_p10_p90
    spread = (high - low) / cell.gflops
    return text + (f" ±{50 * spread:.0f}%" if spread > NOISY else "")


def format_row(row: KernelRow) -> str:
    """One line per measured row, printed as the benchmark goes."""
    cells = ", ".join(f"{name} {format_cell(cell)}" for name, cell in row.cells.items()
                      if cell.status not in (NOT_RUN, SKIPPED))
    return (f"{row.kind} {row.set} #{row.index} {row.shape} ({row.flops / 1e9:.3g} GFLOP), {row.threads} "
            f"thread{'s' * (row.threads > 1)}: {cells}")


def _groups(rows: list[KernelRow]) -> dict[tuple[str, str, int], list[KernelRow]]:
    """Rows by (kind, set, threads), in the order they come."""
    groups: dict[tuple[str, str, int], list[KernelRow]] = {}
    for row in rows:
        groups.setdefault((row.kind, row.set, row.threads), []).append(row)
    return groups


def _columns(rows: list[KernelRow]) -> list[str]:
    """The configurations that ran or were tried on some row: a column that is "n/a" or "not run"
    throughout says nothing a note does not (notes)."""
    names = dict.fromkeys(name for row in rows for name, cell in row.cells.items()
                          if cell.status not in (NOT_RUN, SKIPPED))
    return list(names)


def speed_table(rows: list[KernelRow]) -> str:
    """A table per kind, set and thread count: a row per shape (DeepBench's row index, the shape,
    its GFLOP), a column per configuration; then the notes of cells that were not timed."""
    parts = []
    for (kind, set_name, threads), group in _groups(rows).items():
        columns = _columns(group)
        total = len(TABLES[kind][set_name])
        lines = [f"**{kind.upper()}, {set_name} set, {threads} thread{'s' * (threads > 1)}** "
                 f"({len(group)} of DeepBench's {total} shapes): GFLOP/s (GOP/s for int8) at the median, "
                 f"(% of the measured peak)\n",
                 "| # | shape | GFLOP | " + " | ".join(columns) + " |",
                 "| --- " * (3 + len(columns)) + "|"]
        for row in group:
            cells = [format_cell(row.cells[name]) if name in row.cells else "—" for name in columns]
            lines.append(f"| {row.index} | {row.shape} | {row.flops / 1e9:.3g} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines) + "\n" + "".join(f"\n{note}" for note in notes(group)))
    return "\n\n".join(parts) + "\n"


def notes(rows: list[KernelRow]) -> list[str]:
    """Why cells have no timing: one line per configuration and reason, with the rows it applies to
    (a reason that names a shape's own numbers stays per row)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for row in rows:
        for name, cell in row.cells.items():
            if cell.status not in (OK, NOT_RUN):
                key = (name, STATUS_TEXT.get(cell.status, cell.status), cell.note)
                found.setdefault(key, []).append(f"#{row.index}")
    return [f"- {name}, {status}" + (f": {note}" if note else "")
            + (" (every row)" if len(where) == len(rows) > 1 else f" ({', '.join(where)})")
            for (name, status, note), where in found.items()]


def compile_table(rows: list[KernelRow]) -> str:
    """hobbit's compile seconds (the compile cache off) per shape, configuration and thread count;
    empty when no hobbit configuration compiled."""
    columns = [name for name in _columns(rows) if CONFIG_NAMES[name].engine == "hobbit"]
    compiled = [row for row in rows if any(row.cells[n].build_seconds is not None for n in columns if n in row.cells)]
    if not compiled:
        return ""
    lines = ["hobbit's compile seconds (compile cache off):\n",
             "| kind | # | shape | threads | " + " | ".join(columns) + " |", "| --- " * (4 + len(columns)) + "|"]
    for row in compiled:
        cells = ["—" if name not in row.cells or row.cells[name].build_seconds is None
                 else f"{row.cells[name].build_seconds:.2f}" for name in columns]
        lines.append(f"| {row.kind} | {row.index} | {row.shape} | {row.threads} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def loops_table(rows: list[KernelRow]) -> str:
    """What LLVM and Polly made of each hobbit configuration's kernel (hobbit.bench.loop_facts:
    Polly's loop counters, the widest vector, packed operands), at the first thread count run;
    empty when no hobbit configuration compiled."""
    columns = [name for name in _columns(rows) if CONFIG_NAMES[name].engine == "hobbit"]
    first = min((row.threads for row in rows), default=1)
    built = [row for row in rows if row.threads == first
             and any(n in row.cells and row.cells[n].loops is not None for n in columns)]
    if not built:
        return ""
    lines = [f"What the loops became ({first} thread{'s' * (first > 1)}; from the optimised IR of the kernel: "
             f"the loop counters Polly generated, the widest vector arithmetic, operands packed by Polly):\n",
             "| kind | # | shape | " + " | ".join(columns) + " |", "| --- " * (3 + len(columns)) + "|"]
    for row in built:
        cells = ["—" if name not in row.cells or row.cells[name].loops is None
                 else row.cells[name].loops.describe() for name in columns]
        lines.append(f"| {row.kind} | {row.index} | {row.shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def describe_peaks(peaks: dict[int, Peaks]) -> str:
    """The measured peaks the % columns divide by, one clause per thread count."""
    parts = []
    for threads, peak in peaks.items():
        int8 = f"int8 {peak.int8:.0f} GOP/s" if peak.int8 is not None else f"no int8 peak ({peak.int8_note})"
        parts.append(f"{threads} thread{'s' * (threads > 1)}: float32 FMA {peak.fp32:.0f} GFLOP/s, {int8}")
    return "; ".join(parts)


def markdown_report(rows: list[KernelRow], peaks: dict[int, Peaks], machine: dict[str, Any], command: str,
                    runs: int, warmup: int, budget_s: float) -> str:
    """The page: how the numbers were made and on what, then the tables."""
    asked = ", ".join(f"{kind} {set_name}" for kind, set_name in sorted(INT8_ASKED))
    compiled, loops = compile_table(rows), loops_table(rows)
    return (
        f"# DeepBench kernels\n\n"
        f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']}, onnxruntime "
        f"{machine['onnxruntime']}; the shapes are Baidu DeepBench's inference sets ({deepbench_shapes.SOURCE} at "
        f"commit {deepbench_shapes.COMMIT}), each as a one-op ONNX model with random constant weights "
        f"(hobbit.bench.kernel_models says what each means: a GEMM is Y[n, m] = X[n, k] W[k, m], DeepBench's "
        f"column-major layout read row-major; an RNN computes its input projection, which DeepBench's cuDNN run "
        f"skips, and its flops count it).\n\n"
        f"{describe_machine(machine)} Measured peaks (best of short trials on pinned threads): "
        f"{describe_peaks(peaks)}.\n\n"
        f"Columns: **hobbit** is hobbit.compile's own schedules; **naive** the same op as a plain loop nest "
        f"(schedule=\"naive\") through LLVM's O3; **naive+polly** and **naive+polly-early** that nest through "
        f"opt-22 -O3 -polly, Polly at its default place (before the loop vectoriser) and at the start of the "
        f"pipeline (compile's loops=\"polly\" and \"polly-early\"); **numpy** "
        f"np.matmul in float32 on its BLAS with the row's thread count (threadpoolctl); **onnxruntime** a "
        f"session with intra_op_num_threads = threads, inter 1, ORT_ENABLE_ALL; the **int8** columns the "
        f"int8 x int8 -> int32 model (MatMulInteger, ConvInteger), only where DeepBench runs int8 ({asked}); "
        f"onnxruntime runs it on its int8 x int8 kernels (its faster uint8 x int8 path saturates pair sums on "
        f"AVX2 and gave wrong products on full-range data). "
        f"Outputs are checked against onnxruntime's first ({TOLERANCE}; int8 exactly): a configuration whose "
        f"outputs disagree has no timing. The configurations of a shape are timed in alternating rounds of up "
        f"to {runs} runs after up to {warmup} warm-ups (the first one checked), each stopping once its runs add "
        f"up to {budget_s:g} s and it has at least {min(MIN_RUNS, runs)}; a configuration whose single run "
        f"takes, or is expected to take from its rate on a smaller shape or at another thread count, over "
        f"{CAP_FACTOR * budget_s:g} s is "
        f"\"over budget\" and not timed. Shapes whose weights pass {MAX_WEIGHT_BYTES / 2**30:.0f} GiB are not "
        f"built. GFLOP/s is 2 per multiply-add over the median time; \"±N%\" marks a p10-p90 spread over "
        f"{NOISY:.0%} of the median (all in the JSON).\n\n"
        + speed_table(rows) + ("\n" + compiled if compiled else "") + ("\n" + loops if loops else ""))


def write_json(rows: list[KernelRow], peaks: dict[int, Peaks], machine: dict[str, Any], command: str,
               settings: dict[str, Any], path: str | os.PathLike) -> None:
    """Every number: the machine, the settings, the peaks, and every cell of every row."""
    doc = {"command": command, "machine": machine, "deepbench": {"source": deepbench_shapes.SOURCE,
                                                                 "commit": deepbench_shapes.COMMIT},
           "settings": settings, "peaks": {str(n): asdict(p) for n, p in peaks.items()},
           "rows": [asdict(row) for row in rows]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def plot(rows: list[KernelRow], peaks: dict[int, Peaks], path: str | os.PathLike) -> None:
    """GFLOP/s per shape (log scale), a marker per configuration, one panel per kind, set and
    thread count, the float32 FMA peak as a dashed line; cells without a timing are left out."""
    plt = pyplot()
    groups = _groups(rows)
    fig, axes = plt.subplots(len(groups), 1, figsize=(12, 3.6 * len(groups)), squeeze=False)
    markers = "osD^v<>ph*"
    for ax, ((kind, set_name, threads), group) in zip(axes[:, 0], groups.items()):
        for i, name in enumerate(_columns(group)):
            points = [(x, row.cells[name].gflops) for x, row in enumerate(group)
                      if name in row.cells and row.cells[name].status == OK]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, markers[i % len(markers)], color=f"C{i}", label=name, alpha=0.85)
        ax.axhline(peaks[threads].fp32, color="black", linestyle="--", linewidth=0.8, label="FMA peak")
        ax.set_yscale("log")
        ax.set_xlim(-0.5, len(group) - 0.5)
        ax.set_xticks(range(len(group)), [f"#{row.index}\n{row.shape}" for row in group], rotation=60,
                      ha="right", fontsize=6)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"DeepBench {kind} {set_name}, {threads} thread{'s' * (threads > 1)}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
