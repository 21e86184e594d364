"""Conv (implicit GEMM) and MatMul on the GPU against onnxruntime (grid emulation), and the
tile rule of hobbit/plan/gpu/gemm.py. Sums run in another order than onnxruntime's, so
results agree to float32 rounding of K-term sums (rtol = atol = 1e-4)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.graph.shapes import conv_out_size
from hobbit.plan.gpu.gemm import GemmDims, choose_tile
from hobbit.target import gpu_target
from tests.backend.gpu.gpu_cases import assert_gpu_matches_ort, compiled_for
from tests.helpers import make_model, rand

TOL = {"rtol": 1e-4, "atol": 1e-4}


def conv_case(x_shape, w_shape, bias=True, epilogue=(), residual=False, strides=(1, 1), pads=(0, 0, 0, 0),
              dilations=(1, 1), group=1):
    """A model of Conv(x, w[, b]) [+ r] then the unary `epilogue` ops, and its feeds."""
    n, _, h, w = x_shape
    oc, _, kh, kw = w_shape
    out = (n, oc, conv_out_size(h, kh, strides[0], dilations[0], pads[0] + pads[2]),
           conv_out_size(w, kw, strides[1], dilations[1], pads[1] + pads[3]))
    inits = {"w": rand(*w_shape, seed=1)}
    if bias:
        inits["b"] = rand(oc, seed=2)
    feeds = {"x": rand(*x_shape)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["t0"], strides=list(strides),
                              pads=list(pads), dilations=list(dilations), group=group)]
    if residual:
        feeds["r"] = rand(*out, seed=3)
        nodes.append(helper.make_node("Add", ["t0", "r"], ["t1"]))
    for op in epilogue:
        inputs = [f"t{len(nodes) - 1}"] + (["lo", "hi"] if op == "Clip" else [])
        nodes.append(helper.make_node(op, inputs, [f"t{len(nodes)}"]))
    if "Clip" in epilogue:
        inits["lo"], inits["hi"] = np.array(-0.5, np.float32), np.array(0.5, np.float32)
    nodes[-1].output[0] = "y"
    return make_model(nodes, feeds, ["y"], inits), feeds


CONVS = {
    "3x3_pad1_relu": dict(x_shape=(2, 4, 9, 9), w_shape=(6, 4, 3, 3), pads=(1, 1, 1, 1), epilogue=("Relu",)),
    "3x3_stride2_nobias": dict(x_shape=(1, 5, 11, 10), w_shape=(8, 5, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                               bias=False),
    "1x1": dict(x_shape=(2, 16, 7, 7), w_shape=(24, 16, 1, 1)),
    "7x7_stride2_pad3": dict(x_shape=(1, 3, 20, 20), w_shape=(8, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    "dilation2": dict(x_shape=(1, 4, 12, 12), w_shape=(5, 4, 3, 3), dilations=(2, 2), pads=(2, 1, 2, 0)),
    "groups2": dict(x_shape=(2, 6, 8, 8), w_shape=(10, 3, 3, 3), group=2, pads=(1, 1, 1, 1)),
    "depthwise": dict(x_shape=(1, 8, 9, 9), w_shape=(8, 1, 3, 3), group=8, pads=(1, 1, 1, 1), strides=(2, 2)),
    "residual_relu": dict(x_shape=(1, 8, 6, 6), w_shape=(8, 8, 3, 3), pads=(1, 1, 1, 1), residual=True,
                          epilogue=("Relu",)),
    "clip": dict(x_shape=(1, 3, 6, 6), w_shape=(4, 3, 3, 3), epilogue=("Clip",)),
    "ragged_10x13x13": dict(x_shape=(2, 7, 13, 13), w_shape=(10, 7, 3, 3), pads=(1, 1, 1, 1)),
    "asymmetric_groups_dilation": dict(x_shape=(3, 4, 6, 7), w_shape=(34, 2, 2, 3), group=2, strides=(2, 1),
                                       pads=(0, 1, 1, 0), dilations=(1, 2)),
    "kernel_over_input": dict(x_shape=(1, 2, 3, 3), w_shape=(4, 2, 5, 5), pads=(2, 2, 2, 2)),
    # K = 40 * 9 = 360: several K steps, the last one ragged; M = 70: two row tiles
    "deep_k": dict(x_shape=(1, 40, 5, 5), w_shape=(70, 40, 3, 3), pads=(1, 1, 1, 1), epilogue=("Relu",)),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_conv(name) -> None:
    model, feeds = conv_case(**CONVS[name])
    assert_gpu_matches_ort(model, feeds, **TOL)


def matmul_case(a_shape, b_shape, bias_shape=None, relu=False, b_const=True):
    feeds = {"a": rand(*a_shape)}
    inits = {}
    (inits if b_const else feeds)["b"] = rand(*b_shape, seed=1)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t0"])]
    if bias_shape is not None:
        inits["c"] = rand(*bias_shape, seed=2)
        nodes.append(helper.make_node("Add", ["t0", "c"], ["t1"]))
    if relu:
        nodes.append(helper.make_node("Relu", [f"t{len(nodes) - 1}"], [f"t{len(nodes)}"]))
    nodes[-1].output[0] = "y"
    return make_model(nodes, feeds, ["y"], inits), feeds


@pytest.mark.parametrize("case", [
    dict(a_shape=(1, 512), b_shape=(512, 1000), bias_shape=(1000,)),  # a classifier: M = 1, K split in the block
    dict(a_shape=(3, 5, 7), b_shape=(7, 9), relu=True),
    dict(a_shape=(2, 1, 6, 33), b_shape=(3, 33, 5), b_const=False),  # batch dims broadcast both ways
    dict(a_shape=(70, 20), b_shape=(20, 130), bias_shape=(70, 1)),  # ragged in M and N
])
def test_matmul(case) -> None:
    model, feeds = matmul_case(**case)
    assert_gpu_matches_ort(model, feeds, **TOL)


def test_gemm_trans_b_alpha_beta() -> None:
    """Gemm arrives as MatMul (alpha folded into B, beta into C) with C as its Add epilogue."""
    a = rand(4, 17)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)]
    model = make_model(nodes, {"a": a}, ["y"], {"w": rand(11, 17, seed=1), "c": rand(11, seed=2)})
    assert_gpu_matches_ort(model, {"a": a}, **TOL)


def test_large_tile_assembles_without_spills() -> None:
    """The 128 x 128 tile (64 accumulators per thread) on a problem big enough to choose it."""
    model, _ = conv_case(x_shape=(8, 64, 56, 56), w_shape=(256, 64, 1, 1))
    for spec in ("cuda:sm_80", "cuda:sm_90"):
        gm = compiled_for(model, spec)  # checks ptxas's report: no spills
        assert gm.launches[0].threads == 256 and gm.launches[0].grid == (196, 2, 1)


@pytest.mark.parametrize("dims, tile", [
    (GemmDims(256, 8 * 56 * 56, 64, 1), (128, 128, 1, 256)),  # big: the largest tile fills the SMs
    (GemmDims(64, 112 * 112, 147, 1), (64, 64, 1, 256)),  # ResNet's stem at batch 1: BM capped at M
    (GemmDims(512, 49, 4608, 1), (32, 32, 4, 1024)),  # 7x7 layer at batch 1: 32 blocks, 4 K groups each
    (GemmDims(1, 1000, 2048, 1), (1, 32, 32, 1024)),  # classifier: one row, K split over 32 thread groups
    (GemmDims(1, 1000, 64, 1), (1, 32, 8, 256)),  # short K: not widened past two K steps
])
def test_tile_rule(dims, tile) -> None:
    t = choose_tile(dims, gpu_target("cuda:sm_90"))
    assert (t.bm, t.bn, t.ks, t.threads) == tile
    assert t.tm * t.tn * t.threads == t.bm * t.bn * t.ks
