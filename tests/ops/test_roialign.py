"""RoiAlign against onnxruntime: avg and max, adaptive and fixed sampling, both coordinate
modes, opset 10 and 16, rois partly or wholly outside the map, empty and degenerate rois;
the numpy reference (used for folding) against onnxruntime on the same cases; a bad batch
index is a RunError."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import RunError
from hobbit.ops.registry import get_op
from tests.helpers import assert_matches_ort, make_model, rand, run_ort

H, W = 6, 7


def _rois(count: int, seed: int, scale: float = 1.0, dtype=np.float32) -> np.ndarray:
    """Boxes (x1, y1, x2, y2) in image coordinates (the map is the image times `scale`),
    many reaching past the map's edges, one entirely outside it, one of zero size."""
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(-3, W + 1, count) / scale
    y1 = rng.uniform(-3, H + 1, count) / scale
    rois = np.stack([x1, y1, x1 + rng.uniform(0, 7, count) / scale, y1 + rng.uniform(0, 6, count) / scale], 1)
    rois[0] = [2.0 / scale, 1.0 / scale, 2.0 / scale, 1.0 / scale]
    rois[1] = [-9.0 / scale, -8.0 / scale, -4.0 / scale, -3.0 / scale]
    return rois.astype(dtype)


def _feeds(n: int, c: int, rois: int, seed: int, scale: float = 1.0, dtype=np.float32) -> dict[str, np.ndarray]:
    return {"x": rand(n, c, H, W, seed=seed, dtype=dtype), "rois": _rois(rois, seed + 1, scale, dtype),
            "idx": np.random.default_rng(seed + 2).integers(0, n, rois).astype(np.int64)}


_VARIANTS = [(mode, ratio, ctm) for mode in ("avg", "max") for ratio in (0, 2)
             for ctm in ("half_pixel", "output_half_pixel")]


def _nodes(variants, opset: int, scale: float) -> list:
    nodes = []
    for i, (mode, ratio, ctm) in enumerate(variants):
        extra = {"coordinate_transformation_mode": ctm} if opset >= 16 else {}
        nodes.append(helper.make_node("RoiAlign", ["x", "rois", "idx"], [f"y{i}"], mode=mode, output_height=3,
                                      output_width=2, sampling_ratio=ratio, spatial_scale=scale, **extra))
    return nodes


def test_roialign_opset16_matches_onnxruntime():
    feeds = _feeds(2, 3, 9, seed=1, scale=0.5)
    nodes = _nodes(_VARIANTS, 16, 0.5)
    assert_matches_ort(make_model(nodes, feeds, [n.output[0] for n in nodes], opset=16), feeds)


def test_roialign_opset10_matches_onnxruntime():
    """Opset 10 has no coordinate_transformation_mode: it samples as output_half_pixel."""
    feeds = _feeds(1, 2, 6, seed=4)
    nodes = _nodes([("avg", 0, None), ("max", 2, None)], 10, 1.0)
    assert_matches_ort(make_model(nodes, feeds, ["y0", "y1"], opset=10), feeds)


def test_roialign_channel_blocks_threads_and_float64():
    """40 channels are two blocks of the kernel (32 + 8), shared by two threads."""
    feeds = _feeds(2, 40, 5, seed=7, dtype=np.float64)
    nodes = _nodes([("avg", 0, "half_pixel"), ("max", 0, "output_half_pixel")], 16, 1.0)
    model = make_model(nodes, feeds, ["y0", "y1"], opset=16)
    got = hobbit.compile(model, threads=2).run(feeds)
    for g, want in zip(got, run_ort(model, feeds)):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opset,variants", [(16, _VARIANTS), (10, [("avg", 0, None), ("max", 2, None)])])
def test_reference_matches_onnxruntime(opset, variants):
    feeds = _feeds(2, 3, 9, seed=11, scale=0.5)
    nodes = _nodes(variants, opset, 0.5)
    want = run_ort(make_model(nodes, feeds, [n.output[0] for n in nodes], opset=opset), feeds)
    for (mode, ratio, ctm), expected in zip(variants, want):
        attrs = {"mode": mode, "output_height": 3, "output_width": 2, "sampling_ratio": ratio,
                 "spatial_scale": 0.5, "half_pixel": int(ctm == "half_pixel")}
        got, = get_op("RoiAlign").reference([feeds["x"], feeds["rois"], feeds["idx"], None], attrs)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_reference_of_bounded_rois_pads_with_zeros():
    feeds = _feeds(1, 2, 4, seed=3)
    attrs = {**get_op("RoiAlign").attrs, "output_height": 2, "output_width": 2}
    args = [feeds["x"], feeds["rois"], feeds["idx"]]
    full, = get_op("RoiAlign").reference(args + [None], attrs)
    cut, = get_op("RoiAlign").reference(args + [np.int64(3)], attrs)
    np.testing.assert_array_equal(cut[:3], full[:3])
    assert not cut[3].any()


def test_bad_batch_index_is_a_run_error():
    feeds = _feeds(2, 3, 4, seed=5)
    model = make_model(_nodes([("avg", 2, "half_pixel")], 16, 1.0), feeds, ["y0"], opset=16)
    compiled = hobbit.compile(model)
    compiled.run(feeds)
    for bad in (2, -1):
        feeds["idx"][3] = bad
        with pytest.raises(RunError, match=f"{bad}"):
            compiled.run(feeds)
