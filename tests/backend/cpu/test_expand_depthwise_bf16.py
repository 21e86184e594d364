"""The fused expansion + depthwise (+ projection) kernel in bf16 (precision="bf16": its two
1x1 GEMMs on vdpbf16ps, the depthwise conv in float32) against float64 numpy, with and
without the projection and the residual Add, odd channel counts (a zero-padded last pair),
strides 1 and 2, at one and two threads.

The tolerance is bf16's rounding carried through the block, derived, not picked (U = 2^-9,
EPS = 2^-24, as in tests/backend/cpu/test_conv_bf16.py):

* expansion, K1 = C_in: with S1 = |W1| |x| + |b1|, |mid - mid64| <= E1 = (2U + U^2 +
  (K1 + 2) EPS) S1; the Clip after it does not widen it;
* depthwise, float32, 9 taps and a bias: E2 = dw(E1, |W2|) + 11 EPS (dw(|mid64| + E1,
  |W2|) + |b2|), again through a Clip;
* projection, K3 = C_mid, on y rounded to bf16 (|y_bf - y64| <= (1 + U) E2 + U |y64|) and W3
  rounded: |p - p64| <= |W3| ((1 + U)^2 E2 + (2U + U^2) |y64|) + (K3 + 3) EPS S3, with
  S3 = |W3| (|y64| + E2) (1 + U)^2 + |b3| (+ |x| with the residual Add, one more rounding).

Each case also checks that the GEMMs did round to bf16: the bound is mostly 2U (2^16 EPS) of
the magnitudes, so a float32 kernel's error (tens of EPS) would stay under 1% of it
everywhere."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

import hobbit
from hobbit.compiler import lower_to_llvm
from hobbit.plan.format import BF16
from hobbit.plan.planners import kernel_plan
from hobbit.target import host_target
from tests.backend.cpu.test_conv_bf16 import EPS, U, conv64
from tests.backend.cpu.test_expand_depthwise import _block
from tests.helpers import needs_host_feature

CASES = [
    # id, (C_in, C_mid, H, W, stride), project, residual, threads
    ("block-s1-residual", (16, 96, 80, 77, 1), True, True, 1),
    ("block-s2-oddC", (15, 97, 79, 80, 2), True, False, 2),
    ("expand-depthwise-s1", (16, 96, 80, 80, 1), False, False, 2),
    ("expand-depthwise-s2-oddC", (9, 112, 77, 71, 2), False, False, 1),
]


def _clip(v: np.ndarray) -> np.ndarray:
    return np.clip(v, 0, 6)


def _reference(x: np.ndarray, inits: dict, stride: int, project: bool, residual: bool):
    """The block in float64 and its elementwise error bound (the module docstring's)."""
    pads, strides, one = (1, 1, 1, 1), (stride, stride), ((1, 1), (0, 0, 0, 0), (1, 1), 1)
    w1, b1 = inits["w1"].astype(np.float64), inits["b1"][None, :, None, None].astype(np.float64)
    w2, b2 = inits["w2"].astype(np.float64), inits["b2"][None, :, None, None].astype(np.float64)
    mid = _clip(conv64(x, w1, *one) + b1)
    e1 = (2 * U + U * U + (x.shape[1] + 2) * EPS) * (conv64(np.abs(x), np.abs(w1), *one) + np.abs(b1))
    group = w2.shape[0]
    y = _clip(conv64(mid, w2, strides, pads, (1, 1), group) + b2)
    e2 = conv64(e1, np.abs(w2), strides, pads, (1, 1), group) + \
        11 * EPS * (conv64(np.abs(mid) + e1, np.abs(w2), strides, pads, (1, 1), group) + np.abs(b2))
    if not project:
        return y, e2
    w3, b3 = inits["w3"].astype(np.float64), inits["b3"][None, :, None, None].astype(np.float64)
    p = conv64(y, w3, *one) + b3
    s3 = conv64(np.abs(y) + e2, np.abs(w3), *one) * (1 + U) ** 2 + np.abs(b3)
    if residual:
        p, s3 = p + x, s3 + np.abs(x)
    k3 = w3.shape[1]
    err = conv64(e2, np.abs(w3), *one) * (1 + U) ** 2 + (2 * U + U * U) * conv64(np.abs(y), np.abs(w3), *one)
    return p, err + (k3 + 3) * EPS * s3


@needs_host_feature("avx512bf16")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bf16_block_within_rounding_bound(case) -> None:
    _, (c_in, c_mid, h, w, stride), project, residual, threads = case
    model, x = _block(c_in, c_mid, h, w, stride, 1, [1, 1, 1, 1], residual=residual, project=project)
    node, = lower_to_llvm(model, threads=threads, precision="bf16", keep_ir=False).graph.nodes
    assert (node.op, node.attrs.get("precision")) == ("ExpandDepthwise", "bf16")
    assert kernel_plan(node, host_target(), threads).format == BF16
    got = hobbit.compile(model, threads=threads, precision="bf16", cache=False).run({"x": x})[0]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    want, bound = _reference(x, inits, stride, project, residual)
    err = np.abs(got - want)
    assert got.shape == want.shape
    assert np.all(err <= bound), f"max excess {np.max(err / bound):.3f}"
    assert np.max(err / (bound + 1e-30)) > 0.01, "the GEMMs did not round to bf16"
