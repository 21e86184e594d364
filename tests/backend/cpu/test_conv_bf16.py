"""bf16 convolutions (backend/cpu/conv.py in the BF16 format, on backend/cpu/dpbf16.py) against
a float64 numpy reference, over the variants that run in bf16: 1x1 GEMMs, "KO" weights (with
and without im2col, with several K chunks), blocked im2col (strided, padded, dilated, grouped, several
K chunks, RGB stems), odd K (a zero-padded last pair) and ragged N, at one and two threads.

The tolerance is bf16's rounding, derived, not picked: each operand is rounded to 8
significant bits (round to nearest even: relative error <= U = 2^-9), so a product is off
by at most (2U + U^2) of its size; products of two bf16 values are exact in float32, and
the float32 sums (vdpbf16ps, the K chunks, the bias) add at most (K + 2) float32 roundings
(2^-24 each) of the sum of magnitudes. With S = sum |w*x| (+ |bias|), elementwise:
|y - y64| <= (2U + U^2) * S + (K + 2) * 2^-24 * S; Relu does not widen it. Each case
also checks the rounding itself: against the float64 result on operands rounded to bf16
first (ml_dtypes, nearest even) only the float32 sums' (K + 2) * 2^-24 * S remains, which
a float32 kernel (off by ~U * S) would miss."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.plan.conv import conv_plan
from hobbit.plan.format import BF16
from hobbit.target import host_target
from tests.helpers import make_model, needs_host_feature, rand

U = 2.0 ** -9  # bf16's unit roundoff
EPS = 2.0 ** -24  # float32's

CASES = [
    # id, (N, C, H, W), (OC, KH, KW), strides, pads, dilations, group, variant, by_channel
    ("1x1", (1, 40, 12, 12), (24, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, "gemm", False),
    ("1x1-oddK-raggedN", (2, 37, 13, 13), (20, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, "gemm", False),
    ("1x1-grouped", (1, 32, 12, 12), (48, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4, "gemm", False),
    ("KO-1x1", (1, 48, 7, 7), (32, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, "gemm", True),
    # dilated: undilated, these 3x3 convs run as bf16 Winograd (tests/backend/cpu/test_winograd_bf16.py)
    ("KO-3x3-dilated-oddK", (1, 33, 7, 7), (48, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, "gemm", True),
    ("KO-3x3-dilated-chunks", (1, 512, 7, 7), (32, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, "gemm", True),
    ("3x3-s2-pad", (1, 24, 29, 31), (40, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "im2col", False),
    ("3x3-s1-fewC", (2, 12, 20, 18), (24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "im2col", False),
    ("3x3-grouped", (1, 32, 20, 20), (48, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, "im2col", False),
    ("5x5-dilated-asym", (1, 10, 23, 19), (17, 5, 5), (1, 2), (2, 1, 3, 0), (2, 1), 1, "im2col", False),
    ("3x3-s2-chunks", (1, 256, 15, 15), (32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "im2col", False),
    ("stem-7x7-s2", (1, 3, 45, 41), (64, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, "im2col", False),
    ("stem-3x3-s2", (1, 3, 50, 50), (32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "im2col", False),
]


def _model(xshape, wshape, strides, pads, dilations, group):
    oc, kh, kw = wshape
    cg = xshape[1] // group
    w = (rand(oc, cg, kh, kw, seed=1) / np.sqrt(cg * kh * kw)).astype(np.float32)
    b = rand(oc, seed=2)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], strides=strides, pads=pads, dilations=dilations,
                              group=group),
             helper.make_node("Relu", ["c"], ["y"])]
    x = rand(*xshape, seed=3)
    return make_model(nodes, {"x": x}, ["y"], {"W": w, "B": b}), x, w, b


def conv64(x: np.ndarray, w: np.ndarray, strides, pads, dilations, group: int) -> np.ndarray:
    """The convolution (no bias) in float64, tap by tap."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    pt, pl, pb, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    oc, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    ocg = oc // group
    y = np.zeros((n, oc, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            for g in range(group):
                y[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch[:, g * cg:(g + 1) * cg],
                                                         w[g * ocg:(g + 1) * ocg, :, i, j])
    return y


def to_bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).astype(np.float32)


def bf16_bound(magnitudes: np.ndarray, k: int) -> np.ndarray:
    """The elementwise error bound of the module docstring, for S = `magnitudes`."""
    return (2 * U + U * U) * magnitudes + (k + 2) * EPS * magnitudes


@needs_host_feature("avx512bf16")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bf16_conv_within_rounding_bound(case, threads):
    _, xshape, wshape, strides, pads, dilations, group, variant, by_channel = case
    model, x, w, b = _model(xshape, wshape, strides, pads, dilations, group)
    conv = lower_to_llvm(model, threads=threads, precision="bf16", keep_ir=False).graph.nodes[0]
    plan = conv_plan(conv, host_target(), threads)
    assert conv.attrs.get("precision") == "bf16" and plan.format == BF16
    assert (plan.variant, plan.by_channel) == (variant, by_channel), "this case should take another variant"
    got = hobbit.compile(model, threads=threads, precision="bf16", cache=False).run({"x": x})[0]
    bias = b.astype(np.float64)[None, :, None, None]
    want = np.maximum(conv64(x, w, strides, pads, dilations, group) + bias, 0)
    magnitudes = conv64(np.abs(x), np.abs(w), strides, pads, dilations, group) + np.abs(bias)
    k = wshape[1] * wshape[2] * (xshape[1] // group)
    err = np.abs(got - want)
    assert got.shape == want.shape
    assert np.all(err <= bf16_bound(magnitudes, k)), f"max excess {np.max(err / bf16_bound(magnitudes, k)):.3f}"
    rounded = np.maximum(conv64(to_bf16(x), to_bf16(w), strides, pads, dilations, group) + bias, 0)
    assert np.all(np.abs(got - rounded) <= (k + 2) * EPS * magnitudes * (1 + 4 * U)), "operands not rounded to bf16"
