"""bf16 Winograd F(2x2, 3x3) convolutions (backend/cpu/winograd.py in the BF16 format: the
float32 transforms around GEMMs on vdpbf16ps) against float64 numpy, over both GEMM
orientations (tiles as rows, U broadcast), the whole image and bands, odd channels, ragged
tiles, asymmetric pads and a batch, at one and two threads.

The tolerance is bf16's rounding carried through the transforms, derived, not picked. The
kernel computes V = B^T d B in float32 (F(2x2)'s B has entries 0 and +-1: each V is two
levels of one add, off by at most 2 float32 roundings), rounds U = G g G^T and V to bf16
(relative error <= U_bf = 2^-9 each, so a product is off by (2 U_bf + U_bf^2) of its size),
sums the products over C in float32 and applies A^T M A (entries 0 and +-1) and the bias in
float32. With S = |A^T| (sum_c |U_c| |B^T| |d_c| |B|) |A| + |bias| (every magnitude the
errors scale with), elementwise |y - y64| <= (2 U_bf + U_bf^2 + (C + 8) * 2^-24) * S.
Each case also checks that U and V were rounded: against the float64 result on U and V
rounded to bf16 first (V from the same float32 adds in the same order: rows, then columns),
only the float32 sums' (C + 8) * 2^-24 * S remains, which a float32
kernel (off by ~U_bf * S) would miss."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.plan.planners import kernel_plan
from hobbit.plan.winograd import VARIANTS, transform_weights
from hobbit.target import host_target
from tests.helpers import make_model, needs_host_feature, rand
from tests.backend.cpu.test_conv_bf16 import EPS, U, to_bf16

F2 = VARIANTS[2]

CASES = [
    # id, (N, C, H, W), OC, pads, threads, by_tile, banded
    ("by-tile", (1, 16, 8, 8), 16, (1, 1, 1, 1), 1, True, False),
    ("ragged-OC-odd-C-asym-pads", (1, 17, 9, 11), 33, (0, 1, 2, 1), 1, False, False),
    ("by-tile-batch", (2, 64, 14, 14), 64, (1, 1, 1, 1), 2, True, False),
    ("whole-image", (1, 48, 17, 17), 64, (1, 1, 1, 1), 1, False, False),
    ("whole-image-odd-C", (1, 47, 17, 17), 40, (1, 1, 1, 1), 2, False, False),
    ("bands", (1, 96, 40, 40), 96, (1, 1, 1, 1), 2, False, True),
    ("bands-ragged", (1, 97, 41, 39), 96, (1, 0, 1, 1), 1, False, True),
]


def _model(xshape, oc: int, pads):
    c = xshape[1]
    w = (rand(oc, c, 3, 3, seed=1) / np.sqrt(9 * c)).astype(np.float32)
    b = rand(oc, seed=2)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=pads), helper.make_node("Relu", ["c"], ["y"])]
    x = rand(*xshape, seed=3)
    return make_model(nodes, {"x": x}, ["y"], {"W": w, "B": b}), x, w, b


def _tiles(x: np.ndarray, pads, oh: int, ow: int) -> np.ndarray:
    """The 4x4 input patches of every 2x2 output tile: [N, C, TH, TW, 4, 4] (zero past the edge)."""
    th, tw = -(-oh // 2), -(-ow // 2)
    pt, pl = pads[0], pads[1]
    n, c, h, w = x.shape
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=x.dtype)
    rows, cols = min(h, 2 * th + 2 - pt), min(w, 2 * tw + 2 - pl)
    xp[:, :, pt:pt + rows, pl:pl + cols] = x[:, :, :rows, :cols]
    idx_h = 2 * np.arange(th)[:, None] + np.arange(4)
    idx_w = 2 * np.arange(tw)[:, None] + np.arange(4)
    return xp[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]


def winograd(x: np.ndarray, w: np.ndarray, pads, oh: int, ow: int, bf16: bool = False,
             absolute: bool = False) -> np.ndarray:
    """F(2x2) Winograd in float64 (V from float32 adds, as the kernel computes it); with `bf16`,
    U and V rounded to bf16 first; with `absolute`, every matrix and value by its magnitude."""
    bt, at = (np.abs(F2.BT), np.abs(F2.AT)) if absolute else (F2.BT, F2.AT)
    d = _tiles(np.abs(x) if absolute else x, pads, oh, ow)
    u = np.abs(transform_weights(w, 2)) if absolute else transform_weights(w, 2)  # [16, OC, C], float32
    bt = bt.astype(np.float32)
    rows = np.einsum("ik,nctskl->nctsil", bt, d)  # B^T d first, then (B^T d) B: the kernel's order
    v = np.einsum("nctsil,jl->nctsij", rows, bt)
    if bf16:
        u, v = to_bf16(u), to_bf16(v)
    u = u.astype(np.float64).reshape(4, 4, *u.shape[1:])
    m = np.einsum("ijoc,nctsij->notsij", u, v.astype(np.float64))
    y = np.einsum("ri,notsij,qj->notrsq", at, m, at)  # [N, OC, TH, 2, TW, 2]
    n, oc, th, _, tw, _ = y.shape
    return y.reshape(n, oc, 2 * th, 2 * tw)[:, :, :oh, :ow]


@needs_host_feature("avx512bf16")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bf16_winograd_within_rounding_bound(case):
    _, xshape, oc, pads, threads, by_tile, banded = case
    model, x, w, b = _model(xshape, oc, pads)
    node = lower_to_llvm(model, threads=threads, precision="bf16", keep_ir=False).graph.nodes[0]
    plan = kernel_plan(node, host_target(), threads)
    assert (node.op, node.attrs["tile"], node.attrs.get("precision")) == ("ConvWinograd", 2, "bf16")
    assert (plan.by_tile, plan.band > 0) == (by_tile, banded), "this case should take another variant"
    got = hobbit.compile(model, threads=threads, precision="bf16", cache=False).run({"x": x})[0]
    oh, ow = got.shape[2:]
    bias = b.astype(np.float64)[None, :, None, None]
    want = np.maximum(winograd(x, w, pads, oh, ow) + bias, 0)
    magnitudes = winograd(x, w, pads, oh, ow, absolute=True) + np.abs(bias)
    slack = (xshape[1] + 8) * EPS * magnitudes
    err = np.abs(got - want)
    bound = (2 * U + U * U) * magnitudes + slack
    assert np.all(err <= bound), f"max excess {np.max(err / bound):.3f}"
    rounded = np.maximum(winograd(x, w, pads, oh, ow, bf16=True) + bias, 0)
    assert np.all(np.abs(got - rounded) <= slack * (1 + 4 * U)), "U and V not rounded to bf16"
