"""BatchNorm folding into Conv / MatMul producers, and Mul+Add decomposition otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.passes.batchnorm import fold_batchnorm
from tests.helpers import assert_matches_ort, make_model, rand
from tests.passes import evaluate, import_model, ops


def _bn_params(c: int, seed: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"scale": rng.uniform(0.5, 2.0, c).astype(np.float32),
            "bias": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32),
            "var": rng.uniform(0.2, 3.0, c).astype(np.float32)}


def _bn(x: str, y: str, eps: float = 1e-3) -> object:
    return helper.make_node("BatchNormalization", [x, "scale", "bias", "mean", "var"], [y], name="bn", epsilon=eps)


def _check(nodes, feeds, outputs, inits, expect_ops, rtol=1e-4, atol=1e-5):
    """Fold, check the resulting op list and that the numbers did not change; also compile."""
    graph = import_model(nodes, feeds, outputs, inits)
    reference = evaluate(graph, feeds)
    fold_batchnorm(graph)
    assert ops(graph) == expect_ops
    for got, want in zip(evaluate(graph, feeds), reference):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert_matches_ort(make_model(nodes, feeds, outputs, inits), feeds, rtol=1e-4, atol=1e-4)
    return graph


@pytest.mark.parametrize("with_bias", [False, True])
def test_folds_into_conv(with_bias: bool) -> None:
    x, w, b = rand(2, 3, 6, 6), rand(4, 3, 3, 3, seed=1), rand(4, seed=2)
    inits = {"w": w, **_bn_params(4)} | ({"b": b} if with_bias else {})
    conv = helper.make_node("Conv", ["x", "w"] + (["b"] if with_bias else []), ["c"], name="conv", pads=[1, 1, 1, 1])
    graph = _check([conv, _bn("c", "y")], {"x": x}, ["y"], inits, ["Conv"])
    node = graph.nodes[0]
    assert node.outputs[0] is graph.outputs[0]
    assert len(node.inputs) == 3
    new_w, new_b = node.inputs[1].const, node.inputs[2].const
    assert new_w.dtype == np.float32 and new_b.dtype == np.float32
    assert new_w.shape == w.shape and not np.allclose(new_w, w)
    p = _bn_params(4)
    s = p["scale"] / np.sqrt(p["var"] + 1e-3)
    np.testing.assert_allclose(new_w, w * s[:, None, None, None], rtol=1e-5)
    np.testing.assert_allclose(new_b, ((b if with_bias else 0) - p["mean"]) * s + p["bias"], rtol=1e-5, atol=1e-6)


def test_folds_into_matmul_with_constant_b() -> None:
    x, w = rand(5, 6), rand(6, 4, seed=1)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), _bn("m", "y")]
    graph = _check(nodes, {"x": x}, ["y"], {"w": w, **_bn_params(4)}, ["MatMul"])
    node = graph.nodes[0]
    assert not np.allclose(node.inputs[1].const, w)
    assert [s.op for s in node.epilogue] == ["Add"] and node.epilogue[0].operand.const.shape == (4,)


def test_folds_into_gemm_without_c() -> None:
    x, w = rand(5, 6), rand(4, 6, seed=1)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["m"], name="gemm", transB=1), _bn("m", "y")]
    _check(nodes, {"x": x}, ["y"], {"w": w, **_bn_params(4)}, ["MatMul"])


def test_gemm_with_c_still_loses_its_batchnorm() -> None:
    x, w, c = rand(5, 6), rand(6, 4, seed=1), rand(4, seed=2)
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["m"], name="gemm"), _bn("m", "y")]
    graph = _check(nodes, {"x": x}, ["y"], {"w": w, "c": c, **_bn_params(4)}, ["MatMul", "Add", "Mul", "Add"])
    assert "BatchNormalization" not in ops(graph)


def test_matmul_with_runtime_b_is_not_folded() -> None:
    x, w = rand(5, 6), rand(6, 4, seed=1)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), _bn("m", "y")]
    _check(nodes, {"x": x, "w": w}, ["y"], _bn_params(4), ["MatMul", "Mul", "Add"])


def test_standalone_batchnorm_becomes_mul_add() -> None:
    x = rand(2, 3, 4, 5)
    graph = _check([_bn("x", "y")], {"x": x}, ["y"], _bn_params(3), ["Mul", "Add"])
    mul, add = graph.nodes
    assert mul.inputs[0] is graph.inputs[0] and add.inputs[0] is mul.outputs[0]
    assert mul.inputs[1].const.shape == (3, 1, 1) and add.inputs[1].const.shape == (3, 1, 1)
    assert add.outputs[0] is graph.outputs[0]


def test_conv_output_with_another_reader_is_not_folded() -> None:
    """The Conv result is also needed unscaled, so the BN must stay separate."""
    x, w = rand(1, 3, 5, 5), rand(4, 3, 3, 3, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), _bn("c", "y"),
             helper.make_node("Relu", ["c"], ["z"], name="relu")]
    graph = _check(nodes, {"x": x}, ["y", "z"], {"w": w, **_bn_params(4)}, ["Conv", "Mul", "Add", "Relu"])
    np.testing.assert_array_equal(graph.nodes[0].inputs[1].const, w)


def test_conv_output_that_is_a_graph_output_is_not_folded() -> None:
    x, w = rand(1, 3, 5, 5), rand(4, 3, 3, 3, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), _bn("c", "y")]
    _check(nodes, {"x": x}, ["y", "c"], {"w": w, **_bn_params(4)}, ["Conv", "Mul", "Add"])


def test_conv_with_runtime_weights_is_not_folded() -> None:
    x, w = rand(1, 3, 5, 5), rand(4, 3, 3, 3, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), _bn("c", "y")]
    _check(nodes, {"x": x, "w": w}, ["y"], _bn_params(4), ["Conv", "Mul", "Add"])


def _conv_then(steps: list[tuple[str, str, bool]], consts: dict[str, np.ndarray]):
    """Conv, then element-wise steps (op, constant name, constant first?) in a chain ending in y."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv", pads=[1, 1, 1, 1])]
    for i, (op, const, first) in enumerate(steps):
        out = "y" if i == len(steps) - 1 else f"t{i + 1}"
        nodes.append(helper.make_node(op, [const, f"t{i}"] if first else [f"t{i}", const], [out], name=f"{op}{i}"))
    return nodes, {"x": rand(2, 3, 6, 6)}, {"w": rand(4, 3, 3, 3, seed=1), **consts}


def test_decomposed_batchnorm_folds_into_the_conv() -> None:
    """Keras 3's inference BatchNorm: Sub mean, Mul by gamma/sqrt(var+eps), Add beta; and a Div,
    per channel in the shapes a converter writes them: (C,1,1), (1,C,1,1), a scalar."""
    consts = {"mean": rand(4, 1, 1, seed=3), "inv": rand(1, 4, 1, 1, seed=4) + 1.5, "beta": rand(4, 1, 1, seed=5),
              "half": np.array(2.0, np.float32), "one": np.ones((1, 4, 1, 1), np.float32)}
    nodes, feeds, inits = _conv_then([("Sub", "mean", False), ("Mul", "inv", True), ("Add", "beta", True),
                                      ("Div", "half", False), ("Mul", "one", False)], consts)
    graph = _check(nodes, feeds, ["y"], inits, ["Conv"])
    assert graph.nodes[0].outputs[0] is graph.outputs[0]


@pytest.mark.parametrize("step, const", [
    (("Mul", "spatial", False), {"spatial": rand(1, 1, 6, 6, seed=3)}),  # not per channel
    (("Sub", "c", True), {"c": rand(4, 1, 1, seed=3)}),  # c - conv negates the filters: left alone
    (("Div", "c", True), {"c": rand(4, 1, 1, seed=3)}),
    (("Add", "per_sample", False), {"per_sample": rand(2, 4, 1, 1, seed=3)}),  # differs along the batch
])
def test_what_is_not_per_channel_stays(step, const) -> None:
    nodes, feeds, inits = _conv_then([step], const)
    _check(nodes, feeds, ["y"], inits, ["Conv", step[0]])


def test_a_conv_read_twice_keeps_its_affine_step() -> None:
    nodes, feeds, inits = _conv_then([("Mul", "s", False)], {"s": rand(4, 1, 1, seed=3)})
    nodes.append(helper.make_node("Relu", ["t0"], ["r"], name="relu"))
    _check(nodes, feeds, ["y", "r"], inits, ["Conv", "Mul", "Relu"])
