"""Run the ONNX backend node test suite against hobbit and onnxruntime.

The node tests ship with the onnx package as Python cases (model + inputs +
expected outputs); `onnx.backend.test.loader` builds them in memory. Each case
is judged exactly as `onnx.backend.test.BackendTest` judges it (same output
comparison, same tolerances), so the figures here and the CI test agree.
`hobbit conformance` writes CONFORMANCE.md from these results and can rewrite
the checked-in expected-failure list."""

from __future__ import annotations

import collections
import contextlib
import io
import platform
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx.backend.test.case.test_case import TestCase

EXPECTED_FAILURES = Path(__file__).resolve().parent.parent / "tests" / "onnx_backend" / "expected_failures.txt"


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


def run_case(backend: Any, case: TestCase) -> Outcome:
    """Prepare the case's model on `backend` and check every data set like BackendTest does."""
    from onnx.backend.test.runner import Runner

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = backend.prepare(case.model, "CPU")
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


def _as_array(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


def _as_array(item: Any) -> Any:
    """Node cases hold TensorProtos for dtypes numpy lacks natively (bfloat16, ...), as BackendTest reads them."""
    return onnx.numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def run_suite(backend: str, cases: list[TestCase],
              on_case: Callable[[str, Outcome], None] | None = None) -> dict[str, Outcome]:
    """Run the cases on `backend` ("hobbit" or "onnxruntime") in a worker process.

    A test that crashes the process (a segfault is a bug, but the report must
    survive it) is recorded as failed with the signal, and a fresh worker goes on
    with the remaining tests."""
    results: dict[str, Outcome] = {}
    pending = [c.name for c in cases]
    while pending:
        worker = subprocess.Popen([sys.executable, "-m", "hobbit.conformance", backend],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        worker.stdin.write("\n".join(pending) + "\n")
        worker.stdin.close()
        for line in worker.stdout:
            name, passed, reason = line.rstrip("\n").split("\t", 2)
            results[name] = Outcome(passed == "1", reason)
            if on_case is not None:
                on_case(name, results[name])
        status = worker.wait()
        pending = [n for n in pending if n not in results]
        if pending:
            results[pending[0]] = Outcome(False, f"Crash: the process died ({_exit_reason(status)})")
            if on_case is not None:
                on_case(pending[0], results[pending[0]])
            pending = pending[1:]
    return results


def _exit_reason(status: int) -> str:
    if status < 0:
        return f"signal {signal.Signals(-status).name}"
    return f"exit status {status}"


def _worker(backend_name: str) -> None:
    """Run the named tests read from stdin; one tab-separated result line each, flushed."""
    if backend_name == "hobbit":
        from hobbit import onnx_backend as backend
    else:
        import onnxruntime
        import onnxruntime.backend as backend
        onnxruntime.set_default_logger_severity(3)
    wanted = [line.strip() for line in sys.stdin if line.strip()]
    by_name = {c.name: c for c in node_tests()}
    for name in wanted:
        outcome = run_case(backend, by_name[name])
        reason = outcome.reason.replace("\t", " ").replace("\n", " ")
        print(f"{name}\t{int(outcome.passed)}\t{reason}", flush=True)


def read_expected_failures(path: Path = EXPECTED_FAILURES) -> list[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def write_expected_failures(hobbit: dict[str, Outcome], path: Path = EXPECTED_FAILURES) -> None:
    failing = sorted(name for name, outcome in hobbit.items() if not outcome.passed)
    header = ("# ONNX backend node tests hobbit is known to fail (tests/test_onnx_backend.py).\n"
              "# This list may only shrink: a listed test that starts passing fails CI until removed.\n"
              "# Regenerate with: hobbit conformance --write-expected-failures\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join(f"{name}\n" for name in failing))


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
    from hobbit.bench import machine_info

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


def measure(cases: list[TestCase], progress: Callable[[str], None] | None = None
            ) -> tuple[dict[str, Outcome], dict[str, Outcome], float]:
    """Run the cases on hobbit and on onnxruntime."""
    start = time.perf_counter()
    counter = {"done": 0}

    def tick(name: str, outcome: Outcome) -> None:
        counter["done"] += 1
        if progress is not None and counter["done"] % 100 == 0:
            progress(f"{counter['done']}/{2 * len(cases)} test runs")

    hobbit = run_suite("hobbit", cases, tick)
    ort = run_suite("onnxruntime", cases, tick)
    return hobbit, ort, time.perf_counter() - start


if __name__ == "__main__":
    _worker(sys.argv[1])
