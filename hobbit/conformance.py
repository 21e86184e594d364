"""Run the ONNX backend node test suite against hobbit and onnxruntime.

The node tests ship with the onnx package as Python cases (model + inputs +
expected outputs); `onnx.backend.test.loader` builds them in memory. Each case
is judged exactly as `onnx.backend.test.BackendTest` judges it (same output
comparison, same tolerances), so the figures here and the CI test agree.
`hobbit conformance` writes CONFORMANCE.md from these results and can rewrite
the checked-in expected-failure list.

Cases run in a worker process, one at a time: a case that crashes the worker or
runs past the time limit is recorded as failed, the worker is replaced, and the
run goes on with the cases after it."""

from __future__ import annotations

import collections
import contextlib
import importlib
import io
import json
import os
import platform
import selectors
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx

from hobbit.errors import ConfigError

if TYPE_CHECKING:  # onnx.backend.test takes 40 ms to import; the CLI imports this module for every command
    from onnx.backend.test.case.test_case import TestCase

EXPECTED_FAILURES = Path(__file__).resolve().parent.parent / "tests" / "onnx_backend" / "expected_failures.txt"
BACKENDS = {"hobbit": "hobbit.onnx_backend", "onnxruntime": "onnxruntime.backend"}
# Measured: with the compile cache off, on 2 cores shared with other work, the slowest node
# test on hobbit took 7.0 s (test_attention_3d_diff_heads_with_past_and_present; all 1884
# in 589 s). A minute leaves room for a slower machine and still ends a hang.
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Outcome:
    passed: bool
    reason: str = ""


def node_tests() -> list[TestCase]:
    """All node test cases of the installed onnx package, sorted by name."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return sorted(load_model_tests(kind="node"), key=lambda c: c.name)


def operator(case: TestCase, by_name: dict[str, TestCase]) -> str:
    """The operator a test is about: its single node's op type; for an `_expanded` test
    (the function body of an op written out as nodes), the op of its unexpanded twin."""
    ops = sorted({node.op_type for node in case.model.graph.node})
    if "_expanded" in case.name:
        twin = by_name.get(case.name.split("_expanded")[0])
        if twin is not None and len(twin.model.graph.node) == 1:
            return f"{twin.model.graph.node[0].op_type} (expanded)"
    return ", ".join(ops) or "(no node)"


def run_case(backend: Any, case: TestCase, options: dict[str, Any] | None = None) -> Outcome:
    """Prepare the case's model on `backend` (with `options` for its prepare(), e.g. hobbit's
    target) and check every data set like BackendTest does."""
    from onnx.backend.test.runner import Runner

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = backend.prepare(case.model, "CPU", **(options or {}))
            for inputs, expected in case.data_sets:
                # Some cases (Cast, bfloat16) store their data as TensorProtos, as BackendTest allows.
                inputs = [_as_array(x) for x in inputs]
                expected = [_as_array(x) for x in expected]
                outputs = list(rep.run(inputs))
                Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
    except Exception as e:  # noqa: BLE001 - every failure is a test outcome to report
        message = " ".join(str(e).split())
        return Outcome(False, f"{type(e).__name__}: {message}"[:240])
    return Outcome(True)


def _as_array(item: Any) -> Any:
    """Node cases hold TensorProtos for dtypes numpy lacks natively (bfloat16, ...), as BackendTest reads them."""
    return onnx.numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def run_suite(backend: str, cases: list[TestCase],
              on_case: Callable[[str, Outcome], None] | None = None,
              timeout: float = DEFAULT_TIMEOUT, options: dict[str, Any] | None = None) -> dict[str, Outcome]:
    """Run the cases on `backend` ("hobbit", "onnxruntime", or the name of a module with the
    onnx.backend.base.Backend functions) in a worker process; `options` (JSON values) go to
    the backend's prepare().

    A test that crashes the process (a segfault is a bug, but the report must survive it)
    is recorded as failed with the signal; one that runs past `timeout` seconds (from its
    start, not counting the worker's start-up) as timed out, and its worker is killed. A
    fresh worker then goes on with the remaining tests."""
    results: dict[str, Outcome] = {}
    pending = [c.name for c in cases]
    while pending:
        with _Worker(backend, pending, options or {}) as worker:
            for name, outcome in worker.outcomes(timeout):
                results[name] = outcome
                if on_case is not None:
                    on_case(name, outcome)
        if pending[0] not in results:  # it never got to the first case: a fresh one would not either
            raise ConfigError(f"the conformance worker for backend {backend!r} exited "
                              f"({_exit_reason(worker.status)}) before running a test; its output above says why")
        pending = [n for n in pending if n not in results]
    return results


class _Worker:
    """One worker process running the named cases in order. It reports 'start NAME' before a
    case and 'done NAME PASSED REASON' after it, so the case that hangs or kills it is known."""

    def __init__(self, backend: str, names: list[str], options: dict[str, Any]):
        self.status = 0
        self.process = subprocess.Popen([sys.executable, "-m", "hobbit.conformance", backend, json.dumps(options)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.process.stdin.write("".join(f"{name}\n" for name in names).encode())
        self.process.stdin.close()
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        """Always reaped, and killed first if still running (a timeout, Ctrl-C, an error here)."""
        self._selector.close()
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()

    def outcomes(self, timeout: float) -> Iterator[tuple[str, Outcome]]:
        current = None
        while True:
            try:
                line = self._next_line(timeout if current is not None else None)
            except TimeoutError:
                yield current, Outcome(False, f"Timeout: timed out after {timeout:g} s")
                return
            if line is None:
                self.status = self.process.wait()
                if current is not None:
                    yield current, Outcome(False, f"Crash: the process died ({_exit_reason(self.status)})")
                return
            kind, name, *rest = line.split("\t", 3)
            if kind == "start":
                current = name
            else:
                yield name, Outcome(rest[0] == "1", rest[1])
                current = None

    def _next_line(self, timeout: float | None) -> str | None:
        """The worker's next line; None at the end of its output; TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and (wait <= 0 or not self._selector.select(wait)):
                raise TimeoutError
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


def _exit_reason(status: int) -> str:
    if status < 0:
        return f"signal {signal.Signals(-status).name}"
    return f"exit status {status}"


def _worker(backend_name: str, options: dict[str, Any]) -> None:
    """Run the named tests read from stdin: a tab-separated start line and result line each,
    flushed. Ctrl-C is left to the parent, which kills this process, so a terminal's SIGINT
    to the whole process group prints no second traceback from here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    backend = importlib.import_module(BACKENDS.get(backend_name, backend_name))
    if backend_name == "onnxruntime":
        import onnxruntime
        onnxruntime.set_default_logger_severity(3)
    wanted = [line.strip() for line in sys.stdin if line.strip()]
    by_name = {c.name: c for c in node_tests()}
    for name in wanted:
        print(f"start\t{name}", flush=True)
        outcome = run_case(backend, by_name[name], options)
        reason = outcome.reason.replace("\t", " ").replace("\n", " ")
        print(f"done\t{name}\t{int(outcome.passed)}\t{reason}", flush=True)


def read_expected_failures(path: Path = EXPECTED_FAILURES) -> list[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def write_expected_failures(hobbit: dict[str, Outcome], path: Path = EXPECTED_FAILURES) -> None:
    """The list from these results; entries for tests that were not run (a --filter) are kept."""
    kept = [name for name in read_expected_failures(path) if name not in hobbit]
    failing = sorted(set(kept) | {name for name, outcome in hobbit.items() if not outcome.passed})
    header = ("# ONNX backend node tests hobbit is known to fail (tests/test_onnx_backend.py).\n"
              "# This list may only shrink: a listed test that starts passing fails CI until removed.\n"
              "# Regenerate with: hobbit conformance --write-expected-failures\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join(f"{name}\n" for name in failing))


@dataclass(frozen=True)
class Verdict:
    """hobbit's results read against the expected-failure list. Only `unexpected` makes
    `hobbit conformance` exit 1: a listed test that now passes is good news, reported so the
    list can shrink (tests/test_onnx_backend.py is what enforces that in CI)."""

    tests: int
    passed: int
    expected: list[str]  # failed and listed
    unexpected: list[str]  # failed and not listed
    fixed: list[str]  # listed, yet passed

    def format(self, listing: Path) -> str:
        failed = len(self.expected) + len(self.unexpected)
        lines = [f"hobbit passed {self.passed} of {self.tests} node tests; {failed} failed: "
                 f"{len(self.expected)} on the expected-failure list ({listing}), {len(self.unexpected)} not"]
        if self.unexpected:
            lines.append(f"not expected to fail: {', '.join(self.unexpected)}")
        if self.fixed:
            lines.append(f"on the expected-failure list but passed (remove them, or run with "
                         f"--write-expected-failures): {', '.join(self.fixed)}")
        return "\n".join(lines)


def verdict(hobbit: dict[str, Outcome], expected_failures: list[str]) -> Verdict:
    listed = set(expected_failures)
    failed = sorted(name for name, outcome in hobbit.items() if not outcome.passed)
    return Verdict(len(hobbit), len(hobbit) - len(failed), [n for n in failed if n in listed],
                   [n for n in failed if n not in listed],
                   sorted(n for n, outcome in hobbit.items() if outcome.passed and n in listed))


def summary(hobbit: dict[str, Outcome], ort: dict[str, Outcome]) -> dict[str, int | float]:
    ort_passed = {n for n, o in ort.items() if o.passed}
    hobbit_passed = {n for n, o in hobbit.items() if o.passed}
    both = hobbit_passed & ort_passed
    return {"tests": len(hobbit), "hobbit": len(hobbit_passed), "onnxruntime": len(ort_passed),
            "hobbit_of_onnxruntime": len(both),
            "share": len(both) / max(1, len(ort_passed))}


def markdown(cases: list[TestCase], hobbit: dict[str, Outcome], ort: dict[str, Outcome],
             seconds: float) -> str:
    """CONFORMANCE.md: totals, then one row per operator with the failing tests and why."""
    from hobbit.bench.report import machine_info

    machine = machine_info()
    s = summary(hobbit, ort)
    by_name = {case.name: case for case in cases}
    by_op: dict[str, list[TestCase]] = collections.defaultdict(list)
    for case in cases:
        by_op[operator(case, by_name)].append(case)
    lines = [
        "# ONNX backend node tests: hobbit and onnxruntime",
        "",
        f"Generated by `hobbit conformance --markdown CONFORMANCE.md` in {seconds:.0f} s on "
        f"{machine['cpu']} ({platform.system()}, {machine['cores']} cores), {machine['date']}: "
        f"hobbit {machine['hobbit']}, onnxruntime {machine['onnxruntime']}, onnx {onnx.__version__}, "
        f"numpy {np.__version__}.",
        "Each test is judged as `onnx.backend.test.BackendTest` judges it (same comparison, same tolerances).",
        "",
        "| | tests | passed |",
        "| --- | ---: | ---: |",
        f"| onnxruntime | {s['tests']} | {s['onnxruntime']} |",
        f"| hobbit | {s['tests']} | {s['hobbit']} |",
        f"| hobbit, of the tests onnxruntime passes | {s['onnxruntime']} | "
        f"{s['hobbit_of_onnxruntime']} ({100 * s['share']:.1f}%) |",
        "",
        "## Per operator",
        "",
        "| operator | tests | onnxruntime | hobbit | hobbit fails (why) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for op in sorted(by_op):
        group = by_op[op]
        ort_ok = sum(ort[c.name].passed for c in group)
        hobbit_ok = sum(hobbit[c.name].passed for c in group)
        fails = "<br>".join(f"`{c.name}`: {_cell(hobbit[c.name].reason)}"
                            for c in group if not hobbit[c.name].passed)
        lines.append(f"| {op} | {len(group)} | {ort_ok} | {hobbit_ok} | {fails} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def measure(cases: list[TestCase], progress: Callable[[str], None] | None = None,
            timeout: float = DEFAULT_TIMEOUT,
            options: dict[str, Any] | None = None) -> tuple[dict[str, Outcome], dict[str, Outcome], float]:
    """Run the cases on hobbit (with `options` for compile) and on onnxruntime, each case under
    the same time limit."""
    start = time.perf_counter()
    counter = {"done": 0}

    def tick(name: str, outcome: Outcome) -> None:
        counter["done"] += 1
        if progress is not None and counter["done"] % 100 == 0:
            progress(f"{counter['done']}/{2 * len(cases)} test runs")

    hobbit = run_suite("hobbit", cases, tick, timeout, options)
    ort = run_suite("onnxruntime", cases, tick, timeout)
    return hobbit, ort, time.perf_counter() - start


if __name__ == "__main__":
    _worker(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
