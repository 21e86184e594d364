"""The ONNX backend node test suite (shipped with the onnx package) against hobbit.onnx_backend.

Every node test runs. The ones hobbit is known to fail are listed in
tests/onnx_backend/expected_failures.txt and marked expected failures; a listed
test that passes is reported as an unexpected success, which fails the run, so
the list can only shrink. `hobbit conformance --write-expected-failures`
regenerates it, and CONFORMANCE.md has the per-operator picture."""

from __future__ import annotations

import re
import warnings

import onnx.backend.test

from hobbit import conformance, onnx_backend

_EXPECTED_FAILURES = conformance.read_expected_failures()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _suite = onnx.backend.test.BackendTest(onnx_backend, __name__)
for _name in _EXPECTED_FAILURES:
    _suite.xfail(f"^{re.escape(_name)}_cpu$")

# Only the node tests (the model categories need downloads), and only on the one device.
OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]
for _attr in [a for a in vars(OnnxBackendNodeModelTest) if a.startswith("test_") and not a.endswith("_cpu")]:
    delattr(OnnxBackendNodeModelTest, _attr)


def test_expected_failures_name_real_tests() -> None:
    """A stale entry would hide nothing, but it would make the list look longer than it is."""
    names = {case.name for case in conformance.node_tests()}
    assert [n for n in _EXPECTED_FAILURES if n not in names] == []
    assert _EXPECTED_FAILURES == sorted(set(_EXPECTED_FAILURES))
