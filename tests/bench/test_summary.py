"""`hobbit bench --summary FILE` (hobbit.bench.summary): one run on a tiny CNN with very few runs
writes every section of the page; the ratios equal hobbit / peer of the figures beside them; the
header names the CPU; a missing OpenVINO is a line, not a crash (no timing thresholds)."""

from __future__ import annotations

import re
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from hobbit.bench import coldcompile, summary
from hobbit.bench.quant_report import ratio_cell
from hobbit.bench.result import BenchResult, Timing
from hobbit.cli.main import main
from hobbit.runtime.peak import Peak
from tests.helpers import make_model, rand

FAKE_PEAK = Peak(100.0, 50.0, 100)


def tiny_cnn() -> onnx.ModelProto:
    """An image classifier small enough to quantize, compile and time in seconds: conv, relu,
    global pool and a dense layer on a 3x16x16 image."""
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fc", "fb"], ["logits"], transB=1)]
    return make_model(nodes, {"input": rand(1, 3, 16, 16)}, ["logits"],
                      {"w": rand(16, 3, 3, 3, seed=1) * 0.3, "b": rand(16, seed=2) * 0.1,
                       "fc": rand(10, 16, seed=3) * 0.3, "fb": rand(10, seed=4) * 0.1}, opset=13)


@pytest.fixture(autouse=True)
def fake_peaks(monkeypatch):
    """Fixed peaks keep the run short (the real ones: tests/runtime/test_peak.py)."""
    monkeypatch.setattr(summary, "instruction_peak", lambda instruction, threads: FAKE_PEAK)
    monkeypatch.setattr("hobbit.bench.suite.fma_peak_gflops", lambda threads: FAKE_PEAK.best)


def _tables(markdown: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of the page, in order: (header cells, row cells)."""
    tables, current = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if current is None:
            current = (cells, [])
            tables.append(current)
        elif not all(c == "---" for c in cells):
            current[1].append(cells)
    return tables


def _run(tmp_path, capsys, loads: str = "none") -> tuple[int, str]:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_cnn(), path)
    out = tmp_path / "peers.md"
    code = main(["bench", "--summary", str(out), "--model", str(path), "--threads", "1,2", "--runs", "3",
                 "--warmup", "1", "--load", loads])
    capsys.readouterr()
    return code, out.read_text()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """One summary of the tiny CNN (module scope: the run takes some seconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(summary, "instruction_peak", lambda instruction, threads: FAKE_PEAK)
        mp.setattr("hobbit.bench.suite.fma_peak_gflops", lambda threads: FAKE_PEAK.best)
        path = tmp_path_factory.mktemp("summary") / "tiny.onnx"
        onnx.save(tiny_cnn(), path)
        out = path.parent / "peers.md"
        code = main(["bench", "--summary", str(out), "--model", str(path), "--threads", "1,2", "--runs", "3",
                     "--warmup", "1", "--load", "none,busy-core,gaps:1,poisson:1000"])
        return code, out.read_text()


def test_summary_writes_every_section(page):
    code, markdown = page
    assert code == 0
    assert "hobbit bench --summary " in markdown and "--threads 1,2 --runs 3" in markdown
    assert markdown.startswith(summary.BEGIN + "\n## hobbit against its peers") and markdown.endswith(summary.END + "\n")
    for heading in ("\n### Latency, quiet", "\n### Latency, busy-core", "\n### Sporadic requests, fp32", "gaps:MS",
                    "poisson:RATE", "\n### Cold compile, fp32", "\n### Slowest kernels"):
        assert heading in markdown, heading
    tables = _tables(markdown)
    latency = [t for t in tables if t[0][:3] == ["model", "threads", "fp32 hobbit / best"]]
    assert len(latency) == 2 and all([row[:2] for row in rows] == [["tiny.onnx", "1"], ["tiny.onnx", "2"]]
                                     for _, rows in latency)
    cold = next(t for t in tables if "compile s" in t[0])
    [row] = cold[1]
    cells = dict(zip(cold[0], row))
    assert float(cells["compile s"]) > 0 and all(float(cells[f"{p} s"]) >= 0 for p in coldcompile.PHASES)
    kernels = next(t for t in tables if t[0][3:5] == ["kernel", "ms"])
    for precision in summary.PRECISIONS:
        for threads in ("1", "2"):
            rows = [r for r in kernels[1] if r[1:3] == [precision, threads]]
            assert rows, (precision, threads)
            assert all(r[4] != "—" and r[7].endswith("%") for r in rows) or "not compiled" in rows[0][3]
    fp32 = [r for r in kernels[1] if r[1] == "fp32"]
    assert len(fp32) == 2 * summary.TOP  # the CNN fuses into three kernels, all listed
    assert fp32[0][0] == "tiny.onnx" and fp32[0][3].startswith("`Conv")


def test_ratios_are_the_figures_beside_them(page):
    _, markdown = page
    checked = 0
    for head, rows in _tables(markdown):
        if head[2:3] != ["fp32 hobbit / best"]:
            continue
        for row in rows:
            for pair, ratio in ((row[2], row[3]), (row[4], row[5]), (row[6], row[7])):
                if ratio == "—":
                    continue
                ours, theirs = (float(x) for x in pair.split(" / "))
                # 4 significant digits beside a ratio to 2 decimals
                assert float(ratio.split()[0]) == pytest.approx(ours / theirs, abs=0.005 + 2e-3 * ours / theirs)
                assert ratio.endswith("✗") == (float(ratio.split()[0]) > summary.TARGET)
                checked += 1
    assert checked >= 4  # fp32 and int8 at both thread counts, quiet and busy


def test_header_names_the_cpu_and_versions(page):
    _, markdown = page
    with open("/proc/cpuinfo") as f:
        model_name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    cpu = re.search(r"^CPU: (.+) \(/proc/cpuinfo\), LLVM host CPU (\S+), ", markdown, re.M)
    assert cpu is not None
    if model_name:
        assert cpu.group(1) == model_name
    assert re.search(r"^Versions: hobbit \S+, onnxruntime 1\.", markdown, re.M)
    assert re.search(r"^Generated by `hobbit bench --summary .*` on \d{4}-\d\d-\d\d\.$", markdown, re.M)
    assert "fp32 (fma): 100 at 1 thread (median trial 50), 100 at 2 threads" in markdown


def test_a_missing_openvino_is_a_line_not_a_crash(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    code, markdown = _run(tmp_path, capsys, loads="none")
    assert code == 0
    assert "OpenVINO not installed" in markdown
    assert "- OpenVINO not installed (pip install openvino): onnxruntime is the only fp32 and int8 peer" in markdown
    [(head, rows)] = [t for t in _tables(markdown) if t[0][2:3] == ["fp32 hobbit / best"]]
    for row in rows:
        cells = dict(zip(head, row))
        assert cells["bf16 hobbit / OpenVINO"].endswith("/ —")
        assert "OpenVINO" not in cells["best peers: fp32, int8"]


def test_ratio_cells_pick_the_fastest_peer_and_mark_the_target():
    result = BenchResult("m", 3, 1, 0.1, 0.0, None, hobbit=Timing(10.0, 9.0, 11.0),
                         onnxruntime=Timing(20.0, 19.0, 21.0), onnxruntime_nospin=Timing(11.0, 10.0, 12.0),
                         openvino=Timing(15.0, 14.0, 16.0))
    assert summary.fp32_cells(result) == ("10.00 / 11.00", "0.91 ✗", "onnxruntime allow_spinning=0")
    assert summary.fp32_cells(BenchResult("m", 3, 1, 0.1, 1.0, "differs")) == ("outputs disagree", "—", "—")
    assert [summary.figure(ms) for ms in (126.04, 0.012346, 1234.4, 4e-5)] == ["126.0", "0.01235", "1234",
                                                                            "0.00004000"]


def test_the_target_mark_judges_the_ratio_as_printed():
    """0.8003 prints as 0.80, which meets a 0.8 target; 0.806 prints as 0.81, which misses it."""
    assert [ratio_cell(v, 0.8) for v in (0.8003, 0.8, 0.806, None)] == ["0.80", "0.80", "0.81 ✗", "—"]


@pytest.mark.parametrize("flags, named", [(["--precision", "int8"], "--precision"), (["--aot"], "--aot"),
                                          (["--load", "two-procs"], "two-procs"),
                                          (["--markdown", "x.md"], "--markdown")])
def test_summary_refuses_what_it_does_not_take(flags, named, capsys):
    assert main(["bench", "--summary", "x.md", *flags]) == 2
    assert named in capsys.readouterr().err


def test_the_page_replaces_only_its_own_section_of_a_file():
    before, after = "# Benchmarks\n\nother tables\n\n", "\n\n## Later section\nmore\n"
    old = f"{before}{summary.BEGIN}\n## old page\n{summary.END}{after}"
    new = summary.place("## new page\n", old, "BENCHMARKS.md")
    assert new == f"{before}{summary.BEGIN}\n## new page\n{summary.END}{after}"
    assert summary.place("## new page\n", new, "BENCHMARKS.md") == new
    assert summary.place("## page\n", None, "peers.md") == f"{summary.BEGIN}\n## page\n{summary.END}\n"


def test_a_file_without_the_markers_is_refused_before_measuring(tmp_path, capsys):
    """Refused at once (no model is compiled: the call returns in well under the seconds a
    measurement takes) and left as it was."""
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nhand-written tables\n")
    assert main(["bench", "--summary", str(path), "--threads", "1"]) == 2
    assert "summary: begin" in capsys.readouterr().err
    assert path.read_text() == "# Benchmarks\n\nhand-written tables\n"


def test_cold_compile_runs_in_a_fresh_process_with_its_phases():
    cold = coldcompile.measure(tiny_cnn(), "tiny", 1)
    assert cold.seconds > 0 and cold.hobbit_import > 0 and set(coldcompile.PHASES) <= set(cold.phases)
    assert cold.rest == pytest.approx(cold.seconds - sum(cold.phases[p] for p in coldcompile.PHASES), abs=1e-9)
    assert np.isfinite(cold.rest)
