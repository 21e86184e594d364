"""Winograd F(2x2, 3x3) convolution: the pass picks it for 3x3 stride-1 convs with
enough channels, and the result matches onnxruntime (and the direct kernel)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.target import Target
from hobbit.ops.registry import get_op
from hobbit.plan.winograd import pack_weights, transform_weights
from tests.helpers import make_model, rand, run_ort

CASES = [  # C, H, W, OC, pads, threads
    (16, 8, 8, 16, (1, 1, 1, 1), 1),
    (32, 7, 7, 20, (1, 1, 1, 1), 1),      # odd output size: ragged last tile row/column
    (17, 9, 11, 33, (0, 1, 2, 1), 1),     # asymmetric pads, odd channels
    (24, 5, 6, 40, (0, 0, 0, 0), 2),      # no padding, two threads
    (64, 14, 14, 64, (1, 1, 1, 1), 2),
    (16, 1, 1, 16, (1, 1, 1, 1), 1),      # 1x1 input
    (32, 20, 20, 32, (1, 1, 1, 1), 1),    # F(4x4): 25 tiles
    (24, 19, 17, 40, (1, 0, 1, 2), 2),    # F(4x4), ragged tiles, asymmetric pads, two threads
    (32, 48, 48, 32, (1, 1, 1, 1), 2),    # bands of tile rows, the last band full
    (32, 50, 50, 40, (0, 1, 2, 1), 2),    # bands, ragged last tile row and column, two threads
    (24, 61, 57, 32, (1, 1, 1, 1), 2),    # bands with a short last band
    (16, 70, 67, 16, (1, 1, 1, 1), 2),    # 17 tiles a row: a second vector of tiles holding one
    (16, 70, 67, 16, (1, 1, 1, 1), 1),
    (16, 62, 63, 24, (1, 1, 1, 1), 1),    # 16 tiles a row, the last one ragged
    (16, 5, 70, 16, (1, 1, 1, 1), 1),     # F(2x2), 35 tiles a row: three vectors of tiles
]


def _model(c, h, w, oc, pads, residual=False, batch=1):
    x = rand(batch, c, h, w)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=pads, name="conv")]
    out = "c"
    if residual:
        nodes += [helper.make_node("Add", ["c", "x"], ["s"], name="add"),
                  helper.make_node("Relu", ["s"], ["y"], name="relu")]
        out = "y"
    inits = {"W": rand(oc, c, 3, 3, seed=1) * 0.2, "B": rand(oc, seed=2)}
    return make_model(nodes, {"x": x}, [out], inits), x


@pytest.mark.parametrize("c,h,w,oc,pads,threads", CASES)
def test_winograd_conv_matches_onnxruntime(c, h, w, oc, pads, threads):
    model, x = _model(c, h, w, oc, pads)
    m = hobbit.compile(model, threads=threads)
    assert [n.op for n in m.report.graph.nodes] == ["ConvWinograd"]
    np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,oc", [(64, 14, 64), (128, 28, 128), (256, 14, 256)])
def test_batched_whole_image_convs_on_two_threads(c, hw, oc):
    """Whole-image convs share each phase by job claims whose counters are reset for the
    next image: every image of the batch must come out whole, in both GEMM orientations."""
    model, x = _model(c, hw, hw, oc, (1, 1, 1, 1), batch=3)
    m = hobbit.compile(model, threads=2, cache=False)
    np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)


def test_large_images_run_in_bands():
    """On a machine with 1 MiB of L2 per core (the host's own L2 would move the boundary:
    2 MiB on some Xeons), a 48x48 image's transforms overflow it and a 12x12 one's do not."""
    import dataclasses
    from hobbit.target import host_target
    from hobbit.plan.conv import conv_shape
    from hobbit.plan.winograd import band_rows
    target = dataclasses.replace(host_target(), l2_bytes=1 << 20)
    for hw, banded in ((48, True), (12, False)):
        model, x = _model(32, hw, hw, 32, (1, 1, 1, 1))
        m = hobbit.compile(model, target=target, cache=False)
        node = m.report.graph.nodes[0]
        for threads in (1, 2):
            assert (band_rows(conv_shape(node), node.attrs["tile"], target, threads) > 0) == banded
        np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_winograd_with_fused_residual_epilogue():
    model, x = _model(32, 10, 10, 32, (1, 1, 1, 1), residual=True)
    m = hobbit.compile(model)
    (node,) = m.report.graph.nodes
    assert node.op == "ConvWinograd" and node.fused_names == ["conv", "add", "relu"]
    np.testing.assert_allclose(m.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_small_channel_and_strided_convs_stay_direct():
    for c, strides in ((8, (1, 1)), (32, (2, 2))):
        x = rand(1, c, 9, 9)
        node = helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1], strides=strides)
        model = make_model([node], {"x": x}, ["y"], {"W": rand(32, c, 3, 3)})
        assert [n.op for n in hobbit.compile(model).report.graph.nodes] == ["Conv"]


def test_numpy_reference_agrees_with_direct_convolution():
    x, w, b = rand(2, 5, 7, 6), rand(4, 5, 3, 3, seed=1), rand(4, seed=2)
    attrs = {"strides": (1, 1), "dilations": (1, 1), "pads": (1, 0, 1, 2), "group": 1}
    direct = get_op("Conv").reference([x, w, b], attrs)[0]
    for m in (2, 4):
        wino = get_op("ConvWinograd").reference([x, pack_weights(transform_weights(w, m), 3), b],
                                                {**attrs, "weight_shape": w.shape, "tile": m})[0]
        np.testing.assert_allclose(wino, direct, rtol=1e-5, atol=1e-5)


AVX512 = Target("x86_64-unknown-linux-gnu", "znver4", "", 512, 32, 32 << 10, 1 << 20, 2)


@pytest.mark.parametrize("c,hw,oc,tile,by_tile", [
    (64, 56, 64, 4, False),    # 196 tiles: vectors along tiles
    (128, 28, 128, 4, True),   # 49 tiles: rows are tiles, vectors along output channels
    (256, 14, 256, 2, True),   # 16 4x4 tiles would reuse each transformed weight too little
    (512, 7, 512, 2, True),
    (32, 7, 20, 2, False),     # 20 output channels do not fill the 32-wide panels
])
def test_variant_and_gemm_orientation_follow_the_shape(c, hw, oc, tile, by_tile):
    from hobbit.plan.conv import conv_shape
    from hobbit.plan.winograd import tiles_as_rows
    from hobbit.passes.winograd import use_winograd
    model, _ = _model(c, hw, hw, oc, (1, 1, 1, 1))
    graph = hobbit.compile(model, passes=[]).report.graph
    node = use_winograd(graph, AVX512).nodes[0]
    assert node.attrs["tile"] == tile
    assert tiles_as_rows(conv_shape(node), tile, AVX512) == by_tile
