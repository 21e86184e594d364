"""The node-test runner behind `hobbit conformance` and CONFORMANCE.md."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from hobbit import conformance
from hobbit.cli.main import main
from hobbit.conformance import Outcome
from hobbit.errors import ConfigError


_NODE_TESTS = functools.cache(conformance.node_tests)  # seconds to load; read once per test session


@pytest.fixture(autouse=True)
def _loaded_once(monkeypatch) -> None:
    """The node tests are loaded once here and shared (the workers still load their own)."""
    monkeypatch.setattr(conformance, "node_tests", _NODE_TESTS)


def _cases(*names: str) -> list:
    by_name = {case.name: case for case in _NODE_TESTS()}
    return [by_name[name] for name in names]


def test_run_suite_reports_passes_and_reasons() -> None:
    cases = _cases("test_abs", "test_basic_deform_conv_with_padding")
    results = conformance.run_suite("hobbit", cases)
    assert results["test_abs"] == Outcome(True, "")
    failed = results["test_basic_deform_conv_with_padding"]
    assert not failed.passed and "DeformConv" in failed.reason and "not supported" in failed.reason


def test_markdown_groups_expanded_tests_under_their_operator() -> None:
    cases = _cases("test_selu", "test_selu_expanded_ver18", "test_abs")
    hobbit = {"test_selu": Outcome(True), "test_selu_expanded_ver18": Outcome(False, "ShapeError: x"),
              "test_abs": Outcome(True)}
    ort = {name: Outcome(True) for name in hobbit}
    text = conformance.markdown(cases, hobbit, ort, seconds=1.0)
    assert "| hobbit, of the tests onnxruntime passes | 3 | 2 (66.7%) |" in text
    assert "| Selu (expanded) | 1 | 1 | 0 | `test_selu_expanded_ver18`: ShapeError: x |" in text
    assert "| Abs | 1 | 1 | 1 |  |" in text


def test_expected_failures_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "expected.txt"
    conformance.write_expected_failures({"test_b": Outcome(False, "x"), "test_a": Outcome(False, "y"),
                                         "test_c": Outcome(True)}, path)
    assert conformance.read_expected_failures(path) == ["test_a", "test_b"]


def test_expected_failures_written_after_a_filter_keep_the_tests_not_run(tmp_path: Path) -> None:
    path = tmp_path / "expected.txt"
    path.write_text("test_old\ntest_fixed\n")
    conformance.write_expected_failures({"test_fixed": Outcome(True), "test_new": Outcome(False, "x")}, path)
    assert conformance.read_expected_failures(path) == ["test_new", "test_old"]


def test_verdict_sorts_failures_by_the_list() -> None:
    results = {"test_a": Outcome(False, "x"), "test_b": Outcome(False, "y"), "test_c": Outcome(True),
               "test_d": Outcome(True)}
    found = conformance.verdict(results, ["test_a", "test_c", "test_z"])
    assert (found.tests, found.passed) == (4, 2)
    assert (found.expected, found.unexpected, found.fixed) == (["test_a"], ["test_b"], ["test_c"])
    text = found.format("list.txt")
    assert text.startswith("hobbit passed 2 of 4 node tests; 2 failed: "
                           "1 on the expected-failure list (list.txt), 1 not")
    assert "not expected to fail: test_b" in text and "but passed (remove them" in text and "test_c" in text


# -- the worker: crashes and time limits -------------------------------------------------
_FAKE_BACKEND = '''
import os, signal, time
import onnxruntime.backend

def prepare(model, device="CPU", **kwargs):
    """onnxruntime, except that an Abs test {behaviour}."""
    if model.graph.node[0].op_type == "Abs":
        {action}
    return onnxruntime.backend.prepare(model, device, **kwargs)
'''


def _fake_backend(tmp_path: Path, monkeypatch, behaviour: str, action: str) -> str:
    (tmp_path / "fake_backend.py").write_text(_FAKE_BACKEND.format(behaviour=behaviour, action=action))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return "fake_backend"


def test_a_case_past_the_time_limit_is_failed_and_the_run_goes_on(tmp_path: Path, monkeypatch) -> None:
    backend = _fake_backend(tmp_path, monkeypatch, "hangs", "time.sleep(600)")
    seen = []
    results = conformance.run_suite(backend, _cases("test_abs", "test_acos"), lambda n, o: seen.append(n), timeout=2)
    assert results == {"test_abs": Outcome(False, "Timeout: timed out after 2 s"), "test_acos": Outcome(True)}
    assert seen == ["test_abs", "test_acos"]


def test_a_case_that_kills_the_worker_is_failed_and_the_run_goes_on(tmp_path: Path, monkeypatch) -> None:
    backend = _fake_backend(tmp_path, monkeypatch, "crashes", "os.kill(os.getpid(), signal.SIGSEGV)")
    results = conformance.run_suite(backend, _cases("test_acos", "test_abs", "test_add"))
    assert results == {"test_acos": Outcome(True), "test_add": Outcome(True),
                       "test_abs": Outcome(False, "Crash: the process died (signal SIGSEGV)")}


def test_a_worker_that_cannot_start_is_one_error(monkeypatch) -> None:
    with pytest.raises(ConfigError, match="worker for backend 'no_such_backend_module' exited .* before running"):
        conformance.run_suite("no_such_backend_module", _cases("test_abs"))


# -- `hobbit conformance`: arguments and exit status -------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--filter", "("], "argument --filter: not a valid regular expression"),
    (["--timeout", "0"], "argument --timeout: expected a number of seconds > 0, got '0'"),
    (["--timeout", "soon"], "argument --timeout: expected a number of seconds > 0, got 'soon'"),
    (["--filter", "^no_such_test$"], "--filter '^no_such_test$' matches none of the"),
])
def test_bad_arguments_exit_2(argv, message, capsys) -> None:
    assert main(["conformance"] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.fixture
def listing(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "expected_failures.txt"
    path.write_text("# header\ntest_acos\ntest_add\n")
    monkeypatch.setattr(conformance, "EXPECTED_FAILURES", path)
    return path


def _results(monkeypatch, outcomes: dict[str, Outcome]) -> dict:
    """run_suite replaced by fixed outcomes; the call's arguments are recorded."""
    calls = {}

    def run_suite(backend, cases, on_case=None, timeout=None, options=None):
        calls.update(backend=backend, cases=[c.name for c in cases], timeout=timeout, options=options)
        for name, outcome in outcomes.items():
            on_case(name, outcome)
        return outcomes
    monkeypatch.setattr(conformance, "run_suite", run_suite)
    return calls


def test_exit_1_when_a_test_fails_that_is_not_expected_to(listing, monkeypatch, capsys) -> None:
    calls = _results(monkeypatch, {"test_abs": Outcome(False, "ShapeError: x"), "test_acos": Outcome(False, "y")})
    assert main(["conformance", "--filter", "^test_a(bs|cos)$", "--timeout", "7.5"]) == 1
    assert calls == {"backend": "hobbit", "cases": ["test_abs", "test_acos"], "timeout": 7.5,
                     "options": {"target": "host"}}
    out = capsys.readouterr().out
    assert "FAIL  test_abs  ShapeError: x" in out and "not expected to fail: test_abs\n" in out


def test_exit_0_when_only_listed_tests_fail_and_listed_passes_are_named(listing, monkeypatch, capsys) -> None:
    _results(monkeypatch, {"test_abs": Outcome(True), "test_acos": Outcome(False, "y"), "test_add": Outcome(True)})
    assert main(["conformance", "--filter", "^test_a(bs|cos|dd)$"]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 node tests; 1 failed: 1 on the expected-failure list" in out
    assert "on the expected-failure list but passed" in out and out.rstrip().endswith("test_add")


def test_write_expected_failures_exits_0_and_keeps_the_rest(listing, monkeypatch, capsys) -> None:
    _results(monkeypatch, {"test_abs": Outcome(False, "x"), "test_add": Outcome(True)})
    assert main(["conformance", "--filter", "^test_a(bs|dd)$", "--write-expected-failures"]) == 0
    assert conformance.read_expected_failures(listing) == ["test_abs", "test_acos"]


def test_a_real_run_on_hobbit(tmp_path: Path, monkeypatch, capsys) -> None:
    """End to end with no expected-failure list: a failing test is unexpected, so exit 1."""
    monkeypatch.setattr(conformance, "EXPECTED_FAILURES", tmp_path / "missing.txt")
    assert main(["conformance", "--filter", "^test_(abs|basic_deform_conv_with_padding)$"]) == 1
    out = capsys.readouterr().out
    assert "pass  test_abs" in out and "FAIL  test_basic_deform_conv_with_padding  Unsupported" in out
    assert "(none found at" in out and "not expected to fail: test_basic_deform_conv_with_padding" in out


def test_the_target_reaches_the_worker_processes() -> None:
    """Options go to the workers' compile: a target the host cannot run fails every case there."""
    cases = [c for c in conformance.node_tests() if c.name == "test_relu"]
    outcomes = conformance.run_suite("hobbit", cases, options={"target": "aarch64-linux-gnu:neoverse-n1"})
    assert not outcomes["test_relu"].passed
    assert "TargetError" in outcomes["test_relu"].reason
    assert conformance.run_suite("hobbit", cases, options={"target": "x86-64-v3"})["test_relu"].passed


def test_cli_conformance_takes_a_target(listing, monkeypatch, capsys) -> None:
    calls = _results(monkeypatch, {"test_abs": Outcome(True)})
    assert main(["conformance", "--filter", "^test_abs$", "--target", "x86-64-v3"]) == 0
    assert calls["options"]["target"].startswith("x86_64-unknown-linux-gnu:x86-64-v3:+sse3")
    assert main(["conformance", "--filter", "^test_abs$", "--target", "aarch64-linux-gnu:neoverse-n1"]) == 2
    assert "cannot run on this host" in capsys.readouterr().err


# -- the committed CONFORMANCE.md --------------------------------------------------------
_CONFORMANCE_MD = Path(__file__).resolve().parent.parent / "CONFORMANCE.md"


def _hobbit_columns(text: str) -> tuple[tuple[int, int], dict[str, tuple[int, int]], set[str]]:
    """From CONFORMANCE.md: hobbit's (tests, passed) total, each operator row's (tests, hobbit
    passed), and the names of the tests its 'hobbit fails' cells list."""
    total = next(tuple(map(int, line.split("|")[2:4])) for line in text.splitlines()
                 if line.startswith("| hobbit |"))
    table = text.split("## Per operator", 1)[1]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    per_op = {cells[0][2:]: (int(cells[1]), int(cells[3])) for cells in rows}
    failing = {name for cells in rows for name in re.findall(r"`(test_\w+)`:", cells[4])}
    return total, per_op, failing


def test_committed_conformance_md_agrees_with_the_expected_failures() -> None:
    """CONFORMANCE.md is generated (`hobbit conformance --markdown CONFORMANCE.md`); its hobbit
    columns must say what the suite enforces: every installed node test counted, and hobbit failing
    exactly the tests on tests/onnx_backend/expected_failures.txt (tests/test_onnx_backend.py fails
    when that list is wrong either way). A test that starts passing or failing, or a new onnx
    with other node tests, makes this fail until the file is regenerated."""
    cases = _NODE_TESTS()
    expected = set(conformance.read_expected_failures())
    total, per_op, failing = _hobbit_columns(_CONFORMANCE_MD.read_text())
    regenerate = "stale: regenerate it with `hobbit conformance --markdown CONFORMANCE.md`"
    assert sorted(failing - expected) == [], f"CONFORMANCE.md lists failures that now pass; {regenerate}"
    assert sorted(expected - failing) == [], f"CONFORMANCE.md misses expected failures; {regenerate}"
    assert total == (len(cases), len(cases) - len(expected)), regenerate
    by_name = {case.name: case for case in cases}
    want: dict[str, list[int]] = {}
    for case in cases:
        counts = want.setdefault(conformance.operator(case, by_name), [0, 0])
        counts[0] += 1
        counts[1] += case.name not in expected
    assert per_op == {op: tuple(counts) for op, counts in want.items()}, regenerate
