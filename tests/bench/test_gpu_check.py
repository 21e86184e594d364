"""scripts/gpu_check.sh on a machine with no GPU: each of its Python stages (the benchmark with
its untimed disagreeing rows and its unavailable PyTorch rows, the prebuild into the compile
cache, the sanitizer entry with a stand-in compute-sanitizer and without one, the report that
gathers one JSON and one markdown), the kernel-family table the device tests and the sanitizer
share, and the whole script on the fake CUDA driver (tests/runtime/fake_cuda.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.bench import gpu, gpu_sanitize, gpu_torch
from hobbit.bench.gpu import Row, bench_one, main, reference, run_bench
from hobbit.bench.gpu_check_report import gather, render
from hobbit.bench.gpu_check_report import main as report_main
from hobbit.bench.gpu_prebuild import prebuild
from hobbit.bench.gpu_table import DISAGREE, bench_json, markdown, row_json
from hobbit.errors import ConfigError, MissingDependencyError
from tests.helpers import make_model, rand
from tests.runtime import fake_cuda
from tests.runtime.device_families import FAMILIES, family, mismatches, run_once
from tests.runtime.device_families import reference as family_reference

ROOT = Path(__file__).resolve().parents[2]


def dense() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    return make_model(nodes, {"x": rand(1, 64, 48)}, ["y"], {"w": rand(48, 96, seed=1)})


def dense_file(folder: Path) -> str:
    path = folder / "dense.onnx"
    onnx.save(dense(), path)
    return str(path)


# -- the benchmark: no timing for a wrong answer; PyTorch rows unavailable, not a crash ---------
def test_a_row_whose_outputs_disagree_gets_no_timing(monkeypatch) -> None:
    """hobbit's outputs judged wrong (the first compare of the row): hobbit is not timed and its
    cells say so, while PyTorch, which agrees, is timed; against a wrong reference neither is."""
    fake_cuda.install(monkeypatch)
    real, calls = gpu.compare, []

    def first_disagrees(got, want, precision="fp32"):
        calls.append(precision)
        return (0.5, False) if len(calls) == 1 else real(got, want, precision)
    monkeypatch.setattr(gpu, "compare", first_disagrees)
    model = dense()
    row = bench_one("dense", model, 1, "cpu", runs=3, warmup=0, seconds=0.05, graphs=False)
    assert row.ok is False and row.hobbit_ms == [] and row.kernels > 0 and DISAGREE in row.note
    assert row.torch_ok and len(row.torch_ms) >= 3
    line = markdown([row]).splitlines()[-1]
    assert f"| {DISAGREE} |" in line and "| — | — |" in line  # no hobbit time, no ratios
    assert row_json(row)["hobbit_median_ms"] is None and row_json(row)["hobbit_over_eager"] is None

    monkeypatch.setattr(gpu, "compare", real)
    feeds, want = reference(model)
    row = bench_one("dense", model, 1, "cpu", 3, 0, 0.05, checked=(feeds, [w + 1 for w in want]), graphs=False)
    assert (row.ok, row.torch_ok, row.hobbit_ms, row.torch_ms) == (False, False, [], [])
    assert f"| {DISAGREE} | {DISAGREE} | — | — | — | — |" in markdown([row])


def test_torch_rows_are_unavailable_where_pytorch_cannot_run(monkeypatch, tmp_path) -> None:
    """main() on the fake driver with PyTorch lacking CUDA (this machine) or missing: hobbit's
    rows measured in both precisions, PyTorch's reported as unavailable, the JSON written."""
    fake_cuda.install(monkeypatch)
    monkeypatch.setattr(gpu, "torch_device", lambda: (None, "PyTorch 0.0 sees no CUDA device"))
    out = tmp_path / "bench.json"
    assert main(["--models", dense_file(tmp_path), "--batches", "1", "--precision", "fp32,tf32", "--runs", "3",
                 "--warmup", "0", "--seconds", "0.05", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["status"] == "ran" and [r["precision"] for r in data["rows"]] == ["fp32", "tf32"]
    for r in data["rows"]:
        assert r["ok"] and len(r["hobbit_ms"]) >= 3 and r["torch_ms"] == [] and r["torch_ok"] is None
        assert "PyTorch rows unavailable: PyTorch 0.0 sees no CUDA device" in r["torch_note"]

    def missing():
        raise MissingDependencyError("no torch")
    monkeypatch.setattr(gpu_torch, "import_torch", missing)
    assert gpu_torch.torch_device() == (None, "PyTorch is not installed")


def test_without_a_gpu_the_json_says_not_run(tmp_path) -> None:
    out = tmp_path / "bench.json"
    assert main(["--models", dense_file(tmp_path), "--json", str(out)]) == 2
    assert json.loads(out.read_text())["status"].startswith("not run: ")


def test_precisions_and_model_files(tmp_path) -> None:
    assert gpu.precisions_of("fp32,tf32") == ["fp32", "tf32"]
    with pytest.raises(ConfigError, match="bf16"):
        gpu.precisions_of("bf16")
    with pytest.raises(ConfigError, match="no such ONNX file"):
        gpu.models_of(str(tmp_path / "absent.onnx"))
    assert list(gpu.models_of(f"squeezenet1_1,{dense_file(tmp_path)}")) == ["squeezenet1_1", "dense"]


def test_prebuild_fills_the_cache_the_benchmark_reads(monkeypatch, tmp_path) -> None:
    """Worker processes compile the host reference and the GPU build; the benchmark's own
    compiles then add no entry: the keys agree across processes."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOBBIT_CACHE", "1")
    path = dense_file(tmp_path)
    built = prebuild(path, [1, 2], ["fp32"], jobs=2)
    assert [(b.batch, b.target, b.note) for b in built] == [(1, "host", ""), (1, "cuda", ""), (2, "host", ""),
                                                            (2, "cuda", "")]
    entries = sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name != "weights")
    assert len(entries) >= 4
    fake_cuda.install(monkeypatch)
    rows = run_bench(gpu.models_of(path), [1, 2], device=None, runs=3, warmup=0, seconds=0.05)
    assert all(r.ok and r.hobbit_ms for r in rows) and len(rows) == 2
    assert sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name != "weights") == entries


# -- the sanitizer entry --------------------------------------------------------------------
FAKE_SANITIZER = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Compute Sanitizer\\nVersion 2099.1.0 (stand-in)")
    sys.exit(0)
opts = {{}}
while args and args[0].startswith("--"):
    opts[args[0]], args = args[1], args[2:]
tool, family = opts["--tool"], args[-1]
with open(os.environ["FAKE_SANITIZER_LOG"], "a") as log:
    log.write(f"{{tool}} {{family}} HOBBIT_CUDA_GRAPH={{os.environ.get('HOBBIT_CUDA_GRAPH')}}\\n")
done = subprocess.run(args)
if family in os.environ.get("FAKE_SANITIZER_ERRORS", "").split(","):
    print("========= Invalid __global__ read of size 4 bytes\\n========= ERROR SUMMARY: 1 error")
    sys.exit(int(opts["--error-exitcode"]))
print("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" if tool == "racecheck"
      else "========= ERROR SUMMARY: 0 errors")
sys.exit(done.returncode)
"""


def fake_sanitizer(folder: Path) -> Path:
    path = folder / "compute-sanitizer"
    path.write_text(FAKE_SANITIZER.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_parse_the_tools_summaries() -> None:
    parse = gpu_sanitize.parse
    assert parse("memcheck", 0, "ok\n========= ERROR SUMMARY: 0 errors\n") == ("clean", 0, None, [])
    races = "========= Error: Race reported between Write access at k+0x10\n" \
            "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n"
    status, errors, warnings, detail = parse("racecheck", gpu_sanitize.ERROR_EXIT, races)
    assert (status, errors, warnings) == ("errors", 1, 2) and "Race reported" in detail[0]
    assert parse("memcheck", 3, "pool: MISMATCH\n========= ERROR SUMMARY: 0 errors\n")[0] == "failed"
    status, errors, _, detail = parse("memcheck", 255, "========= Error: Target application terminated\n")
    assert (status, errors) == ("failed", None) and "terminated" in detail[0]


def test_sanitizer_not_available_is_recorded_not_failed(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(gpu_sanitize, "_candidates", lambda: [str(tmp_path / "absent")])
    out = tmp_path / "sanitizer.json"
    assert gpu_sanitize.main(["--families", "pool,norm", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert not data["available"] and "nvidia-cuda-sanitizer-api" in data["reason"]
    assert {(r["family"], r["tool"], r["status"]) for r in data["results"]} == {
        (f, t, "not available") for f in ("pool", "norm") for t in ("racecheck", "memcheck")}


def test_sanitizer_runs_each_family_under_each_tool(monkeypatch, tmp_path) -> None:
    """The stand-in sanitizer runs the real family entry on the fake driver; it reports an
    error for `pool` under both tools, and sees plain launches (HOBBIT_CUDA_GRAPH=0)."""
    log = tmp_path / "log"
    monkeypatch.setenv("COMPUTE_SANITIZER", str(fake_sanitizer(tmp_path)))
    monkeypatch.setenv("HOBBIT_TEST_FAKE_CUDA", "1")
    monkeypatch.setenv("FAKE_SANITIZER_LOG", str(log))
    monkeypatch.setenv("FAKE_SANITIZER_ERRORS", "pool")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.chdir(ROOT)
    out = tmp_path / "sanitizer.json"
    assert gpu_sanitize.main(["--families", "pool,elementwise", "--jobs", "2", "--out", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["available"] and "2099.1.0" in data["version"]
    got = {(r["family"], r["tool"]): (r["status"], r["errors"]) for r in data["results"]}
    assert got == {("pool", "racecheck"): ("errors", 1), ("pool", "memcheck"): ("errors", 1),
                   ("elementwise", "racecheck"): ("clean", 0), ("elementwise", "memcheck"): ("clean", 0)}
    assert sorted(log.read_text().splitlines()) == sorted(
        f"{t} {f} HOBBIT_CUDA_GRAPH=0" for f in ("pool", "elementwise") for t in ("racecheck", "memcheck"))


# -- the kernel families --------------------------------------------------------------------
@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_family_matches_its_reference_in_the_emulation(name) -> None:
    """The table the device spends its minutes on is right before it gets there: each family's
    model compiles for sm_90 (its tensor-core instruction in the code) and its grid emulation
    meets the family's tolerance against its reference."""
    fam = family(name)
    model, feeds = fam.build()
    gm = hobbit.compile(model, target="cuda:sm_90", precision=fam.precision)
    assert fam.marker in gm.device_code
    assert mismatches(fam, gm.emulate(feeds), family_reference(fam, model, feeds)) == []


def test_family_run_on_the_fake_driver_and_its_mismatch(monkeypatch) -> None:
    driver = fake_cuda.install(monkeypatch)
    monkeypatch.setenv("HOBBIT_CUDA_GRAPH", "0")
    assert run_once("mma_bf16_matmul") == []
    assert driver.launched and "cuGraphLaunch" not in driver.names()
    fam = family("pool")
    model, feeds = fam.build()
    want = family_reference(fam, model, feeds)
    assert mismatches(fam, [want[0], want[1] + 1e-3], want)[0].startswith("output 1: max abs error 1.000e-03")
    assert "expected" in mismatches(fam, [want[0]], want)[0]
    with pytest.raises(ConfigError, match="no kernel family 'gemm'"):
        family("gemm")


# -- the report -----------------------------------------------------------------------------
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1"
skipped="1" tests="3"><testcase classname="tests.runtime.test_cuda_device" name="test_family[pool]"/>
<testcase classname="tests.runtime.test_cuda_device" name="test_family[norm]"><failure message="output 1: max abs
error 3e-2">trace</failure></testcase><testcase classname="t" name="s"><skipped message="no"/></testcase>
</testsuite></testsuites>"""


def test_report_gathers_one_json_and_one_markdown(tmp_path) -> None:
    (tmp_path / "stages.tsv").write_text("tests\t1\t40\t150\nsanitize\t0\t30\t120\nprebuild\t0\t90\t240\n"
                                         "bench\t124\t345\t345\n")
    (tmp_path / "gpu.txt").write_text("name, driver_version\nNVIDIA H100, 580.1\n")
    (tmp_path / "tests.xml").write_text(JUNIT)
    checks = [gpu_sanitize.Check("pool", "racecheck", "clean", 0, 0),
              gpu_sanitize.Check("pool", "memcheck", "errors", 2, detail=["Invalid __global__ read"])]
    sanitizer = gpu_sanitize.report(gpu_sanitize.Sanitizer("/x/compute-sanitizer", "Version 1"), checks)
    (tmp_path / "sanitizer.json").write_text(json.dumps(sanitizer))
    rows = [Row("vgg16", 32, [2.0, 2.1, 2.2], [1.0, 1.1, 1.2], 1e-5, 1e-5, True, True, precision="tf32"),
            Row("resnet50", 1, [], [3.0] * 3, 2e-3, 1e-5, False, True, note=f"hobbit: {DISAGREE}")]
    (tmp_path / "bench.json").write_text(json.dumps(bench_json(rows, "GPU: H100", "ran")))
    assert report_main([str(tmp_path)]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert not report["ok"]
    assert [(s["name"], s["status"]) for s in report["stages"]] == [
        ("tests", "failed (exit 1)"), ("sanitize", "ok"), ("prebuild", "ok"), ("bench", "timed out")]
    t = report["tests"]
    assert (t["total"], t["passed"], t["failed"], t["skipped"]) == (3, 1, 1, 1)
    assert t["failures"][0]["test"].endswith("test_family[norm]")
    assert report["bench"]["rows"][0]["hobbit_over_eager"] == pytest.approx(2.1 / 1.1)
    text = (tmp_path / "gpu_check.md").read_text()
    assert text.startswith("# GPU check: NOT all passed") and "NVIDIA H100" in text
    assert "| bench | timed out | 345 | 345 |" in text and "test_family[norm]" in text
    assert "| pool | clean | errors (2 errors): Invalid __global__ read |" in text
    assert "| resnet50 | 1 | fp32 | outputs disagree |" in text and "| 1.91 |" in text


def test_report_of_stages_that_left_nothing(tmp_path) -> None:
    (tmp_path / "stages.tsv").write_text("tests\t137\t150\t150\n")
    report = gather(tmp_path)
    assert not report["ok"] and report["tests"]["status"].startswith("missing")
    text = render(report)
    assert "Device tests: missing" in text and "Sanitizer: missing" in text and "Benchmark: missing" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not gather(empty)["ok"] and gather(empty)["stages"] == []


# -- the whole script -----------------------------------------------------------------------
def test_the_script_end_to_end_on_the_fake_driver(tmp_path) -> None:
    """scripts/gpu_check.sh with every stage cut small: tests (which skip without a GPU), the
    stand-in sanitizer on one family, the prebuild and the benchmark of a tiny model on the
    fake driver; one JSON and one markdown come out, saying all passed."""
    out = tmp_path / "out"
    env = {**os.environ, "HOBBIT_TEST_FAKE_CUDA": "1", "PYTHON": sys.executable,
           "COMPUTE_SANITIZER": str(fake_sanitizer(tmp_path)), "FAKE_SANITIZER_LOG": str(tmp_path / "log"),
           "MODELS": dense_file(tmp_path), "BATCHES": "1", "PRECISIONS": "fp32",
           "TESTS": "tests/runtime/test_cuda_device.py",
           "TEST_WORKERS": "1", "SANITIZE_FAMILIES": "elementwise", "SANITIZE_JOBS": "2", "PREBUILD_JOBS": "1",
           "BENCH_SECONDS": "0.05", "HOBBIT_CACHE_DIR": str(tmp_path / "cache"), "HOBBIT_CACHE": "1",
           "TOTAL_BUDGET": "400"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["ok"] and [s["name"] for s in report["stages"]] == ["tests", "sanitize", "prebuild", "bench"]
    assert report["tests"]["status"] == "ran" and report["tests"]["failed"] == 0
    results = report["sanitizer"]["results"]
    assert [(r["tool"], r["status"]) for r in results] == [("racecheck", "clean"), ("memcheck", "clean")]
    row, = report["bench"]["rows"]
    assert row["model"] == "dense" and row["ok"] and row["hobbit_ms"]
    assert "PyTorch rows unavailable" in row["torch_note"] and row["compile_s"] < 5  # the prebuild's cache hit
    text = (out / "gpu_check.md").read_text()
    assert text.startswith("# GPU check: all passed") and "| dense | 1 | fp32 |" in text
    assert np.isfinite(row["hobbit_median_ms"])
