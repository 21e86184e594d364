"""The GPU benchmark's rows as a markdown table and as JSON (hobbit.bench.gpu's output, and
what scripts/gpu_check.sh gathers into its one report).

As in the CPU benchmark's tables (hobbit.bench.report), an engine whose outputs disagree with
the reference gets no timing: its cell says "outputs disagree" and its ratio is "—", so no
speed is ever quoted for a wrong answer."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

DISAGREE = "outputs disagree"


def stat(times: list[float]) -> str:
    if not times:
        return "—"
    p10, p50, p90 = np.percentile(times, [10, 50, 90])
    return f"{p50:.3f} ({p10:.3f}–{p90:.3f})"


def _cell(times: list[float], ok: bool | None) -> str:
    return DISAGREE if ok is False else stat(times)


def _ratio(mine: list[float], theirs: list[float]) -> str:
    return f"{np.median(mine) / np.median(theirs):.2f}" if mine and theirs else "—"


def _yes(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "**NO**")


def markdown(rows: list[Any]) -> str:
    """One line per model, batch and precision: hobbit, PyTorch eager and PyTorch's CUDA-graph
    replay (medians, p10–p90 ms), hobbit's ratio to each, errors against hobbit's CPU outputs."""
    lines = ["| model | batch | precision | hobbit GPU median (p10–p90) ms | PyTorch eager ms "
             "| PyTorch CUDA graph ms | hobbit/eager | hobbit/graph | hobbit images/s | max abs err vs hobbit CPU (hobbit / eager / graph) "
             "| within tolerance (hobbit / eager / graph) | kernels | runs | compile s | note |",
             "| " + " | ".join(["---"] * 15) + " |"]
    for r in rows:
        rate = f"{r.batch / np.median(r.hobbit_ms) * 1e3:.0f}" if r.hobbit_ms else "—"
        errors = " / ".join("—" if e is None else f"{e:.1e}" for e in (r.error, r.torch_error, r.graph_error))
        oks = " / ".join(_yes(o) for o in (r.ok, r.torch_ok, r.graph_ok))
        runs = " / ".join(str(len(t)) for t in (r.hobbit_ms, r.torch_ms, r.graph_ms))
        compile_s = f"{r.compile_s:.1f}" if r.compile_s else "—"
        note = "; ".join(n for n in (r.note, r.torch_note) if n).replace("|", "\\|")
        lines.append(f"| {r.model} | {r.batch} | {r.precision} | {_cell(r.hobbit_ms, r.ok)} | "
                     f"{_cell(r.torch_ms, r.torch_ok)} | {_cell(r.graph_ms, r.graph_ok)} | "
                     f"{_ratio(r.hobbit_ms, r.torch_ms)} | {_ratio(r.hobbit_ms, r.graph_ms)} | {rate} | {errors} | "
                     f"{oks} | {r.kernels or '—'} | {runs} | {compile_s} | {note} |")
    return "\n".join(lines)


def _median(times: list[float]) -> float | None:
    return float(np.median(times)) if times else None


def row_json(row: Any) -> dict[str, Any]:
    """A Row as plain JSON: its fields (times in ms) plus each engine's median and the ratios."""
    out = asdict(row)
    for engine in ("hobbit", "torch", "graph"):
        out[f"{engine}_median_ms"] = _median(getattr(row, f"{engine}_ms"))
    h, t, g = out["hobbit_median_ms"], out["torch_median_ms"], out["graph_median_ms"]
    out["hobbit_over_eager"] = h / t if h and t else None
    out["hobbit_over_graph"] = h / g if h and g else None
    return out


def bench_json(rows: list[Any], header: str, status: str) -> dict[str, Any]:
    """The whole run: `header` (machine, software, tolerance), `status` ("ran", or why not)."""
    return {"header": header, "status": status, "rows": [row_json(r) for r in rows]}
