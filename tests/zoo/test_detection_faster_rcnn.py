"""torchvision's fasterrcnn_mobilenet_v3_large_fpn (random weights, calibrated to detect:
hobbit.zoo.detection) end to end against onnxruntime: the RPN's per-level TopK, score
filter and batched NonMaxSuppression, MultiScaleRoIAlign on the bounded proposals (its
levels merged by ScatterElements), the box head on the bounded rows, and the second
stage's filter and NonMaxSuppression all run on hobbit's bounded-dynamic path. On the
calibration image the engines order a few near-tied proposals differently (the same 1000
boxes reach RoiAlign), which the detections do not depend on."""

import pytest

from tests.zoo.detection_cases import check_detector, compile_both, exported

pytestmark = pytest.mark.slow

NAME = "fasterrcnn_mobilenet_v3_large_fpn"


@pytest.fixture(scope="module")
def engines():
    return compile_both(exported(NAME))


def test_detections_match_onnxruntime(engines):
    counts = check_detector(NAME, *engines)
    assert counts[0] > 0  # the calibration image: some boxes survive the score threshold


def test_roi_align_and_its_level_merge_run_on_the_bounded_proposals(engines):
    """RoiAlign reads the RPN's bounded proposals and the box head's Gemm rows follow them:
    both sit after the first data-dependent op, with the backbone's convs before it."""
    compiled, _ = engines
    ops = [node.op for node in compiled.report.graph.nodes]
    first = min(i for i, op in enumerate(ops) if op.startswith("Bounded"))
    assert "Conv" in ops[:first] and "RoiAlign" in ops[first:] and "BoundedScatterElements" in ops
