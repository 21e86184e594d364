"""The float32 polynomial transcendentals (hobbit.emit.trig, Emit.exp/log/pow) over
their whole domain: random values at every magnitude from 1e-40 to 3e38, values
next to the edges of each domain (+-1, overflow thresholds) and inf/NaN/+-0,
against numpy in float64. The claim is a few float32 ulps (checked at 2e-6)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit

FUNCTIONS = {"Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
             "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh,
             "Atanh": np.arctanh, "Exp": np.exp, "Log": np.log}


def _domain_sample() -> np.ndarray:
    rng = np.random.default_rng(0)
    magnitudes = [rng.uniform(-1, 1, 150) * 10.0 ** e for e in range(-40, 39)]
    edges = [1 + rng.uniform(-1e-3, 1e-3, 300), -1 + rng.uniform(-1e-3, 1e-3, 300), rng.uniform(-1.2, 1.2, 2000),
             rng.uniform(85, 105, 500), -rng.uniform(85, 105, 500), rng.uniform(-1e5, 1e5, 1000)]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0 ** 50, -(2.0 ** 50), 1e-45, 3.4e38, -3.4e38]
    with np.errstate(over="ignore"):
        return np.concatenate(magnitudes + edges + [np.array(special)]).astype(np.float32)


def _compile(ops: list[str], n: int, elem: int = TensorProto.FLOAT):
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], [op]) for op in ops], "f",
        [helper.make_tensor_value_info("x", elem, [n])], [helper.make_tensor_value_info(op, elem, [n]) for op in ops])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return hobbit.compile(model)


def test_float32_functions_over_their_whole_domain():
    x = _domain_sample()
    got = _compile(list(FUNCTIONS), len(x)).run({"x": x})
    for (op, fn), y in zip(FUNCTIONS.items(), got):
        with np.errstate(all="ignore"):
            ref = fn(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(ref), err_msg=f"{op}: NaN where numpy has none")
        infinite = np.isinf(ref) | np.isinf(y)
        np.testing.assert_array_equal(y[infinite], ref[infinite], err_msg=f"{op}: overflow")
        finite = np.isfinite(ref) & np.isfinite(y)
        rel = np.abs(y[finite].astype(np.float64) - ref[finite]) / np.maximum(np.abs(ref[finite]), 1e-37)
        assert rel.max() < 2e-6, (op, x[finite][np.argmax(rel)], rel.max())


@pytest.mark.parametrize("op", ["Sin", "Tan", "Atan", "Asinh", "Acosh", "Atanh", "Cosh"])
def test_float64_functions_keep_double_precision(op):
    x = np.concatenate([np.linspace(-3, 3, 101), np.linspace(1, 50, 33), [0.0, np.inf, np.nan]])
    with np.errstate(all="ignore"):
        ref = FUNCTIONS[op](x)
    y = _compile([op], len(x), TensorProto.DOUBLE).run({"x": x})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=0)


def test_pow_special_cases_follow_c99():
    base = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-30, 7.0])
    a, b = (v.ravel().astype(np.float32) for v in np.meshgrid(base, base))
    graph = helper.make_graph(
        [helper.make_node("Pow", ["a", "b"], ["y"])], "pow",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [a.size]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.size])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 10
    y = hobbit.compile(model).run({"a": a, "b": b})[0]
    with np.errstate(all="ignore"):
        ref = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=0)
