"""`hobbit bench`: thread lists, --model all, FLOP counts, peak share, the markdown/JSON/plot reports,
the load conditions, --batch and --streams, and the exported library beside the JIT (--aot) (no timing
thresholds: only that each runs, and stops)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import pickle
import queue
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit import zoo
from hobbit.bench import aot as bench_aot, load as bench_load, memory as bench_memory, report, suite
from hobbit.bench.load import BuildOptions
from hobbit.bench.openvino import openvino_core
from hobbit.bench.ort import ort_options, ort_session
from hobbit.bench.result import BenchResult, Timing
from hobbit.cli.args import parse_threads
from hobbit.cli.bench import parse_loads
from hobbit.cli.main import main
from hobbit.errors import ArtifactError, HobbitError, ShapeError, TargetError
from hobbit.runtime.peak import Peak
from hobbit.target import host_target, parse_target
from tests.helpers import make_model, rand

# Reshape (a view: no work) -> MatMul 4x8 @ 8x16 (2*4*16*8 = 1024 flops) -> Relu fused (64 flops).
TINY_FLOPS = 1024 + 64
FAKE_PEAK = 100.0


def tiny_model(scale: float = 1.0) -> onnx.ModelProto:
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, {"x": rand(4, 2, 4)}, ["y"],
                      {"s": np.array([4, 8], np.int64), "w": rand(8, 16, seed=1) * scale})


@pytest.fixture(autouse=True)
def fake_peak(monkeypatch):
    """A fixed FMA peak keeps the tests fast and the percentages exact (the real one: tests/runtime/test_peak.py)."""
    for module in (suite, report):
        monkeypatch.setattr(module, "fma_peak_gflops", lambda threads: FAKE_PEAK * threads)
    monkeypatch.setattr(report, "fma_peak", lambda threads: Peak(FAKE_PEAK * threads, FAKE_PEAK * threads / 2, 100))


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bench") / "tiny.onnx"
    onnx.save(tiny_model(), path)
    return str(path)


def test_run_benchmark_counts_flops_and_peak_share():
    result = suite.run_benchmark(tiny_model(), "tiny", runs=3, threads=2, warmup=1)
    assert result.mismatch is None and result.flops == TINY_FLOPS
    assert result.gflops == pytest.approx(TINY_FLOPS / (result.hobbit.median * 1e-3) / 1e9)
    assert result.peak_gflops == 2 * FAKE_PEAK
    assert result.peak_percent == pytest.approx(100 * result.gflops / (2 * FAKE_PEAK))
    assert result.inputs == "x: float32[4x2x4]"
    assert "GFLOP/s" in result.format() and "% of the 200 GFLOP/s FMA peak" in result.format()


def test_a_model_with_data_dependent_outputs_is_compared_and_timed():
    """NonZero's output is bounded (hobbit.frontend.common.bounded): bench compares the model's outputs
    with onnxruntime's by their names, not the flat outputs that carry its extent."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["y"])]
    result = suite.run_benchmark(make_model(nodes, {"x": rand(4, 6)}, ["y"]), "nonzero", runs=3, threads=1, warmup=1)
    assert result.mismatch is None and result.hobbit.median > 0


def test_threads_list_json_and_markdown(tiny_path, tmp_path, capsys):
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    argv = ["bench", "--model", tiny_path, "--threads", "1,2", "--runs", "3", "--warmup", "1",
            "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("ratio hobbit/onnxruntime (median)") == 2
    assert "| model | threads | hobbit median (p10–p90) ms" in out
    doc = json.loads(out_json.read_text())
    assert [r["threads"] for r in doc["results"]] == [1, 2]
    for r in doc["results"]:
        assert r["outputs_agree"] and r["flops"] == TINY_FLOPS and r["ratio"] > 0
        assert set(r["hobbit_ms"]) == {"median", "p10", "p90"} and r["peak_gflops"] == FAKE_PEAK * r["threads"]
        assert r["ratio"] == pytest.approx(r["hobbit_ms"]["median"] / r["onnxruntime_ms"]["median"])
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["onnxruntime"] and doc["machine"]["built_for"] is None
    assert doc["fma_peak_gflops"] == {"1": FAKE_PEAK, "2": 2 * FAKE_PEAK}
    md = out_md.read_text()
    assert md.startswith("# Benchmarks") and "Machine: " in md and "cores" in md and "onnxruntime 1." in md
    assert "--threads 1,2 --runs 3" in md
    assert "100 GFLOP/s at 1 thread (median trial 50), 200 GFLOP/s at 2 threads (median trial 100)" in md
    assert "the best of 100 short trials" in md and doc["fma_peak_median_gflops"] == {"1": 50.0, "2": 100.0}
    rows = [line for line in md.splitlines() if line.startswith(f"| {tiny_path} |")]
    # the latency table, the speed-up, then memory (measured at the first thread count only)
    assert [row.split(" | ")[1] for row in rows] == ["1", "2", "2", "1"]
    assert [r["memory_bytes"] is not None for r in doc["results"]] == [True, False]
    assert "| hobbit speed-up over 1 thread |" in md and rows[2].endswith("x |")


def test_model_all_runs_every_zoo_model(monkeypatch, capsys):
    monkeypatch.setattr(zoo, "MODELS", {"tiny_a": tiny_model, "tiny_b": lambda: tiny_model(0.5)})
    assert main(["bench", "--model", "all", "--runs", "3", "--warmup", "0"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny_")]
    assert [row.split(" | ")[0] for row in rows] == ["| tiny_a", "| tiny_b"] * 2  # latency, then memory


def test_disagreeing_outputs_get_no_ratio_anywhere(tiny_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(suite, "compare_outputs", lambda got, exp, names: (1.0, "output 'y' differs"))
    out_json = tmp_path / "b.json"
    assert main(["bench", "--model", tiny_path, "--runs", "3", "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert "OUTPUTS DISAGREE" in out and "outputs disagree" in out and "ratio hobbit" not in out
    (r,) = json.loads(out_json.read_text())["results"]
    assert r["ratio"] is None and r["gflops"] is None and r["hobbit_ms"] is None and not r["outputs_agree"]


def test_plot_writes_a_png(tiny_path, tmp_path):
    pytest.importorskip("matplotlib")
    good = suite.run_benchmark(tiny_path, "tiny", runs=3, warmup=0)
    bad = BenchResult("broken", 3, 2, 0.1, 1.0, "differs")
    path = tmp_path / "ratios.png"
    report.plot_ratios([good, bad], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(HobbitError, match="--plot needs matplotlib"):
        report.plot_ratios([], tmp_path / "x.png")
    # Checked before any benchmarking starts (a zoo model that would take seconds to run).
    assert main(["bench", "--model", "resnet18", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err


def test_markdown_table_rows():
    ok = BenchResult("m", 30, 1, 2.34, 1e-6, None, Timing(40.351, 39.28, 142.69),
                           Timing(0.5, 0.4, 0.6), flops=10**9, peak_gflops=100.0)
    bad = BenchResult("m", 30, 2, 1.0, 1.0, "differs")
    table = report.markdown_table([ok, bad]).splitlines()
    assert table[2] == "| m | 1 | 40.35 (39.28–142.7) | 0.500 (0.400–0.600) | 80.70 | 24.8 | 25% | 24.8 | 2.3 |"
    assert table[3] == "| m | 2 | — | — | outputs disagree | — | — | — | 1.0 |"
    # Winograd convs: the % of the peak is of the executed arithmetic, the direct count beside it.
    winograd = BenchResult("w", 30, 1, 1.0, 0.0, None, Timing(10.0, 10.0, 10.0),
                                 Timing(10.0, 10.0, 10.0), flops=3 * 10**9, executed_flops=10**9,
                                 peak_gflops=150.0)
    assert "| 100.0 | 67% | 300.0 |" in report.markdown_table([winograd])
    assert winograd.peak_percent == pytest.approx(100 * 100.0 / 150.0)
    assert "Winograd as direct" in report.markdown_table([winograd]).splitlines()[0]


def test_scaling_table_compares_each_engine_with_its_own_one_thread_run():
    def result(model, threads, ours, theirs, mismatch=None):
        return BenchResult(model, 30, threads, 1.0, 0.0, mismatch, Timing(ours, ours, ours),
                                 Timing(theirs, theirs, theirs))
    rows = [result("a", 1, 90.0, 300.0), result("a", 2, 50.0, 160.0), result("b", 2, 5.0, 6.0),
            result("c", 1, 10.0, 10.0), result("c", 2, 1.0, 1.0, mismatch="differs")]
    table = report.scaling_table(rows).splitlines()
    assert table[2:] == ["| a | 2 | 1.80x | 1.88x |"]  # b has no 1-thread run, c's outputs disagree
    assert report.scaling_table(rows[:1]) == ""


def test_thread_and_model_arguments(capsys):
    assert parse_threads("1, 2,1") == [1, 2]
    assert main(["bench", "--threads", "0"]) == 2
    assert main(["bench", "--threads", "a,b"]) == 2
    assert "thread counts" in capsys.readouterr().err
    assert main(["bench", "--model", "resnet18,no_such_model"]) == 2
    assert "'no_such_model' is neither an existing file nor a zoo model" in capsys.readouterr().err


def test_contention_warning(monkeypatch):
    assert suite.contention_warning([1, 2]) is None  # the fake peak scales perfectly
    for module in (suite, report):  # 2 threads no faster than 1
        monkeypatch.setattr(module, "fma_peak_gflops", lambda threads: FAKE_PEAK)
    warning = suite.contention_warning([1, 2])
    if host_target().cores == 1:
        assert warning is None
        return
    assert "other work is using the cores" in warning
    result = BenchResult("m", 3, 2, 1.0, 0.0, None, Timing(1, 1, 1), Timing(1, 1, 1))
    assert f"**Warning:** {warning}." in report.markdown_report([result], report.machine_info(), "hobbit bench")


def test_bench_profile_lists_kernels_with_peak_share(tmp_path, capsys):
    from onnx import helper

    from hobbit.cli.main import main
    from tests.helpers import make_model, rand
    x = rand(1, 8, 16, 16)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    path = tmp_path / "tiny.onnx"
    import onnx
    onnx.save(make_model(nodes, {"x": x}, ["y"], {"W": rand(8, 8, 3, 3, seed=1)}), str(path))
    assert main(["bench", "--model", str(path), "--runs", "3", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "profile of" in out and "%peak" in out and "Conv+Relu[conv]" in out


# -- load conditions, batch and streams ----------------------------------------------------
def batchable_model() -> onnx.ModelProto:
    """MatMul (B x 8 @ 8 x 16) -> Relu: takes any batch, unlike tiny_model's fixed Reshape."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, {"x": rand(1, 8)}, ["y"], {"w": rand(8, 16, seed=1)})


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_busy_core_is_pinned_to_the_last_cpu_and_always_reaped():
    with bench_load.busy_core() as proc:
        assert proc.poll() is None
        assert os.sched_getaffinity(proc.pid) == {max(os.sched_getaffinity(0))}
    assert proc.returncode is not None and _gone(proc.pid)
    with pytest.raises(KeyboardInterrupt):
        with bench_load.busy_core() as proc:
            raise KeyboardInterrupt
    assert proc.returncode is not None and _gone(proc.pid)


def test_busy_core_runs_while_both_engines_are_timed(monkeypatch):
    started, alive_while_timed = [], []
    real_busy_core, real_rounds = bench_load.busy_core, bench_load.timed_rounds

    @contextlib.contextmanager
    def spy_busy_core():
        with real_busy_core() as proc:
            started.append(proc)
            yield proc

    def spy_rounds(engines, *args, **kwargs):
        alive_while_timed.append([p.poll() is None for p in started])
        return real_rounds(engines, *args, **kwargs)

    monkeypatch.setattr(bench_load, "busy_core", spy_busy_core)
    monkeypatch.setattr(bench_load, "timed_rounds", spy_rounds)
    none, busy = suite.run_loads(tiny_model(), "tiny", ["none", "busy-core"], runs=3, warmup=0)
    assert (none.mode, busy.mode) == ("none", "busy-core") and busy.hobbit is not None
    assert alive_while_timed == [[], [True]]  # none ran without it, busy-core with it
    assert started[0].returncode is not None and _gone(started[0].pid)
    assert "load: busy-core (a busy-loop process pinned to CPU" in busy.format()


def _recorded_engines(monkeypatch, log: list[str]) -> None:
    """Make every benchmark's engines log their name to `log` on each call, then run as before."""
    real_engines = suite._Setup.engines

    def engines(setup, **options):
        def recorded(name, engine):
            def run():
                log.append(name)
                return engine()
            return run
        return {name: recorded(name, engine) for name, engine in real_engines(setup, **options).items()}

    monkeypatch.setattr(suite._Setup, "engines", engines)


def test_blas_runs_an_untimed_product_right_before_every_timed_run(monkeypatch):
    log = []
    _recorded_engines(monkeypatch, log)

    def product():
        log.append("blas")
        time.sleep(0.05)  # far longer than a tiny-model run: timed with it, the medians would show it

    monkeypatch.setattr(bench_load, "blas_product", lambda: product)
    (blas,) = suite.run_loads(tiny_model(), "tiny", ["blas"], runs=3, warmup=1)
    assert log[:2] == ["hobbit", "onnxruntime"]  # the warm-ups meet no product
    assert log[2:] == ["blas", "hobbit"] * 3 + ["blas", "onnxruntime"] * 3  # one block per engine
    assert blas.mode == "blas" and blas.mismatch is None
    assert blas.hobbit.median < 50 and blas.onnxruntime.median < 50  # ms: the product is not timed
    assert blas.hobbit_ips > 20 and blas.onnxruntime_ips > 20  # nor counted in the rounds' wall time
    assert "load: blas (right before every timed run of either engine, an untimed numpy float32 384x384" \
        in blas.format()


def test_blas_product_is_a_real_product_on_every_call(monkeypatch):
    shapes = []
    real_matmul = np.matmul

    def matmul(a, b, **kwargs):
        shapes.append((a.shape, b.shape, a.dtype, kwargs["out"].shape))
        return real_matmul(a, b, **kwargs)

    monkeypatch.setattr(bench_load.np, "matmul", matmul)
    product = bench_load.blas_product()
    product()
    size = bench_load.BLAS_SIZE
    assert shapes == [((size, size), (size, size), np.float32, (size, size))] * 2  # one while made: threads start


def test_alternate_times_single_runs_one_engine_after_the_other_with_no_pause(monkeypatch):
    log = []

    def engine(name):
        def run():
            log.append(name)
            return [np.zeros(1)]
        return run

    def no_sleep(seconds):
        raise AssertionError(f"alternate paused {seconds} s between runs")

    monkeypatch.setattr(bench_load.time, "sleep", no_sleep)
    samples = bench_load.run_in_process("alternate", {n: engine(n) for n in ("hobbit", "onnxruntime")},
                                        runs=7, warmup=1)
    assert log == ["hobbit", "onnxruntime"] + ["hobbit", "onnxruntime"] * 7
    for s in samples.values():  # one round per run: inferences/s is batch over the mean latency
        assert len(s.seconds) == len(s.windows) == 7
    with pytest.raises(HobbitError, match="'two-procs' does not run in the benchmark's own process"):
        bench_load.run_in_process("two-procs", {}, 1, 0)


def test_alternate_result_interleaves_the_real_engines(monkeypatch):
    log = []
    _recorded_engines(monkeypatch, log)
    (alternate,) = suite.run_loads(tiny_model(), "tiny", ["alternate"], runs=3, warmup=0)
    assert log == ["hobbit", "onnxruntime"] * 3
    assert alternate.mode == "alternate" and alternate.hobbit is not None and alternate.streams == 1
    assert "load: alternate (single runs of the two engines alternate with no pause" in alternate.format()


def test_two_procs_pools_both_workers_runs():
    feeds = {"x": rand(4, 2, 4)}
    measured = bench_load.run_two_procs(tiny_model(), 1, BuildOptions(), feeds, ["y"], runs=3, warmup=0, batch=1)
    expected = np.maximum(feeds["x"].reshape(4, 8) @ rand(8, 16, seed=1), 0)
    for engine in ("hobbit", "onnxruntime"):
        assert len(measured[engine].seconds) == 6 and measured[engine].per_second > 0
        assert len(measured[engine].last) == 2
        for (y,) in measured[engine].last:
            np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    assert multiprocessing.active_children() == []


def test_two_procs_result_and_worker_failure_cleanup(tmp_path):
    (result,) = suite.run_loads(tiny_model(), "tiny", ["two-procs"], runs=3, warmup=0)
    assert result.mode == "two-procs" and result.streams == 2 and result.mismatch is None
    assert result.hobbit_ips > 0 and result.onnxruntime_ips > 0 and result.ips_ratio > 0
    with pytest.raises(HobbitError, match="worker 0: ModelFormatError"):  # the cause, not the partner's abort
        bench_load.run_two_procs(str(tmp_path / "missing.onnx"), 1, BuildOptions(), {}, ["y"], 3, 0, 1)
    assert multiprocessing.active_children() == []


def test_streams_share_one_model_across_threads():
    seen = {"hobbit": set(), "onnxruntime": set()}

    def engine(name):
        def run():
            seen[name].add(threading.get_ident())
            return [np.zeros(1)]
        return run

    measured = bench_load.run_streams({n: engine(n) for n in seen}, streams=3, runs=4, warmup=0, batch=2)
    assert all(len(idents) == 3 for idents in seen.values())
    assert all(len(m.seconds) == 12 and len(m.last) == 3 and m.per_second > 0 for m in measured.values())
    result = suite.run_streams(batchable_model(), "mm", streams=2, runs=3, warmup=1)
    assert (result.mode, result.threads, result.streams) == ("streams", 1, 2) and result.mismatch is None
    assert result.hobbit_ips > 0 and result.onnxruntime_ips > 0


def test_a_failing_stream_stops_the_others():
    def boom():
        if threading.current_thread().name.endswith("-1"):
            raise ValueError("stream 1 broke")
        return []

    with pytest.raises(HobbitError, match="stream 1 broke"):
        bench_load.run_streams({"hobbit": boom}, streams=3, runs=20, warmup=0, batch=1)


def test_wrong_outputs_under_concurrency_get_no_timings(monkeypatch):
    wrong = bench_load.Measured([1e-3], 1000.0, [[np.full((1, 16), 99.0, np.float32)]])
    monkeypatch.setattr(bench_load, "run_streams", lambda *args: {"hobbit": wrong, "onnxruntime": wrong})
    result = suite.run_streams(batchable_model(), "mm", streams=2, runs=2, warmup=0)
    assert result.mismatch.startswith("under streams: output 'y'") and result.hobbit is None


def test_batch_sets_the_first_dim_and_counts_items():
    result = suite.run_benchmark(batchable_model(), "mm", runs=3, warmup=0, batch=3)
    assert result.batch == 3 and result.inputs == "x: float32[3x8]" and result.mismatch is None
    assert result.hobbit_ips > 0 and "batch: 3" in result.format()
    with pytest.raises(ShapeError, match="does not run at batch 3: node 'Reshape_0'"):
        suite.run_benchmark(tiny_model(), "tiny", runs=1, warmup=0, batch=3)  # its Reshape fixes the batch
    zoo_model = suite.with_batch(zoo.build("squeezenet1_1"), 2)
    dims = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in (*zoo_model.graph.input,
                                                                          *zoo_model.graph.output)]
    assert dims == [[2, 3, 224, 224], [2, 1000]]


def test_load_tables_rows_and_ratio_directions():
    plain = BenchResult("m", 30, 1, 1.0, 0.0, None, Timing(1, 1, 1), Timing(1, 1, 1))
    assert report.load_tables([plain]) == ""  # a plain run: the first table says it all
    two = BenchResult("m", 30, 2, 1.0, 0.0, None, Timing(2.0, 1.0, 4.0), Timing(4.0, 2.0, 5.0),
                            mode="two-procs", streams=2, hobbit_ips=1000.0, onnxruntime_ips=500.0,
                            onnxruntime_nospin=Timing(1.0, 0.5, 2.0), onnxruntime_nospin_ips=2000.0)
    bad = BenchResult("m", 30, 1, 1.0, 1.0, "differs", mode="streams", streams=4, batch=8)
    lines = report.load_tables([plain, two, bad]).splitlines()
    assert lines[0] == "Load **none**: nothing else of ours runs."
    spin, quiet = "default (spinning)", "session.intra_op.allow_spinning=0"
    assert f"| m | 1 | 1 | 1 | {spin} | 1.00 (1.00) | 1.00 (1.00) | 1.00 | 1.00 | — | — | — |" in lines  # no inf/s
    assert f"| m | 1 | 1 | 1 | {quiet} | 1.00 (1.00) | not timed | — | — | — | — | — |" in lines
    assert f"| m | 2 | 1 | 2 | {spin} | 2.00 (4.00) | 4.00 (5.00) | 0.50 | 0.80 | 1000 | 500 | 0.50 |" in lines
    assert f"| m | 2 | 1 | 2 | {quiet} | 2.00 (4.00) | 1.00 (2.00) | 2.00 | 2.00 | 1000 | 2000 | 2.00 |" in lines
    assert f"| m | 1 | 8 | 4 | {quiet} | — | — | outputs disagree | — | — | — | — |" in lines
    assert any(line.startswith("Load **streams**: 4 Python threads") for line in lines)
    assert report.markdown_table([two]) == ""  # the latency table holds the plain condition only


def test_cli_load_batch_streams_reports(tmp_path, capsys):
    path, out_md, out_json = tmp_path / "mm.onnx", tmp_path / "b.md", tmp_path / "b.json"
    onnx.save(batchable_model(), path)
    argv = ["bench", "--model", str(path), "--runs", "2", "--warmup", "0", "--load", "none,busy-core,blas,alternate",
            "--batch", "2", "--streams", "2", "--markdown", str(out_md), "--json", str(out_json)]
    assert main(argv) == 0
    md = out_md.read_text()
    assert "--load none,busy-core,blas,alternate --batch 2 --streams 2" in md
    modes = ["none", "busy-core", "blas", "alternate", "streams"]
    for mode in modes:
        assert f"Load **{mode}**" in md
    # Two rows per load table (threads 1, batch 2): onnxruntime spinning, and not, both timed.
    for session in ("default (spinning)", "session.intra_op.allow_spinning=0"):
        rows = [line for line in md.splitlines() if line.startswith(f"| {path} | 1 | 2 |") and f"| {session} |" in line]
        assert len(rows) == 5 and not any("not timed" in row for row in rows)
    doc = json.loads(out_json.read_text())
    assert [r["mode"] for r in doc["results"]] == modes
    assert all(r["batch"] == 2 and r["hobbit_ips"] > 0 and r["onnxruntime_nospin_ips"] > 0 for r in doc["results"])
    assert "Load **busy-core**" in capsys.readouterr().out


@pytest.mark.parametrize("flag, value", [("--load", "bogus"), ("--load", "none,bogus"), ("--load", ","),
                                         ("--batch", "0"), ("--batch", "x"), ("--streams", "0")])
def test_bad_load_batch_streams_are_usage_errors(flag, value, capsys):
    assert main(["bench", flag, value]) == 2
    assert f"argument {flag}" in capsys.readouterr().err
    assert parse_loads("none, two-procs,none") == ["none", "two-procs"]


def test_memory_of_each_engine_is_measured_in_a_fresh_process():
    feeds = {"x": rand(4, 2, 4)}
    got = bench_memory.measure(tiny_model(), feeds, 1, ort_options(1))
    assert set(got) == {"hobbit", "onnxruntime"}
    for use in got.values():
        assert 10 << 20 < use.base <= use.peak and use.built <= use.peak and use.run <= use.peak
    # The onnxruntime child imports neither hobbit nor llvmlite, whose pages would count against it.
    assert got["onnxruntime"].base < got["hobbit"].base


def test_memory_table_rows_and_ratios():
    mb = 10**6
    memory = {"hobbit": bench_memory.MemoryUse(90 * mb, 300 * mb, 310 * mb, 400 * mb),
              "onnxruntime": bench_memory.MemoryUse(45 * mb, 320 * mb, 325 * mb, 330 * mb)}
    one = BenchResult("m", 30, 1, 1.0, 0.0, None, Timing(1, 1, 1), Timing(1, 1, 1), memory=memory)
    two = BenchResult("m", 30, 2, 1.0, 0.0, None)
    table = report.memory_table([one, two]).splitlines()
    assert len(table) == 3
    assert table[2] == "| m | 1 | 300 / 310 / 400 | 320 / 325 / 330 | 0.95 | 1.21 | 90 / 45 |"
    assert "310 MB after one run, peak 400 MB" in one.format()
    assert one.to_dict()["memory_bytes"]["onnxruntime"]["peak"] == 330 * mb
    assert report.memory_table([two]) == ""


def test_onnxruntime_sessions_get_the_benchmark_options():
    options = ort_session(tiny_model(), 2).get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert str(options.execution_mode).endswith("ORT_SEQUENTIAL")
    assert str(options.graph_optimization_level).endswith("ORT_ENABLE_ALL")
    with pytest.raises(RuntimeError, match="does not have configuration"):  # the default: spinning
        options.get_session_config_entry("session.intra_op.allow_spinning")
    quiet = ort_session(tiny_model(), 2, spinning=False).get_session_options()
    assert quiet.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert quiet.intra_op_num_threads == 2


def test_bench_with_a_load_times_onnxruntime_without_spinning_beside_the_default(tiny_path, tmp_path, capsys):
    """`hobbit bench --load` reports both onnxruntime sessions in every load table, two-procs included
    (whose workers open their own), and a plain run does not time the second session."""
    out_md = tmp_path / "b.md"
    argv = ["bench", "--model", tiny_path, "--runs", "2", "--warmup", "0", "--load", "none,two-procs",
            "--markdown", str(out_md)]
    assert main(argv) == 0
    md = out_md.read_text()
    for mode in ("none", "two-procs"):
        table = md.split(f"Load **{mode}**")[1].split("Load **")[0]
        for session in ("default (spinning)", "session.intra_op.allow_spinning=0"):
            row = next(line for line in table.splitlines() if f"| {session} |" in line)
            assert "not timed" not in row and "—" not in row, row
    assert "onnxruntime, allow_spinning=0: median" in capsys.readouterr().out
    (plain,) = suite.run_loads(tiny_model(), "tiny", ["none"], runs=2, warmup=0)
    assert plain.onnxruntime_nospin is None and plain.onnxruntime is not None


def test_aot_library_is_timed_beside_the_jit_in_every_report(tiny_path, tmp_path, monkeypatch, capsys):
    engines_seen = []
    run_in_process = bench_load.run_in_process

    def record(load, engines, runs, warmup):
        engines_seen.append(list(engines))
        return run_in_process(load, engines, runs, warmup)

    monkeypatch.setattr(bench_load, "run_in_process", record)
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    argv = ["bench", "--model", tiny_path, "--aot", "--runs", "3", "--warmup", "1", "--load", "none,busy-core",
            "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == 0
    # interleaved in one round, under each load (with a load table: onnxruntime not spinning too;
    # OpenVINO, where installed, in the plain condition)
    engines = ["hobbit", "aot", "onnxruntime", bench_load.NO_SPIN_ENGINE]
    openvino = openvino_core() is not None
    assert engines_seen == [engines + ["openvino"] * openvino, engines]
    assert capsys.readouterr().out.count("ratio AOT/JIT (median)") == 2
    md = out_md.read_text()
    assert "--runs 3 --load none,busy-core --aot" in md and "loaded back with `hobbit.load`" in md
    peer = "| OpenVINO f32 median (p10–p90) ms | hobbit / best peer " if openvino else ""
    assert f"| ratio {peer}| AOT library median (p10–p90) ms | AOT/JIT | hobbit GFLOP/s executed |" in md
    assert md.count("| AOT library median (p90) ms | AOT/JIT |") == 2  # both load tables
    row = next(line for line in md.splitlines() if line.startswith(f"| {tiny_path} | 1 |"))
    assert len(row.split(" | ")) == 11 + 2 * openvino and "—" not in row
    doc = json.loads(out_json.read_text())
    assert doc["settings"]["aot_parity_atol"] == 1e-5
    for r in doc["results"]:
        assert set(r["aot_ms"]) == {"median", "p10", "p90"}
        assert r["aot_ratio"] == pytest.approx(r["aot_ms"]["median"] / r["hobbit_ms"]["median"])
        assert r["aot_max_abs_diff"] <= 1e-5 and r["aot_export_seconds"] > 0 and r["ctypes_call_us"] > 0


def test_a_library_whose_outputs_differ_from_the_jit_stops_the_benchmark(monkeypatch):
    # A real library of the wrong model (other weights) in place of the exported one.
    exported = []

    def export_other(compiled):
        found = export_and_load(hobbit.compile(tiny_model(0.5), cache=False))
        exported.append(found.folder.name)
        return found

    export_and_load = bench_aot.export_and_load
    monkeypatch.setattr(bench_aot, "export_and_load", export_other)
    with pytest.raises(ArtifactError, match="output 'y' differs from the JIT's: .* by more than 1e-05"):
        suite.run_benchmark(tiny_model(), "tiny", runs=2, warmup=0, aot=True)
    assert exported and not os.path.exists(exported[0])  # its temporary folder is removed all the same


def test_aot_in_streams_and_not_in_two_procs():
    streams = suite.run_streams(tiny_model(), "tiny", streams=2, runs=2, warmup=0, aot=True)
    assert streams.aot is not None and streams.aot_ips > 0 and streams.aot_max_abs_diff <= 1e-5
    (two,) = suite.run_loads(tiny_model(), "tiny", ["two-procs"], runs=2, warmup=0, aot=True)
    assert two.mismatch is None and two.hobbit is not None and two.aot is None and two.aot_ratio is None


def test_parity_check_against_the_jit():
    jit = [np.array([1.0, np.nan, np.inf, -2.0], np.float32)]
    assert bench_aot.check_parity([jit[0].copy()], jit, ["y"]) == 0.0
    close = jit[0] + np.float32(2e-6)
    assert 0 < bench_aot.check_parity([close], jit, ["y"]) <= 1e-5
    for wrong, why in [(jit[0] + np.float32(1e-3), "differs from the JIT's"),
                       (np.array([1.0, 0.0, np.inf, -2.0], np.float32), "NaN at 1 elements"),
                       (jit[0].astype(np.float64), "is float64\\[4\\], the JIT's float32\\[4\\]"),
                       (jit[0][:3], "float32\\[3\\]")]:
        with pytest.raises(ArtifactError, match=why):
            bench_aot.check_parity([wrong], jit, ["y"])


def _recorded_targets(monkeypatch) -> list:
    """hobbit.compile, recording the target of every model it builds in this process."""
    built, compile_ = [], hobbit.compile

    def recording(*args, **kwargs):
        model = compile_(*args, **kwargs)
        built.append(model.report.target)
        return model

    monkeypatch.setattr(hobbit, "compile", recording)
    return built


AVX2 = "x86-64-v3"


@pytest.mark.skipif(parse_target(AVX2).runs_on(host_target()) is not None, reason="this host cannot run AVX2 code")
def test_bench_target_builds_every_engine_for_it_and_says_so(tiny_path, tmp_path, monkeypatch, capsys):
    built = _recorded_targets(monkeypatch)
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    argv = ["bench", "--model", tiny_path, "--target", AVX2, "--runs", "2", "--warmup", "0", "--streams", "2",
            "--aot", "--profile", "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == 0
    # setup at 1 thread, the streams' setup, the profile: all AVX2 (the host here may have AVX-512)
    assert len(built) == 3 and all(t == parse_target(AVX2) and t.vector_bits == 256 for t in built)
    spec = "x86_64-unknown-linux-gnu:x86-64-v3"
    assert f"code built for x86-64-v3 ({spec}, 256-bit vectors)" in capsys.readouterr().out
    machine = json.loads(out_json.read_text())["machine"]
    assert machine["built_for"]["target"] == spec and machine["built_for"]["vector_bits"] == 256
    assert machine["vector_bits"] == host_target().vector_bits  # the machine is still the host
    md = out_md.read_text()
    assert f"--target {spec}" in md and "Target: code built for x86-64-v3" in md
    assert "the FMA peak and the % of it are this host's" in md


def test_bench_refuses_a_target_this_host_cannot_run(tiny_path, monkeypatch, capsys):
    monkeypatch.setattr(suite, "run_suite", lambda *a, **k: pytest.fail("measured code it cannot run"))
    assert main(["bench", "--model", tiny_path, "--target", "aarch64-linux-gnu:neoverse-n1"]) == 2
    err = capsys.readouterr().err
    assert "`hobbit bench` runs the model here" in err and "it is aarch64 code and this host is x86_64" in err


def test_build_options_reach_other_processes_unchanged():
    build = BuildOptions.of(["fuse"], parse_target("x86_64-linux-gnu:znver4:-avx512bf16,+avxvnni"), "naive", "polly")
    assert build.target == "x86_64-unknown-linux-gnu:znver4:-avx512bf16,+avxvnni"
    assert pickle.loads(pickle.dumps(build)) == build  # the two-procs workers
    sent = json.loads(json.dumps(build.kwargs()))  # the memory child
    assert sent == {"passes": ["fuse"], "target": build.target, "schedule": "naive", "loops": "polly"}
    assert parse_target(sent["target"]) == parse_target("x86_64-linux-gnu:znver4:-avx512bf16,+avxvnni")
    assert BuildOptions.of(None, host_target()).kwargs() == {"passes": None, "target": "host", "schedule": "auto",
                                                             "loops": "llvm"}
    with pytest.raises(TargetError, match="cannot run on this host"):
        suite.run_suite([("tiny", tiny_model)], [1], build=BuildOptions.of(target="aarch64-linux-gnu"))


@pytest.mark.skipif(parse_target(AVX2).runs_on(host_target()) is not None, reason="this host cannot run AVX2 code")
def test_two_procs_worker_compiles_for_the_target(tiny_path, monkeypatch):
    built = _recorded_targets(monkeypatch)
    results = queue.Queue()
    bench_load._worker(0, tiny_path, 1, BuildOptions.of(target=AVX2), {"x": rand(4, 2, 4)}, ["y"], 1, 0,
                       False, threading.Barrier(1), results)
    index, samples = results.get_nowait()
    assert index == 0 and isinstance(samples, dict), samples
    assert [t.vector_bits for t in built] == [256]


def test_memory_child_compiles_for_the_target():
    # Code for AArch64 compiles here but cannot run: the child failing on its run shows it got the target.
    build = BuildOptions(target="aarch64-linux-gnu:neoverse-n1")
    with pytest.raises(HobbitError, match="memory measurement .*TargetError: this model was compiled for aarch64"):
        bench_memory.measure(tiny_model(), {"x": rand(4, 2, 4)}, 1, ort_options(1), build)
