"""BoundedNonMaxSuppression (hobbit/ops/nms.py, hobbit/backend/cpu/nms.py) against onnxruntime's
NonMaxSuppression: the kernel's rows [0, extent) and the numpy reference's must equal
onnxruntime's selected_indices exactly, on the ONNX node tests' data and on random
detection-sized inputs (ties, flipped corners, duplicates, degenerate boxes), one thread
and several. The graph is built directly, so the padded output and the extent are both
model outputs."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import hobbit
from hobbit.errors import RunError
from hobbit.frontend.common.source import Source
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import get_op
from tests.backend.cpu.nms_data import detections

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
NAMES = ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold")


class _GraphSource(Source):
    """A graph built in the test, handed to hobbit.compile as a model."""
    format = "graph"

    def __init__(self, graph: Graph):
        self.model = graph

    def import_graph(self, input_shapes=None, input_values=None) -> Graph:
        return self.model


@functools.lru_cache(maxsize=None)
def _compiled(batches: int, classes: int, boxes: int, center_point_box: int, present: tuple[bool, ...],
              limit_const: int | None = None, threads: int = 1):
    """The one-node graph of BoundedNonMaxSuppression; absent optional inputs are None, a
    constant limit is a constant input."""
    inputs = [Value("boxes", TensorType(F32, (batches, boxes, 4))), Value("scores", TensorType(F32, (batches, classes, boxes)))]
    node_inputs = list(inputs)
    for name, dtype, on in zip(NAMES[2:], (I64, F32, F32), present):
        if name == NAMES[2] and limit_const is not None:
            node_inputs.append(Value(name, const=np.array([limit_const], I64)))
        elif on:
            value = Value(name, TensorType(dtype, (1,)))
            inputs.append(value)
            node_inputs.append(value)
        else:
            node_inputs.append(None)
    node = Node("BoundedNonMaxSuppression", "nms", node_inputs, [Value("selected"), Value("extent")],
                {"center_point_box": center_point_box})
    for out, ty in zip(node.outputs, get_op(node.op).infer(node)):
        out.type = ty
    graph = Graph("nms", inputs, node.outputs, [node])
    return hobbit.compile(_GraphSource(graph), cache=False, threads=threads), [v.name for v in inputs]


def _ort(feeds: dict[str, np.ndarray], center_point_box: int) -> np.ndarray:
    names = [n if n in feeds else "" for n in NAMES]
    while not names[-1]:
        names.pop()
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", names, ["selected"], center_point_box=center_point_box)], "nms",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info("selected", onnx.TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _feeds(boxes, scores, limit=None, iou=None, score=None) -> dict[str, np.ndarray]:
    feeds = {"boxes": np.asarray(boxes, F32), "scores": np.asarray(scores, F32)}
    for name, v, dtype in zip(NAMES[2:], (limit, iou, score), (I64, F32, F32)):
        if v is not None:
            feeds[name] = np.array([v], dtype).reshape(-1)
    return feeds


def _check(feeds: dict[str, np.ndarray], center_point_box: int = 0, threads: int = 1,
           limit_const: int | None = None) -> np.ndarray:
    """Kernel and reference against onnxruntime; returns onnxruntime's rows."""
    want = _ort(feeds, center_point_box)
    batches, classes, n = feeds["scores"].shape
    present = tuple(name in feeds for name in NAMES[2:])
    model, names = _compiled(batches, classes, n, center_point_box, present, limit_const, threads)
    selected, extent = model.run({k: v for k, v in feeds.items() if k in names})
    assert extent.shape == () and extent.dtype == I64
    np.testing.assert_array_equal(selected[:int(extent)], want)
    ref, ref_extent = get_op("BoundedNonMaxSuppression").reference(
        [feeds.get(name) for name in NAMES], {"center_point_box": center_point_box})
    np.testing.assert_array_equal(ref[:int(ref_extent)], want)
    return want


def _node_test_cases() -> list:
    """The ONNX node tests of NonMaxSuppression. Importing their module records them (onnx's
    case classes export at definition), without generating the other ops' thousand cases."""
    from onnx.backend.test.case import node

    importlib.import_module("onnx.backend.test.case.node.nonmaxsuppression")
    return sorted((c for c in node._NodeTestCases if c.name.startswith("test_nonmaxsuppression")),
                  key=lambda c: c.name)


@pytest.mark.parametrize("case", _node_test_cases(), ids=lambda c: c.name)
def test_onnx_node_test_data(case):
    node = case.model.graph.node[0]
    center_point_box = next((a.i for a in node.attribute if a.name == "center_point_box"), 0)
    inputs, expected = case.data_sets[0]
    feeds = dict(zip(node.input, inputs))
    got = _check(feeds, center_point_box)
    np.testing.assert_array_equal(got, expected[0])


@pytest.mark.parametrize("classes, center_point_box, limit, iou, score", [
    (1, 0, 5000, 0.5, 0.0),
    (3, 0, 200, 0.45, 0.25),
    (2, 1, 5000, 0.6, None),
    (1, 1, 50, 0.0, 0.9),
])
def test_random_detections_match_onnxruntime(classes, center_point_box, limit, iou, score):
    rng = np.random.default_rng(classes * 10 + center_point_box)
    boxes, scores = detections(rng, 1, classes, 5000, center_point_box)
    got = _check(_feeds(boxes, scores, limit, iou, score), center_point_box)
    assert len(got) > 40


def test_pairs_shared_by_threads_match_onnxruntime():
    """Three classes over two batches of boxes, each pair claimed by a thread, packed after."""
    boxes, scores = detections(np.random.default_rng(7), 2, 3, 2000, 0)
    got = _check(_feeds(boxes, scores, 2000, 0.5, 0.3), threads=2)
    assert set(got[:, 0]) == {0, 1} and set(got[:, 1]) == {0, 1, 2}


def test_absent_inputs_follow_onnxruntime():
    """No score threshold keeps every box as a candidate (-inf included); no IoU threshold is 0
    (any overlap suppresses); no max_output_boxes_per_class selects nothing."""
    boxes, scores = detections(np.random.default_rng(3), 1, 2, 300, 0)
    scores[0, 0, :5] = -np.inf
    _check(_feeds(boxes, scores, 300))
    model, _ = _compiled(1, 2, 300, 0, (False, False, False))
    selected, extent = model.run({"boxes": boxes, "scores": scores})
    assert selected.shape == (0, 3) and int(extent) == 0


def test_limit_at_run_time_clamps_and_a_constant_limit_tightens_the_bound():
    boxes, scores = detections(np.random.default_rng(4), 1, 2, 300, 0)
    for limit in (-5, 0, 1, 7, 10 ** 9):
        _check(_feeds(boxes, scores, limit, 0.5, 0.1))
    want = _check(_feeds(boxes, scores, 7, 0.5, 0.1), limit_const=7)
    model, _ = _compiled(1, 2, 300, 0, (True, True, True), 7)
    selected, extent = model.run(_feeds(boxes, scores, None, 0.5, 0.1))
    assert selected.shape == (2 * 7, 3) and int(extent) == len(want) == 14


@pytest.mark.parametrize("iou", [1.5, -0.25, np.nan])
def test_an_iou_threshold_outside_0_1_is_a_run_error(iou):
    boxes, scores = detections(np.random.default_rng(5), 1, 1, 50, 0)
    model, _ = _compiled(1, 1, 50, 0, (True, True, True))
    with pytest.raises(RunError, match=r"IoU threshold in millionths .* is out of range \[0, 1000000\]"):
        model.run(_feeds(boxes, scores, 10, iou, 0.0))
    for valid in (0.0, 1.0):
        _check(_feeds(boxes, scores, 10, valid, 0.0))


def test_nan_scores_are_never_selected_and_nan_boxes_suppress_as_in_onnxruntime():
    boxes, scores = detections(np.random.default_rng(6), 1, 1, 200, 0)
    boxes[0, 3:40:6, 1] = np.nan
    _check(_feeds(boxes, scores, 200, 0.3, 0.0))
    scores[0, 0, 10:20] = np.nan
    model, names = _compiled(1, 1, 200, 0, (True, True, True))
    selected, extent = model.run(_feeds(boxes, scores, 200, 0.3, 0.0))
    assert not set(selected[:int(extent), 2]) & set(range(10, 20))
    _check(_feeds(boxes, scores, 200, 0.3, 0.5))  # a threshold drops NaN scores in onnxruntime too
