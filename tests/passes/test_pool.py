"""fuse-pool: a 2x2 stride-2 max pool runs in the output transform of the Winograd conv
it reads, when that cannot change the result."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.compiler import lower_to_llvm
from tests.helpers import make_model, rand, run_ort


def _model(c: int, h: int, w: int, oc: int, batch: int = 1, act: str = "Relu", pool: dict | None = None,
           residual: bool = False):
    x = rand(batch, c, h, w)
    inits = {"W": rand(oc, c, 3, 3, seed=1) * 0.1, "B": rand(oc, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1])]
    feeds = {"x": x}
    if residual:
        feeds["r"] = rand(batch, oc, h, w, seed=3)
        nodes.append(helper.make_node("Add", ["c", "r"], ["c2"]))
        nodes.append(helper.make_node(act, ["c2"], ["a"]))
    else:
        nodes.append(helper.make_node(act, ["c"], ["a"]))
    attrs = pool or {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes.append(helper.make_node("MaxPool", ["a"], ["y"], **attrs))
    return make_model(nodes, feeds, ["y"], inits), feeds


CASES = [  # (C, H, W, OC, batch): F(2x2) and F(4x4); banded, whole-image and tiles-as-rows GEMMs
    (16, 12, 12, 16, 1),
    (32, 28, 28, 32, 2),
    (64, 14, 14, 64, 1),
    (32, 20, 36, 48, 1),
    (16, 160, 160, 16, 1),
    (64, 56, 56, 64, 1),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}x{c[2]}c{c[0]}" for c in CASES])
def test_fused_pool_matches_onnxruntime(case, threads):
    c, h, w, oc, batch = case
    model, feeds = _model(c, h, w, oc, batch)
    graph = lower_to_llvm(model, threads=threads).graph
    assert [(n.op, n.attrs.get("pool")) for n in graph.nodes] == [("ConvWinograd", 2)]
    expected = run_ort(model, feeds)[0]
    got = hobbit.compile(model, threads=threads, cache=False).run(feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("variant", ["pool3x3", "padded", "odd", "residual", "not-monotone"])
def test_pool_stays_separate(variant):
    kwargs = {
        "pool3x3": {"pool": {"kernel_shape": [3, 3], "strides": [2, 2]}},
        "padded": {"pool": {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1]}},
        "odd": {"h": 13},
        "residual": {"residual": True},
        "not-monotone": {"act": "Abs"},
    }[variant]
    h = kwargs.pop("h", 12)
    model, feeds = _model(16, h, h, 16, **kwargs)
    graph = lower_to_llvm(model).graph
    assert "MaxPool" in [n.op for n in graph.nodes]
    expected = run_ort(model, feeds)[0]
    np.testing.assert_allclose(hobbit.compile(model, cache=False).run(feeds)[0], expected, rtol=1e-4, atol=1e-4)
