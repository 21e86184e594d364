"""`hobbit bench --precision int8|bf16` (hobbit.bench.quant): the accuracy metrics against values
worked out by hand, the ratios and target marks of the speed table, and one end-to-end run per
precision on squeezenet1_1 with very few runs (no timing thresholds: only that every column is
there and the accuracy numbers are finite and plausible)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from hobbit import zoo
from hobbit.bench import quant
from hobbit.bench.quant import (BF16, ENGINES, FP32, INT8_ORT_MODEL, INT8_OWN_MODEL, ORT_FP32, ORT_INT8, OV_BF16,
                                OV_INT8, Accuracy, QuantBenchResult)
from hobbit.bench.quant_report import speed_table
from hobbit.bench.result import Timing
from hobbit.cli.main import main


def openvino_installed() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def test_accuracy_metrics_match_hand_computed_values():
    rng = np.random.default_rng(0)
    reference = rng.permutation(np.arange(20.0))[None].repeat(5, axis=0) + rng.random((5, 20)) * 0.1
    order = np.argsort(-reference, axis=1)
    norms = np.linalg.norm(reference, axis=1)
    got = reference.copy()
    got[0] *= 1.1                       # same ranking, error 0.1
    got[1] *= 0.7                       # same ranking, error 0.3
    for image, rank in ((2, 2), (3, 7)):  # the top class swapped with the one ranked 3rd / 8th
        top, other = order[image, 0], order[image, rank]
        got[image, [top, other]] = reference[image, [other, top]]
    # image 4: unchanged, error 0
    swapped = [math.sqrt(2) * (reference[i, order[i, 0]] - reference[i, order[i, r]]) / norms[i]
               for i, r in ((2, 2), (3, 7))]
    errors = sorted([0.1, 0.3, *swapped, 0.0])
    acc = Accuracy.of(got.astype(np.float32), reference.astype(np.float32))
    assert acc.rel_l2_median == pytest.approx(errors[2], rel=1e-5)
    assert acc.rel_l2_max == pytest.approx(errors[-1], rel=1e-5)
    assert acc.top1 == pytest.approx(3 / 5)  # images 2 and 3 lost their top class
    assert acc.top5 == pytest.approx(4 / 5)  # image 2's is 3rd, image 3's is 8th
    assert acc.images == 5


def _result(precision: str, medians: dict[str, float]) -> QuantBenchResult:
    timings = {name: Timing(ms, ms * 0.9, ms * 1.1) for name, ms in medians.items()}
    missing = {name: "not here" for name in ENGINES[precision] if name not in medians}
    return QuantBenchResult("m", precision, 1, 3, 0.0, 1, None, timings=timings, missing=missing,
                            build_seconds={name: 0.0 for name in medians})


def test_speed_table_ratios_pick_the_faster_peer_and_mark_missed_targets():
    result = _result("int8", {FP32: 10.0, INT8_ORT_MODEL: 3.0, ORT_FP32: 12.0, ORT_INT8: 4.0, OV_INT8: 2.5})
    assert result.best_peer() == OV_INT8
    row = speed_table([result]).splitlines()[2].split(" | ")
    # int8 / fp32 = 0.30 (target 0.35: met); int8 / faster peer = 3.0 / 2.5 = 1.20 (target 1.0: missed)
    assert row[-3:] == ["0.30", "1.20 ✗", "OpenVINO int8 |"]
    bf16 = _result("bf16", {FP32: 10.0, BF16: 7.0, ORT_FP32: 11.0, OV_BF16: 8.0})
    assert speed_table([bf16]).splitlines()[2].split(" | ")[-3:] == ["0.70 ✗", "0.88", "OpenVINO bf16 |"]


def _tables(markdown: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The markdown's tables by their second column's heading: (header cells, row cells)."""
    tables, current = {}, None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if current is None:
            current = cells[1]
            tables[current] = (cells, [])
        elif not all(c == "---" for c in cells):
            tables[current][1].append(cells)
    return tables


TIMING = re.compile(r"^[0-9.]+ \([0-9.]+–[0-9.]+\)$")


@pytest.fixture(scope="module")
def int8_markdown(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-quant") / "int8.md"
    code = main(["bench", "--precision", "int8", "--model", "squeezenet1_1", "--runs", "2", "--warmup", "1",
                 "--markdown", str(path)])
    return code, path.read_text()


def test_int8_bench_reports_every_engine_ratio_and_accuracy(int8_markdown):
    code, markdown = int8_markdown
    assert code == 0
    assert "hobbit bench --precision int8 --model squeezenet1_1" in markdown
    header, rows = _tables(markdown)["threads"]
    for engine in ENGINES["int8"]:  # a column, or a note saying why it did not run
        assert f"{engine} ms" in header or f"- {engine}: " in markdown, engine
    if not openvino_installed():
        assert "- OpenVINO int8: OpenVINO not installed" in markdown
    for column in (f"{INT8_ORT_MODEL} / hobbit fp32 (≤ 0.35)", f"{INT8_ORT_MODEL} / best peer int8 (≤ 1.0)"):
        assert column in header
    [row] = rows
    assert len(row) == len(header) and row[:2] == ["squeezenet1_1", "1"]
    for name, cell in zip(header, row):
        if name.endswith(" ms"):
            assert TIMING.match(cell), (name, cell)
        elif "/" in name:
            assert float(cell.split()[0]) > 0, (name, cell)

    accuracy_header, accuracy = _tables(markdown)["engine"]
    by_engine = {cells[1]: dict(zip(accuracy_header, cells)) for cells in accuracy}
    assert {ORT_FP32, INT8_ORT_MODEL, ORT_INT8} <= set(by_engine)
    for engine, cells in by_engine.items():
        median, worst = float(cells["logit rel L2 median"]), float(cells["logit rel L2 max"])
        assert math.isfinite(median) and math.isfinite(worst) and 0 <= median <= worst, engine
        assert 0 <= float(cells["top-1 agreement"].rstrip("%")) <= 100
    # The reference check: two fp32 engines agree to float32 rounding, summed over ~1000 logits.
    assert float(by_engine[ORT_FP32]["logit rel L2 max"]) < 1e-5
    # int8 on random-weight squeezenet: onnxruntime's own error, measured 0.02; one quantization
    # step is far above fp32 rounding, and a broken pipeline (wrong scales) gives errors near 1.
    for engine in (INT8_ORT_MODEL, ORT_INT8, *([INT8_OWN_MODEL] if INT8_OWN_MODEL in by_engine else [])):
        assert 1e-3 < float(by_engine[engine]["logit rel L2 median"]) < 0.1, engine
    if quant.hobbit_quantize() is not None:  # hobbit on its own quantization, beside ORT's model
        assert INT8_OWN_MODEL in by_engine and f"{INT8_OWN_MODEL} ms" in header


def test_bf16_bench_reports_fp32_and_bf16_engines():
    [result] = quant.bench_model("squeezenet1_1", zoo.build("squeezenet1_1"), "bf16", [1], runs=2, warmup=0,
                                       evaluation_count=4)
    assert result.mismatch is None and result.reference_images == 4
    assert set(result.timings) | set(result.missing) == set(ENGINES["bf16"])
    assert {FP32, ORT_FP32} <= set(result.timings)
    if not openvino_installed():
        assert result.missing[OV_BF16].startswith("OpenVINO not installed")
    for engine in (BF16, OV_BF16):
        if engine in result.accuracy:
            # bf16 keeps 8 significant bits (relative rounding 2^-9 per value); through ~26 layers
            # with fp32 accumulation the logits drift by about 1% (OpenVINO measured 0.8%).
            assert 1e-4 < result.accuracy[engine].rel_l2_median < 0.05, engine
    table = speed_table([result])
    assert "hobbit fp32 ms" in table and "onnxruntime fp32 ms" in table


@pytest.mark.parametrize("flags, named", [(["--load", "busy-core"], "--load"), (["--aot"], "--aot"),
                                          (["--model", "squeezenet1_1,no_such_model"], "no_such_model")])
def test_precision_refuses_what_it_does_not_take(flags, named, capsys):
    assert main(["bench", "--precision", "int8", *flags]) == 2
    assert named in capsys.readouterr().err


def test_precision_is_one_of_int8_and_bf16(capsys):
    assert main(["bench", "--precision", "int4"]) == 2
    assert "invalid choice: 'int4'" in capsys.readouterr().err
