"""The reports of `hobbit bench --precision int8|bf16`: the speed table (every engine's
latency, hobbit's low-bit engines' ratios to hobbit fp32 and to the faster peer, each
against issue 15's target), the accuracy table against hobbit fp32's logits, the engines
that did not run and why, and the markdown page (BENCHMARKS.md) that says how they were made.

They only read QuantBenchResults; the measuring is hobbit.bench.quant's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hobbit.bench.load import BLOCK, COOLDOWN_S
from hobbit.bench.quant import (BF16_VS_FP32, BF16_VS_PEER, CALIBRATION_COUNT, ENGINES, EVALUATION_COUNT, FP32,
                                INT8_VS_FP32, INT8_VS_PEER, INT8_VS_PEER_AIM, ORT_INT8, OV_BF16, REFERENCE_REL_L2,
                                RUNS_ON, QuantBenchResult, format_error, low_bit_engines)
from hobbit.bench.result import Timing


def _ms(t: Timing) -> str:
    def v(x: float) -> str:
        return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.1f}"
    return f"{v(t.median)} ({v(t.p10)}–{v(t.p90)})"


def ratio_cell(value: float | None, target: float, digits: int = 2) -> str:
    """A ratio as the tables write it, marked ✗ above its target; — where there is none. The mark
    judges the figure as printed: 0.8003 prints as 0.80, and "0.80 ✗" beside a 0.8 target would
    contradict itself (CI failed on exactly that cell)."""
    if value is None:
        return "—"
    shown = round(value, digits)
    return f"{shown:.{digits}f}" + ("" if shown <= target else " ✗")


def _present(results: list[QuantBenchResult], engines: Sequence[str]) -> list[str]:
    """The engines that ran on some model (an engine missing everywhere becomes a note)."""
    return [e for e in engines if any(e in r.timings for r in results)]


def speed_table(results: list[QuantBenchResult]) -> str:
    """One row per model and thread count: every engine's median (p10–p90) ms, then for each
    of hobbit's low-bit engines its ratio to hobbit fp32 and to the faster peer (✗: misses
    the target)."""
    precision = results[0].precision
    engines = _present(results, ENGINES[precision])
    ours = [e for e in low_bit_engines(precision) if e in engines]
    fp32_target, peer_target = (INT8_VS_FP32, INT8_VS_PEER) if precision == "int8" else (BF16_VS_FP32, BF16_VS_PEER)
    ratio_heads = [h for e in ours for h in (f"{e} / hobbit fp32 (≤ {fp32_target})",
                                             f"{e} / best peer {precision} (≤ {peer_target})")]
    heads = ["model", "threads", *(f"{e} ms" for e in engines), *ratio_heads, "best peer"]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for r in results:
        if r.mismatch is not None:
            cells = ["reference disagrees"] + ["—"] * (len(heads) - 3)
        else:
            cells = [_ms(r.timings[e]) if e in r.timings else "—" for e in engines]
            for e in ours:
                cells += [ratio_cell(r.ratio(e, FP32), fp32_target), ratio_cell(r.peer_ratio(e), peer_target)]
            cells.append(r.best_peer() or "—")
        lines.append(f"| {r.model} | {r.threads} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def accuracy_table(results: list[QuantBenchResult]) -> str:
    """One row per model and engine, against hobbit fp32 on the evaluation images; for
    hobbit's low-bit engines, their median error over the peer's (≤ 1: no worse): onnxruntime
    int8's (issue 15's accuracy target), OpenVINO bf16's."""
    precision = results[0].precision
    judge = ORT_INT8 if precision == "int8" else OV_BF16
    rows = [r for r in results if r.accuracy is not None or r.mismatch is not None]
    lines = ["| model | engine | runs on | logit rel L2 median | logit rel L2 max | top-1 agreement "
             f"| top-5 agreement | median error / {judge}'s (≤ 1) |",
             "|" + " --- |" * 8]
    for r in rows:
        if r.mismatch is not None:
            lines.append(f"| {r.model} | {FP32} | fp32 | reference disagrees with onnxruntime fp32: {r.mismatch} "
                         "| | | | |")
            continue
        peer = r.accuracy.get(judge)
        for name, acc in r.accuracy.items():
            versus = "—"
            if name in low_bit_engines(precision) and peer is not None and peer.rel_l2_median > 0:
                # three digits: hobbit's int8 error sits within a percent of onnxruntime's
                versus = ratio_cell(acc.rel_l2_median / peer.rel_l2_median, 1.0, digits=3)
            lines.append(f"| {r.model} | {name} | {RUNS_ON[name]} | {format_error(acc.rel_l2_median)} "
                         f"| {format_error(acc.rel_l2_max)} "
                         f"| {acc.top1:.1%} | {acc.top5:.1%} | {versus} |")
    return "\n".join(lines) + "\n"


def missing_notes(results: list[QuantBenchResult]) -> list[str]:
    """One line per engine that did not run, with each distinct reason and the models it applies to."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in results:
        for engine, why in r.missing.items():
            models = reasons.setdefault((engine, why), [])
            if r.model not in models:
                models.append(r.model)
    return [f"{engine}: {why} ({', '.join(models)})" for (engine, why), models in reasons.items()]


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for module in ("onnxruntime", "openvino"):
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            found[module] = None
    return found


def markdown_report(results: list[QuantBenchResult], machine: dict[str, Any], command: str, warmup: int = 3,
                    calibration_count: int = CALIBRATION_COUNT, evaluation_count: int = EVALUATION_COUNT) -> str:
    """The speed and accuracy tables under a header saying how they were made, ready to paste
    into BENCHMARKS.md."""
    precision = results[0].precision
    found = versions()
    runs = "/".join(map(str, sorted({r.runs for r in results})))
    memory = f", {machine['memory_gib']:.0f} GiB" if machine.get("memory_gib") else ""
    how = ("onnxruntime's QDQ model: quant_pre_process, then quantize_static (QDQ, uint8 activations, int8 "
           "per-channel weights, MinMax) on the calibration set; hobbit runs that model, and its own "
           "hobbit.quantize(model, method=\"minmax\", per_channel=True) of the fp32 model on the same set where "
           "available. OpenVINO int8 runs ORT's QDQ model with its default precision for the float parts "
           "(bf16 on a CPU with AVX512-BF16)."
           if precision == "int8" else
           "hobbit bf16: hobbit.compile(model, precision=\"bf16\"); OpenVINO bf16: INFERENCE_PRECISION_HINT bf16, "
           "OpenVINO fp32: f32.")
    notes = missing_notes(results)
    return (
        f"## {precision}: accuracy and speed against the fp32 model\n\n"
        f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']}, onnxruntime "
        f"{found['onnxruntime']} (ORT_ENABLE_ALL, sequential, intra_op_num_threads = N), "
        + (f"OpenVINO {found['openvino']} (CPU, one stream, INFERENCE_NUM_THREADS = N, latency hint)"
           if found["openvino"] else "OpenVINO not installed")
        + f". Machine: {machine['cpu']} (LLVM CPU {machine['llvm_cpu']}, {machine['vector_bits']}-bit vectors), "
        f"{machine['cores']} cores{memory}, 1-minute load average {machine['load_average']} at the start.\n\n"
        f"Images: seeded 1/f^alpha noise (alpha 1–2, channels correlated, ImageNet mean/std, clipped, "
        f"normalised; hobbit.zoo.images), {calibration_count} for calibration and a separate {evaluation_count} "
        f"for evaluation; zoo models carry random weights. {how}\n\n"
        f"Speed: all engines of a model timed in one process, {runs} timed runs each after {warmup} warm-ups, "
        f"alternating in blocks of {BLOCK} with a {COOLDOWN_S * 1e3:.0f} ms pause, on the first evaluation image; "
        f"median (p10–p90) ms. Ratios are of medians, below 1 means hobbit is faster; ✗ marks a ratio past its "
        f"target (int8: ≤ {INT8_VS_FP32} of hobbit fp32, ≤ {INT8_VS_PEER} of the faster peer int8, aim "
        f"{INT8_VS_PEER_AIM}; bf16: ≤ {BF16_VS_FP32} of hobbit fp32, ≤ {BF16_VS_PEER} of OpenVINO bf16).\n\n"
        f"Accuracy: against hobbit fp32's logits, which first match onnxruntime fp32's (relative L2 at most "
        f"{REFERENCE_REL_L2:g}) on every evaluation image; logit relative L2 error ||y − y_fp32|| / ||y_fp32|| "
        f"per image (median, max), "
        f"top-1 agreement (same top class as fp32) and top-5 agreement (fp32's top class among the top five).\n\n"
        + "".join(f"- {note}\n" for note in notes) + ("\n" if notes else "")
        + speed_table(results) + "\n" + accuracy_table(results))
