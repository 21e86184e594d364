"""The fused 1x1-expansion + depthwise kernel against onnxruntime (the two convs unfused)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.target import parse_target
from hobbit.compiler import lower_to_llvm
from tests.helpers import make_model, rand, run_ort


def _block(c_in: int, c_mid: int, h: int, w: int, stride: int, dilation: int, pads: list[int],
           batch: int = 1, bias: bool = True, residual: bool = False, project: bool = False):
    x = rand(batch, c_in, h, w)
    inits = {"w1": rand(c_mid, c_in, 1, 1, seed=1) * 0.3, "w2": rand(c_mid, 1, 3, 3, seed=2) * 0.3,
             "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    expand_in = ["x", "w1"] + (["b1"] if bias else [])
    depth_in = ["e6", "w2"] + (["b2"] if bias else [])
    if bias:
        inits.update(b1=rand(c_mid, seed=3), b2=rand(c_mid, seed=4))
    nodes = [helper.make_node("Conv", expand_in, ["e"], kernel_shape=[1, 1], name="expand"),
             helper.make_node("Clip", ["e", "lo", "hi"], ["e6"]),
             helper.make_node("Conv", depth_in, ["d"], kernel_shape=[3, 3], group=c_mid, strides=[stride, stride],
                              dilations=[dilation, dilation], pads=pads, name="depthwise"),
             helper.make_node("Clip", ["d", "lo", "hi"], ["y"])]
    outputs = ["y"]
    if project:
        inits["w3"] = rand(c_in, c_mid, 1, 1, seed=5) * 0.2
        nodes.append(helper.make_node("Conv", ["y", "w3"] + (["b3"] if bias else []), ["p"], kernel_shape=[1, 1],
                                      name="project"))
        if bias:
            inits["b3"] = rand(c_in, seed=6)
        outputs = ["p"]
        if residual:
            nodes.append(helper.make_node("Add", ["p", "x"], ["z"]))
            outputs = ["z"]
    elif residual:
        nodes.append(helper.make_node("Add", ["y", "y"], ["z"]))
        outputs = ["z"]
    return make_model(nodes, {"x": x}, outputs, inits), x


CASES = [  # expansions above the L2 size, which is when the pass fuses
    (16, 96, 80, 80, 1, 1, [1, 1, 1, 1]),
    (16, 96, 80, 80, 2, 1, [1, 1, 1, 1]),
    (8, 112, 77, 71, 2, 1, [0, 1, 1, 0]),    # odd sizes, asymmetric pads
    (8, 120, 75, 69, 1, 2, [2, 2, 2, 2]),    # dilation 2
    (8, 128, 72, 72, 1, 1, [0, 0, 0, 0]),    # no padding
    (8, 96, 80, 80, 3, 1, [1, 1, 1, 1]),     # stride 3: taps through a padded plane
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[2]}x{c[3]}s{c[4]}d{c[5]}p{''.join(map(str, c[6]))}" for c in CASES])
def test_fused_block_matches_onnxruntime(case: tuple, threads: int) -> None:
    model, x = _block(*case)
    graph = lower_to_llvm(model, threads=threads).graph
    assert [n.op for n in graph.nodes] == ["ExpandDepthwise"], [n.op for n in graph.nodes]
    got = hobbit.compile(model, threads=threads).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_batch_and_missing_biases() -> None:
    model, x = _block(8, 96, 80, 80, 2, 1, [1, 1, 1, 1], batch=2, bias=False)
    got = hobbit.compile(model).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_small_intermediate_stays_two_kernels() -> None:
    """A tensor that L3 serves quickly is not worth the recomputed rows. For a Zen 4 (1 MiB of
    L2), whatever the host's L2 (the decision reads the target's)."""
    model, _ = _block(8, 96, 40, 40, 1, 1, [1, 1, 1, 1])
    target = parse_target("znver4")
    assert 96 * 40 * 40 * 4 < target.l2_bytes
    assert [n.op for n in lower_to_llvm(model, target=target).graph.nodes] == ["Conv", "Conv"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("stride,residual", [(1, True), (2, False)])
def test_whole_inverted_residual_block(stride: int, residual: bool, threads: int) -> None:
    """Expansion, depthwise and projection (+ the residual Add) become one kernel."""
    model, x = _block(16, 96, 80, 77, stride, 1, [1, 1, 1, 1], batch=2, residual=residual, project=True)
    graph = lower_to_llvm(model, threads=threads).graph
    assert [n.op for n in graph.nodes] == ["ExpandDepthwise"]
    assert [s.op for s in graph.nodes[0].epilogue] == (["Add"] if residual else [])
    got = hobbit.compile(model, threads=threads).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
