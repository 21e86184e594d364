"""torchvision's ssdlite320_mobilenet_v3_large (random weights, calibrated to detect: hobbit.zoo.detection)
end to end against onnxruntime: its score filters, per-class TopK, batched
NonMaxSuppression and If run on hobbit's bounded-dynamic path."""

import pytest

from tests.zoo.detection_cases import check_detector, compile_both, exported

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engines():
    return compile_both(exported("ssdlite320_mobilenet_v3_large"))


def test_detections_match_onnxruntime(engines):
    counts = check_detector("ssdlite320_mobilenet_v3_large", *engines)
    assert counts[0] > 0  # the calibration image: some boxes survive the score threshold


def test_the_static_part_has_no_bounded_kernels(engines):
    """The backbone and heads keep their static kernels: every Bounded* kernel reads data
    after the first data-dependent op (the first NonZero of the score filter)."""
    compiled, _ = engines
    ops = [node.op for node in compiled.report.graph.nodes]
    first = min(i for i, op in enumerate(ops) if op.startswith("Bounded"))
    assert ops[first] in ("BoundedNonZero", "BoundedGather") and "Conv" in ops[:first]
