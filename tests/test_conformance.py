"""The node-test runner behind `hobbit conformance` and CONFORMANCE.md."""

from __future__ import annotations

from pathlib import Path

from hobbit import conformance
from hobbit.conformance import Outcome


def _cases(*names: str) -> list:
    by_name = {case.name: case for case in conformance.node_tests()}
    return [by_name[name] for name in names]


def test_run_suite_reports_passes_and_reasons() -> None:
    cases = _cases("test_abs", "test_nonmaxsuppression_center_point_box_format")
    results = conformance.run_suite("hobbit", cases)
    assert results["test_abs"] == Outcome(True, "")
    failed = results["test_nonmaxsuppression_center_point_box_format"]
    assert not failed.passed and "NonMaxSuppression" in failed.reason and "not supported" in failed.reason


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
