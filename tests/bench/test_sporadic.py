"""`hobbit bench --load gaps:MS` and `--load poisson:RATE` (hobbit.bench.sporadic), and OpenVINO
beside onnxruntime in the plain table: the specs parse (and bad ones are one-line usage errors),
the gaps are real idle gaps of one engine, Poisson arrivals have the right distribution, latency
under Poisson includes queueing, the idle-CPU figure sees a spinning thread, and the reports carry
the columns. No timing thresholds on the engines themselves."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from hobbit.bench import report, sporadic, suite
from hobbit.bench.load import NO_SPIN_ENGINE, mode_key
from hobbit.bench.openvino import NOT_INSTALLED, openvino_core
from hobbit.bench.result import BenchResult, Timing
from hobbit.cli.bench import parse_loads
from hobbit.cli.main import main
from tests.bench.test_bench import fake_peak, tiny_model, tiny_path  # noqa: F401  (fixtures)

OPENVINO = openvino_core() is not None


# -- the specs ---------------------------------------------------------------------------------
def test_sporadic_specs_parse_to_one_spelling_and_sort_after_the_loads():
    assert parse_loads("none, gaps:10,gaps:10.0,poisson:50, gaps:0.5") == ["none", "gaps:10", "poisson:50", "gaps:0.5"]
    assert sporadic.condition("gaps:2.5") == ("gaps", 2.5) and sporadic.condition("busy-core") is None
    modes = ["poisson:50", "gaps:100", "streams", "none", "gaps:1", "alternate", "poisson:5"]
    assert sorted(modes, key=mode_key) == ["none", "alternate", "gaps:1", "gaps:100", "poisson:5", "poisson:50",
                                           "streams"]


@pytest.mark.parametrize("spec", ["gaps:-1", "gaps:x", "gaps:0", "gaps", "gaps:", "gaps:inf", "poisson:0",
                                  "poisson:nan", "poisson:-3", "none,gaps:ten"])
def test_bad_sporadic_specs_are_one_line_usage_errors(spec, capsys):
    assert main(["bench", "--load", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "error" in line] == [err[-1]]
    kind = "poisson" if "poisson" in spec else "gaps"
    assert err[-1].startswith(f"hobbit bench: error: argument --load: {kind}:") and "positive number" in err[-1]


# -- the gaps ------------------------------------------------------------------------------------
def test_every_timed_run_follows_a_real_idle_gap_of_its_own_engine():
    """Warm-ups back to back; after them every call (timed or the untimed first call of a block)
    starts at least the gap after the end of the previous call of ANY engine, and the timed runs are
    the calls that follow the same engine's own call."""
    calls: list[tuple[str, float, float]] = []

    def engine(name):
        def run():
            t0 = time.perf_counter()
            time.sleep(0.0005)
            calls.append((name, t0, time.perf_counter()))
            return [np.zeros(1)]
        return run

    gap, runs, warmup, block = 0.004, 7, 2, 3
    got = sporadic.run_gaps({"a": engine("a"), "b": engine("b")}, runs, warmup, gap, block)
    assert [len(s.seconds) for s in got.values()] == [runs, runs]
    assert [name for name, _, _ in calls[:2 * warmup]] == ["a", "a", "b", "b"]
    assert calls[1][1] - calls[0][2] < gap  # warm-ups back to back
    after = calls[2 * warmup:]
    previous = calls[2 * warmup - 1:-1]
    for (name, start, _), (_, _, end) in zip(after, previous):
        assert start - end >= gap, f"a call of {name} started {start - end:.6f} s after the previous call"
    blocks = -(-runs // block)
    for name in "ab":
        mine = [i for i, (n, _, _) in enumerate(after) if n == name]
        assert len(mine) == runs + blocks
        follows_other = [i for i in mine if (previous[i][0] != name)]
        assert len(follows_other) == blocks and len(mine) - len(follows_other) == runs
    for s in got.values():
        assert s.idle_wall >= runs * gap and s.idle_cores is not None


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_idle_cost_sees_a_thread_that_spins_during_the_sleep():
    quiet, busy = sporadic.Sporadic(), sporadic.Sporadic()
    sporadic.idle(0.2, quiet)
    spinner = threading.Thread(target=_spin, args=(0.3,), daemon=True)
    spinner.start()
    sporadic.idle(0.2, busy)
    spinner.join()
    assert quiet.idle_wall >= 0.2 and busy.idle_wall >= 0.2
    assert quiet.idle_cores < 0.2, quiet
    assert busy.idle_cores > 0.4 and busy.idle_cores > quiet.idle_cores + 0.3, busy


def test_gaps_charge_an_engine_for_the_threads_it_leaves_spinning():
    """An engine that leaves a thread spinning for 30 ms after each run (a pool that spins after
    its work) costs about a core per second of a 10 ms gap; a quiet one about nothing, like the
    run with no engine (sporadic.FLOOR), which run() times after the engines."""
    def spins_after():
        threading.Thread(target=_spin, args=(0.03,), daemon=True).start()
        return []

    got = sporadic.run("gaps:10", {"spins": spins_after, "quiet": lambda: []}, runs=6, warmup=1, block=3)
    assert list(got) == ["spins", "quiet", sporadic.FLOOR]
    assert got["spins"].idle_cores > 0.4, got["spins"]
    assert got["quiet"].idle_cores < 0.2 and got[sporadic.FLOOR].idle_cores < 0.2


# -- Poisson arrivals ----------------------------------------------------------------------------
@pytest.mark.parametrize("rate, seed", [(50.0, 0), (1000.0, 7)])
def test_poisson_arrivals_are_exponential_with_the_asked_mean(rate, seed):
    """20,000 inter-arrival times: mean 1/rate within 3% (its standard error is 0.7%: 4 sigma),
    standard deviation / mean (1 for an exponential) within 5% (standard error sqrt(2/n) = 1%), and
    the share below the mean 1 - 1/e within 0.02 (standard error 0.0034)."""
    count = 20_000
    arrivals = sporadic.poisson_arrivals(rate, count, seed)
    gaps = np.diff(np.concatenate([[0.0], arrivals]))
    assert len(arrivals) == count and (gaps > 0).all()
    mean = gaps.mean()
    assert mean == pytest.approx(1 / rate, rel=0.03)
    assert gaps.std() / mean == pytest.approx(1.0, abs=0.05)
    assert (gaps < mean).mean() == pytest.approx(1 - np.exp(-1), abs=0.02)
    assert np.array_equal(arrivals, sporadic.poisson_arrivals(rate, count, seed))  # the same for every engine
    assert not np.array_equal(arrivals[:10], sporadic.poisson_arrivals(rate, 10, seed + 1))


def test_poisson_latency_is_completion_minus_arrival_queueing_included():
    """Ten requests 0.5 ms apart on a 4 ms service: each waits for the ones before it, so request i
    completes no earlier than (i + 1) services after the first arrival."""
    service = 0.004

    def slow():
        time.sleep(service)
        return []

    origin = time.perf_counter() + 0.01
    offsets = np.arange(1, 11) * 0.0005
    into = sporadic.Sporadic()
    sporadic.serve(slow, origin + offsets, into)
    assert len(into.seconds) == 10
    for i, latency in enumerate(into.seconds):
        assert latency >= origin + offsets[0] + (i + 1) * service - (origin + offsets[i]) - 1e-6
    assert into.seconds[-1] > 3 * service and into.idle_wall > 0  # it waited for the first arrival
    spaced = sporadic.Sporadic()
    sporadic.serve(slow, time.perf_counter() + np.arange(1, 4) * 0.02, spaced)
    assert all(latency >= service for latency in spaced.seconds) and spaced.idle_wall >= 0.03


def test_poisson_serves_at_least_the_minimum_of_requests_in_chunks_for_each_engine():
    seen = {"a": 0, "b": 0}

    def count(name):
        def run():
            seen[name] += 1
            return []
        return run

    got = sporadic.run("poisson:5000", {"a": count("a"), "b": count("b")}, runs=3, warmup=1, block=5)
    chunks = -(-sporadic.POISSON_MIN_REQUESTS // sporadic.POISSON_CHUNK)
    assert [len(got[name].seconds) for name in "ab"] == [sporadic.POISSON_MIN_REQUESTS] * 2
    assert seen == {"a": 1 + chunks + sporadic.POISSON_MIN_REQUESTS, "b": 1 + chunks + sporadic.POISSON_MIN_REQUESTS}


# -- the suite and the reports -------------------------------------------------------------------
def test_run_loads_times_every_engine_after_gaps_with_its_back_to_back_median():
    results = suite.run_loads(tiny_model(), "tiny", ["gaps:2", "poisson:2000"], runs=3, warmup=1)
    assert [r.mode for r in results] == ["none", "gaps:2", "poisson:2000"]  # none added for the ratios
    plain, gaps, poisson = results
    engines = {"hobbit", "onnxruntime", NO_SPIN_ENGINE}
    for r in (gaps, poisson):
        assert r.mismatch is None and set(r.timings()) == engines and set(r.idle_cpu) == engines
        assert r.back_to_back == {e: t.median for e, t in plain.timings().items()}
        assert r.slowdown("hobbit") == pytest.approx(r.hobbit.median / plain.hobbit.median)
        assert r.idle_floor is not None and r.hobbit_ips is None
    assert gaps.runs == 3 and gaps.hobbit.p99 is None
    assert poisson.runs == sporadic.POISSON_MIN_REQUESTS and poisson.hobbit.p99 >= poisson.hobbit.p90
    text = gaps.format()
    assert "median / the same engine's back-to-back median: hobbit" in text and "idle cost" in text
    assert "p99" in poisson.format()
    d = poisson.to_dict()
    assert set(d["idle_cpu_per_idle_second"]) == engines and "p99" in d["hobbit_ms"]
    assert "p99" not in plain.to_dict()["hobbit_ms"]


def _sporadic_result(mode: str, **extra) -> BenchResult:
    return BenchResult("m", 30, 2, 1.0, 0.0, None, Timing(2.0, 1.0, 3.0, 5.0), Timing(4.0, 3.0, 6.0, 8.0),
                       mode=mode, onnxruntime_nospin=Timing(1.0, 1.0, 2.0, 4.0),
                       back_to_back={"hobbit": 1.0, "onnxruntime": 2.0, NO_SPIN_ENGINE: 1.0},
                       idle_cpu={"hobbit": 0.01, "onnxruntime": 0.9, NO_SPIN_ENGINE: 0.02}, idle_floor=0.002, **extra)


def test_sporadic_tables_rows_and_ratio_directions():
    gaps = _sporadic_result("gaps:10")
    poisson = _sporadic_result("poisson:50")
    bad = BenchResult("m", 30, 1, 1.0, 1.0, "differs", mode="gaps:1")
    table = report.sporadic_tables([bad, gaps, poisson]).splitlines()
    assert table[0].startswith("Sporadic requests, **gaps:MS**")
    assert "| model | threads | idle gap ms | engine | median ms | p90 ms | back-to-back median ms " \
           "| median / back-to-back | hobbit / engine, median | hobbit / engine, p90 | idle CPU s per idle s |" in table
    assert "| m | 1 | 1 | — | outputs disagree | — | — | — | — | — | — |" in table
    assert "| m | 2 | 10 | hobbit | 2.00 | 3.00 | 1.00 | 2.00 | — | — | 0.010 |" in table
    assert "| m | 2 | 10 | onnxruntime | 4.00 | 6.00 | 2.00 | 2.00 | 0.50 | 0.50 | 0.900 |" in table
    assert "| m | 2 | 10 | onnxruntime allow_spinning=0 | 1.00 | 2.00 | 1.00 | 1.00 | 2.00 | 1.50 | 0.020 |" in table
    assert f"| m | 2 | 10 | ({report.FLOOR_LABEL}) | — | — | — | — | — | — | 0.002 |" in table
    assert any(line.startswith("Sporadic requests, **poisson:RATE**: 30 requests per engine") for line in table)
    assert "| m | 2 | 50 | onnxruntime | 4.00 | 6.00 | 8.00 | 2.00 | 2.00 | 0.50 | 0.62 | 0.900 |" in table
    assert report.sporadic_tables([BenchResult("m", 30, 1, 1.0, 0.0, None, Timing(1, 1, 1), Timing(1, 1, 1))]) == ""
    assert report.load_tables([gaps]) == "" or "gaps" not in report.load_tables([gaps])


def test_cli_gaps_and_poisson_reports(tiny_path, tmp_path, capsys):  # noqa: F811
    out_md, out_json = tmp_path / "s.md", tmp_path / "s.json"
    argv = ["bench", "--model", tiny_path, "--runs", "2", "--warmup", "0", "--load", "gaps:1,poisson:3000",
            "--markdown", str(out_md), "--json", str(out_json)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Sporadic requests, **gaps:MS**" in out and "Sporadic requests, **poisson:RATE**" in out
    for engine in ("hobbit", "onnxruntime", "onnxruntime allow_spinning=0"):
        assert sum(line.startswith(f"| {tiny_path} | 1 | 1 | {engine} |") for line in out.splitlines()) == 1
        assert sum(line.startswith(f"| {tiny_path} | 1 | 3000 | {engine} |") for line in out.splitlines()) == 1
    doc = json.loads(out_json.read_text())
    assert [r["mode"] for r in doc["results"]] == ["none", "gaps:1", "poisson:3000"]
    assert doc["results"][1]["slowdown"]["hobbit"] > 0 and doc["settings"]["poisson_chunk"] == sporadic.POISSON_CHUNK
    md = out_md.read_text()
    assert "--load gaps:1,poisson:3000" in md and "Sporadic requests: each engine" in md
    assert "Sporadic requests, **poisson:RATE**" in md


def test_a_sweep_refuses_the_sporadic_conditions(tiny_path, capsys):  # noqa: F811
    assert main(["bench", "--model", tiny_path, "--sweep", "n=1,2", "--load", "gaps:10"]) == 2
    assert "not gaps:10" in capsys.readouterr().err


# -- OpenVINO beside onnxruntime ---------------------------------------------------------------
@pytest.mark.skipif(not OPENVINO, reason="openvino is not installed")
def test_openvino_is_timed_in_the_plain_table_beside_onnxruntime():
    plain, gaps = suite.run_loads(tiny_model(), "tiny", ["none", "gaps:1"], runs=3, warmup=1, openvino=True)
    assert plain.openvino is not None and plain.openvino_note is None and plain.openvino_max_abs_error < 1e-4
    assert plain.best_peer in ("onnxruntime", "openvino")
    best = min(plain.onnxruntime.median, plain.openvino.median)
    assert plain.peer_ratio == pytest.approx(plain.hobbit.median / best)
    assert gaps.openvino is None and "openvino" not in gaps.timings()  # a peer of the plain condition only
    table = report.markdown_table([plain]).splitlines()
    assert "| OpenVINO f32 median (p10–p90) ms | hobbit / best peer |" in table[0]
    assert table[2].split(" | ")[6] == f"{plain.peer_ratio:.2f}" and len(table) == 3
    assert "OpenVINO f32:" in plain.format() and "ratio hobbit/best peer" in plain.format()
    assert plain.to_dict()["peer_ratio"] == plain.peer_ratio


def test_without_openvino_the_table_says_so_in_one_line_and_works_as_before(monkeypatch):
    monkeypatch.setattr(suite, "openvino_core", lambda: None)
    one, = suite.run_loads(tiny_model(), "tiny", ["none"], runs=2, warmup=0, openvino=True)
    two = BenchResult("tiny", 2, 2, 1.0, 0.0, None, Timing(1, 1, 1), Timing(2, 2, 2), openvino_note=NOT_INSTALLED)
    assert one.openvino is None and one.openvino_note == NOT_INSTALLED and one.peer_ratio == one.ratio
    lines = report.markdown_table([one, two]).splitlines()
    assert "OpenVINO" not in lines[0] and lines[1].count("---") == 9
    assert [line for line in lines if "OpenVINO" in line] == [f"{NOT_INSTALLED}: onnxruntime is the only peer."]


@pytest.mark.parametrize("how", ["disagree", "fail"])
def test_openvino_that_disagrees_or_fails_is_named_and_not_timed(how, monkeypatch):
    def runner(core, model, threads, precision, names):
        assert precision == "f32"
        if how == "fail":
            raise RuntimeError("Unsupported operation\nmore detail")
        return lambda feeds: [np.full((4, 16), 7.0, np.float32)]

    monkeypatch.setattr(suite, "openvino_core", lambda: object())
    monkeypatch.setattr(suite, "openvino_runner", runner)
    r, = suite.run_loads(tiny_model(), "tiny", ["none"], runs=2, warmup=0, openvino=True)
    assert r.openvino is None and r.mismatch is None and r.hobbit is not None
    want = ("disagree with onnxruntime's" if how == "disagree"
            else "OpenVINO failed: RuntimeError: Unsupported operation")
    assert want in r.openvino_note and "\n" not in r.openvino_note
    notes = report.markdown_table([r]).splitlines()[-1]
    assert notes.startswith("tiny, 1 thread(s): ") and want in notes
