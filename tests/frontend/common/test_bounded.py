"""The bounded-dynamic path (hobbit.frontend.common.bounded): data-dependent dims flowing through
score filters, TopK with a run-time k, gathers, concatenation, reductions and an If with an
empty branch, checked against onnxruntime over inputs that select nothing, some and all."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hobbit
from hobbit.errors import RunError, UnsupportedModelError
from hobbit.runtime.layout import cut
from tests.helpers import run_ort


def _model(nodes, inputs, outputs, inits):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                         [h.make_tensor_value_info(n, t, None) for n, t in outputs], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _i64(name, values, shape=None):
    values = list(np.atleast_1d(values))
    return h.make_tensor(name, T.INT64, [len(values)] if shape is None else shape, values)


def _score_filter_model(cap: int = 5) -> onnx.ModelProto:
    """What torchvision's detectors export per class: scores > t -> NonZero -> GatherND,
    k = min(cap, count) from Shape arithmetic, TopK, the boxes gathered by its indices."""
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]), h.make_node("GatherND", ["x", "nzt"], ["sel"]),
             h.make_node("Shape", ["sel"], ["shp"]), h.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "ax0"], ["n1"]), h.make_node("Concat", ["cap", "n1"], ["cc"], axis=0),
             h.make_node("ReduceMin", ["cc"], ["k0"], keepdims=0), h.make_node("Reshape", ["k0", "one"], ["k"]),
             h.make_node("TopK", ["sel", "k"], ["v", "i"]), h.make_node("Gather", ["boxes", "i"], ["b"], axis=0),
             h.make_node("Mul", ["v", "two"], ["v2"]), h.make_node("Concat", ["v2", "v2", "fixed"], ["vv"], axis=0),
             h.make_node("Slice", ["vv", "s0", "s1"], ["vs"]), h.make_node("ReduceMax", ["b"], ["bm"], keepdims=0),
             h.make_node("Shape", ["b"], ["bshape"]), h.make_node("ConstantOfShape", ["bshape"], ["ones"],
                                                                  value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
             h.make_node("Add", ["b", "ones"], ["b1"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.5]), _i64("zero", 0, []), _i64("ax0", 0), _i64("cap", cap),
             _i64("one", 1), h.make_tensor("two", T.FLOAT, [], [2.0]), _i64("s0", 0), _i64("s1", 7),
             h.make_tensor("fixed", T.FLOAT, [2], [7.0, 8.0])]
    return _model(nodes, [("x", [40]), ("boxes", [40, 4])],
                  [("sel", T.FLOAT), ("v", T.FLOAT), ("i", T.INT64), ("b", T.FLOAT), ("vs", T.FLOAT),
                   ("bm", T.FLOAT), ("b1", T.FLOAT)], inits)


@pytest.fixture(scope="module")
def score_filter():
    model = _score_filter_model()
    return model, hobbit.compile(model, cache=False)


@pytest.mark.parametrize("scale", [0.0, 0.6, 1.0, 3.0])
def test_score_filter_matches_onnxruntime(score_filter, scale):
    """scale 0 selects nothing, 0.6 a few (fewer than the cap), 1 about half, 3 nearly all."""
    model, compiled = score_filter
    rng = np.random.default_rng(int(scale * 10))
    feeds = {"x": (rng.random(40) * scale).astype(np.float32), "boxes": rng.random((40, 4)).astype(np.float32)}
    want = run_ort(model, feeds)
    got = compiled.run(feeds)
    for w, g in zip(want, got):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_every_position_selected_fills_the_bound(score_filter):
    """All 40 scores pass: NonZero's extent reaches its bound (the input's size) exactly."""
    model, compiled = score_filter
    feeds = {"x": np.full(40, 0.9, np.float32), "boxes": np.ones((40, 4), np.float32)}
    assert compiled.run(feeds)[0].shape == (40,)
    np.testing.assert_array_equal(compiled.run(feeds)[0], run_ort(model, feeds)[0])


def test_the_static_part_keeps_static_kernels(score_filter):
    """Only the ops that read along a data-dependent dim become Bounded* kernels: the filter's
    Greater and the Mul on the TopK values stay the ordinary element-wise kernels."""
    _, compiled = score_filter
    ops = [node.op for node in compiled.report.graph.nodes]
    assert "Greater" in ops or any("Greater" in n.fused_names[0] for n in compiled.report.graph.nodes)
    assert {"BoundedNonZero", "BoundedGatherND", "BoundedGather", "BoundedConcat", "BoundedCheck"} <= set(ops)
    assert "Mul" in ops or any(step.op == "Mul" for n in compiled.report.graph.nodes for step in n.epilogue)


def test_a_bounded_output_reports_an_unknown_dim(score_filter):
    _, compiled = score_filter
    args = {a.name: a.shape for a in compiled.get_outputs()}
    assert args["sel"] == [None] and args["b"] == [None, 4] and args["bm"] == []


def test_out_buffers_are_refused_for_bounded_outputs(score_filter):
    _, compiled = score_filter
    feeds = {"x": np.zeros(40, np.float32), "boxes": np.zeros((40, 4), np.float32)}
    with pytest.raises(hobbit.InputError, match="data-dependent"):
        compiled.run(["sel"], feeds, out=[np.empty(40, np.float32)])


def test_top_k_larger_than_what_it_ranks_is_a_run_error():
    """A constant k above the run-time count is invalid in ONNX (onnxruntime refuses it);
    the BoundedCheck reports it instead of returning padding."""
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Squeeze", ["nz", "ax0"], ["idx"]), h.make_node("Gather", ["x", "idx"], ["sel"]),
             h.make_node("TopK", ["sel", "k"], ["v", "i"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.5]), _i64("ax0", 0), _i64("k", 3)]
    compiled = hobbit.compile(_model(nodes, [("x", [10])], [("v", T.FLOAT)], inits), cache=False)
    x = np.linspace(0, 1, 10, dtype=np.float32)
    np.testing.assert_array_equal(compiled.run({"x": x})[0], np.sort(x[x > 0.5])[::-1][:3])
    x[x > 0.5] = 0
    x[:2] = 0.9
    with pytest.raises(RunError, match="data-dependent length 3"):
        compiled.run({"x": x})


def test_if_with_an_empty_branch_picks_the_extent():
    """torchvision's `if boxes.numel() == 0: keep = empty else: keep = nms(...)`, with a
    plain Gather in place of the NMS."""
    then = h.make_graph([], "then", [], [h.make_tensor_value_info("e", T.INT64, [0])],
                        [h.make_tensor("e", T.INT64, [0], [])])
    other = h.make_graph([h.make_node("Identity", ["idx"], ["k"])], "else", [],
                         [h.make_tensor_value_info("k", T.INT64, None)])
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Squeeze", ["nz", "ax0"], ["idx"]), h.make_node("Size", ["idx"], ["size"]),
             h.make_node("Equal", ["size", "zero"], ["empty"]),
             h.make_node("If", ["empty"], ["keep"], then_branch=then, else_branch=other),
             h.make_node("Gather", ["x", "keep"], ["y"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.5]), _i64("ax0", 0), _i64("zero", 0, [])]
    model = _model(nodes, [("x", [12])], [("keep", T.INT64), ("y", T.FLOAT)], inits)
    compiled = hobbit.compile(model, cache=False)
    for x in (np.zeros(12, np.float32), np.linspace(0, 1, 12, dtype=np.float32)):
        for w, g in zip(run_ort(model, {"x": x}), compiled.run({"x": x})):
            np.testing.assert_array_equal(g, w)


def test_an_op_without_a_bounded_form_is_reported_with_its_node():
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Squeeze", ["nz", "ax0"], ["idx"]), h.make_node("CumSum", ["idx", "zero"], ["y"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.5]), _i64("ax0", 0), _i64("zero", 0, [])]
    with pytest.raises(UnsupportedModelError, match="CumSum.*data-dependent"):
        hobbit.compile(_model(nodes, [("x", [12])], [("y", T.INT64)], inits), cache=False)


def test_values_of_unrelated_lengths_are_not_combined():
    """Two filters' results have lengths hobbit cannot prove equal: refused at compile time,
    never combined with one length silently assumed."""
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("Less", ["x", "thr"], ["l"]),
             h.make_node("NonZero", ["m"], ["a"]), h.make_node("NonZero", ["l"], ["b"]),
             h.make_node("Add", ["a", "b"], ["y"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.5])]
    with pytest.raises(UnsupportedModelError, match="not known to be equal"):
        hobbit.compile(_model(nodes, [("x", [12])], [("y", T.INT64)], inits), cache=False)


def test_a_corrupt_extent_is_refused_by_the_runtime():
    """Generated code cannot produce an extent past the bound (every Bounded kernel counts what
    it writes, and clamps what it reads); the runtime still refuses one from a damaged library."""
    data = np.arange(6)
    assert cut(data, 0, 6).shape == (6,) and cut(data, 0, 0).shape == (0,)
    with pytest.raises(ValueError, match="extent of 7"):
        cut(data, 0, 7)


def test_an_exported_library_cuts_bounded_outputs(tmp_path, score_filter):
    model, compiled = score_filter
    compiled.export(tmp_path / "filter")
    loaded = hobbit.load(tmp_path / "filter")
    rng = np.random.default_rng(5)
    feeds = {"x": rng.random(40).astype(np.float32), "boxes": rng.random((40, 4)).astype(np.float32)}
    for w, g in zip(run_ort(model, feeds), loaded.run(feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _rows_model(extra_nodes, outputs, extra_inits=()):
    """rois = boxes[x > 0.2] (bounded rows), then `extra_nodes` on them."""
    nodes = [h.make_node("Greater", ["x", "thr"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Squeeze", ["nz", "ax0"], ["idx"]), h.make_node("Gather", ["boxes", "idx"], ["rois"])]
    inits = [h.make_tensor("thr", T.FLOAT, [], [0.2]), _i64("ax0", 0)] + list(extra_inits)
    return _model(nodes + extra_nodes, [("x", [16]), ("boxes", [16, 4])], outputs, inits)


def _compiled_once(model: onnx.ModelProto):
    """Compiled once for every input: a model whose shapes need input values at compile time
    would come back specialising on each input's values instead (and without a report)."""
    compiled = hobbit.compile(model, cache=False)
    assert compiled.report is not None
    return compiled


def _rows_feeds(seed: int) -> dict:
    """seed 0 keeps no row, 1 all, others some."""
    rng = np.random.default_rng(seed)
    x = {0: np.zeros(16), 1: np.ones(16)}.get(seed, rng.random(16))
    return {"x": x.astype(np.float32), "boxes": rng.random((16, 4)).astype(np.float32)}


def test_rows_merged_by_level_scatter_only_their_valid_rows():
    """torchvision's MultiScaleRoIAlign merge: zeros shaped like the rois, then per level a
    ScatterElements of that level's rows at their NonZero positions, expanded through the
    exporter's `shape == -1` Where (decided from the ranges: a length is never -1)."""
    nodes = [h.make_node("Gather", ["rois", "first"], ["col"], axis=1), h.make_node("Greater", ["col", "half"], ["hi"]),
             h.make_node("Cast", ["hi"], ["levels"], to=T.INT64), h.make_node("Shape", ["rois"], ["rshape"]),
             h.make_node("ConstantOfShape", ["rshape"], ["res0"], value=h.make_tensor("v", T.FLOAT, [1], [0.0]))]
    for level in (0, 1):
        p = f"l{level}_"
        nodes += [h.make_node("Equal", ["levels", f"{p}k"], [f"{p}eq"]), h.make_node("NonZero", [f"{p}eq"], [f"{p}nz"]),
                  h.make_node("Reshape", [f"{p}nz", "col_shape"], [f"{p}ix"]),
                  h.make_node("Shape", [f"{p}ix"], [f"{p}s"]), h.make_node("Gather", [f"{p}s", "first"], [f"{p}n"]),
                  h.make_node("Unsqueeze", [f"{p}n", "ax0"], [f"{p}n1"]),
                  h.make_node("Concat", [f"{p}n1", "four"], [f"{p}shape"], axis=0),
                  h.make_node("Equal", [f"{p}shape", "minus_one"], [f"{p}auto"]),
                  h.make_node("Where", [f"{p}auto", "ones", f"{p}shape"], [f"{p}to"]),
                  h.make_node("Expand", [f"{p}ix", f"{p}to"], [f"{p}at"]),
                  h.make_node("Squeeze", [f"{p}nz", "ax0"], [f"{p}flat"]),
                  h.make_node("Gather", ["rois", f"{p}flat"], [f"{p}rows"]),
                  h.make_node("Mul", [f"{p}rows", f"{p}scale"], [f"{p}upd"]),
                  h.make_node("ScatterElements", [f"res{level}", f"{p}at", f"{p}upd"], [f"res{level + 1}"], axis=0)]
    inits = [h.make_tensor("half", T.FLOAT, [], [0.5]), _i64("first", 0, []), _i64("col_shape", [-1, 1]), _i64("four", 4),
             _i64("minus_one", [-1, -1]), _i64("ones", [1, 1]), _i64("l0_k", 0, []), _i64("l1_k", 1, []),
             h.make_tensor("l0_scale", T.FLOAT, [], [2.0]), h.make_tensor("l1_scale", T.FLOAT, [], [-3.0])]
    model = _rows_model(nodes, [("res2", T.FLOAT)], inits)
    compiled = _compiled_once(model)
    assert "BoundedScatterElements" in [n.op for n in compiled.report.graph.nodes]
    for seed in range(5):
        feeds = _rows_feeds(seed)
        (want,), (got,) = run_ort(model, feeds), compiled.run(feeds)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_scatter_indices_are_checked_against_the_data_extent():
    """Scatter positions taken from x itself into the rows kept from it: positions past the
    kept count are out of range at run time (onnxruntime refuses them too)."""
    nodes = [h.make_node("Greater", ["x", "pos_thr"], ["pm"]), h.make_node("NonZero", ["pm"], ["pnz"]),
             h.make_node("Squeeze", ["pnz", "ax0"], ["pos"]), h.make_node("Reshape", ["pos", "col_shape"], ["pcol"]),
             h.make_node("Expand", ["pcol", "wide"], ["at"]), h.make_node("Gather", ["boxes", "pos"], ["upd"]),
             h.make_node("ScatterElements", ["rois", "at", "upd"], ["y"], axis=0)]
    inits = [h.make_tensor("pos_thr", T.FLOAT, [], [0.6]), _i64("col_shape", [-1, 1]), _i64("wide", [1, 4])]
    model = _rows_model(nodes, [("y", T.FLOAT)], inits)
    compiled = _compiled_once(model)
    feeds = _rows_feeds(3)
    feeds["x"][:8], feeds["x"][8:] = 0.9, 0.0  # kept rows 0-7, positions 0-7
    (want,), (got,) = run_ort(model, feeds), compiled.run(feeds)
    np.testing.assert_array_equal(got, want)
    feeds["x"][:8], feeds["x"][8:] = 0.0, 0.9  # 8 kept rows, positions 8-15
    with pytest.raises(RunError, match="index"):
        compiled.run(feeds)


def test_slice_ends_computed_from_data_dependent_lengths():
    """rois[0:0 + len(rois)] (torchvision's split per image) keeps every row; rois[0:n] with n
    another filter's count keeps min(len(rois), n) rows."""
    nodes = [h.make_node("Shape", ["rois"], ["rs"]), h.make_node("Gather", ["rs", "first"], ["n"]),
             h.make_node("Unsqueeze", ["n", "ax0"], ["n1"]), h.make_node("Add", ["zero1", "n1"], ["end"]),
             h.make_node("Slice", ["rois", "zero1", "end", "zero1"], ["whole"]),
             h.make_node("Greater", ["x", "high"], ["hm"]), h.make_node("NonZero", ["hm"], ["hnz"]),
             h.make_node("Shape", ["hnz"], ["hs"]), h.make_node("Gather", ["hs", "one1"], ["count"]),
             h.make_node("Slice", ["rois", "zero1", "count", "zero1"], ["prefix"])]
    inits = [_i64("first", 0, []), _i64("zero1", [0]), _i64("one1", [1]), h.make_tensor("high", T.FLOAT, [], [0.7])]
    model = _rows_model(nodes, [("whole", T.FLOAT), ("prefix", T.FLOAT)], inits)
    compiled = _compiled_once(model)
    for seed in range(5):
        feeds = _rows_feeds(seed)
        for w, g in zip(run_ort(model, feeds), compiled.run(feeds)):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)
