"""MaxPool, AveragePool and the global pools with run-time height and width (issue 28):
single-op ONNX models with input [N, C, "h", "w"], compiled once at the bound
(dynamic_shapes) and run at many sizes inside it against onnxruntime.

The windows cover a CNN's: stride 1 and 2, padding on either side, dilation, ceil_mode
(SqueezeNet's MaxPool(3, 2, ceil_mode=1)), and for AveragePool count_include_pad on and
off, so the border columns of a run-time width (windows that start in the left padding or
reach past the run-time width) are counted as at a static size. The global pools are
reductions over H and W (hobbit/frontend/onnx/ops/pool.py): their mean divides by the
run-time count. Sizes cover the low bound, odd sizes, the bound, and a large size then a
small one (stale data from the earlier run must not show); each model must come back as a
DynamicModel (a silent per-shape fallback fails), at one and two threads. A white-box
check runs the module on bound-shaped buffers with NaN past the extents and a sentinel in
the outputs: nothing past an extent may be read into the result or written."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import hobbit
from tests.helpers import assert_inside_extents, run_ort

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, database=None)
LOW, HIGH = 5, 40
# (h, w): the low bound, odd and mixed sizes, the bound, then small again after large.
SIZES = [(HIGH, HIGH), (LOW, LOW), (7, 13), (HIGH, 9), (23, 31), (LOW, HIGH), (HIGH, HIGH), (6, 6)]
C = 3


def _model(op: str, dims: tuple, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "dynamic_pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# (op, attributes as sorted (name, value) pairs: hashable for the compile cache below)
POOLS = [
    ("MaxPool", (("kernel_shape", (3, 3)),)),
    ("MaxPool", (("kernel_shape", (3, 3)), ("pads", (1, 1, 1, 1)))),
    ("MaxPool", (("kernel_shape", (3, 3)), ("strides", (2, 2)), ("ceil_mode", 1))),  # SqueezeNet's
    ("MaxPool", (("kernel_shape", (3, 3)), ("strides", (2, 2)), ("pads", (1, 1, 1, 1)))),  # ResNet's
    ("MaxPool", (("kernel_shape", (2, 3)), ("dilations", (2, 2)), ("pads", (0, 2, 1, 2)))),
    ("MaxPool", (("kernel_shape", (2, 2)), ("strides", (2, 2)), ("ceil_mode", 1))),
    ("AveragePool", (("kernel_shape", (3, 3)), ("pads", (1, 2, 1, 2)))),
    ("AveragePool", (("kernel_shape", (3, 2)), ("pads", (1, 1, 2, 1)), ("count_include_pad", 1))),
    ("AveragePool", (("kernel_shape", (3, 3)), ("strides", (2, 2)), ("ceil_mode", 1))),
    ("AveragePool", (("kernel_shape", (3, 3)), ("strides", (2, 2)), ("pads", (1, 1, 1, 1)),
                     ("count_include_pad", 1), ("ceil_mode", 1))),
    ("AveragePool", (("kernel_shape", (5, 5)), ("strides", (1, 2)), ("pads", (2, 2, 2, 2)))),
]
GLOBAL = [("GlobalAveragePool", ()), ("GlobalMaxPool", ())]


@functools.cache
def _compiled(op: str, attrs: tuple, dims: tuple, threads: int, bounds: tuple = (("h", (LOW, HIGH)),
                                                                                  ("w", (LOW, HIGH)))):
    model = _model(op, dims, **{k: list(v) if isinstance(v, tuple) else v for k, v in attrs})
    compiled = hobbit.compile(model, threads=threads, dynamic_shapes=dict(bounds), cache=False)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    return model, compiled


def _input(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _check(op: str, attrs: tuple, threads: int, h: int, w: int, n: int = 1, dims: tuple = (1, C, "h", "w"),
           **bounds) -> None:
    model, compiled = _compiled(op, attrs, dims, threads, **bounds)
    sizes = {"n": n, "h": h, "w": w}
    x = _input(tuple(sizes.get(d, d) for d in dims), h * 1000 + w)
    got = compiled.run({"x": x})[0]
    want = run_ort(model, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, attrs", POOLS + GLOBAL)
def test_pools(op: str, attrs: tuple, threads: int) -> None:
    for h, w in SIZES:
        _check(op, attrs, threads, h, w)


@given(h=st.integers(LOW, HIGH), w=st.integers(LOW, HIGH), case=st.sampled_from(POOLS))
@SETTINGS
def test_pools_drawn(h: int, w: int, case: tuple) -> None:
    _check(*case, 1, h, w)


@pytest.mark.parametrize("op, attrs", [POOLS[3], POOLS[9]])
def test_run_time_height_only(op: str, attrs: tuple) -> None:
    """A static width keeps the compile-time column segments; only the rows move."""
    for h in (LOW, 17, HIGH, 8):
        _check(op, attrs, 2, h, 21, dims=(1, C, "h", 21), bounds=(("h", (LOW, HIGH)),))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_static_output_width(op: str) -> None:
    """A run-time width whose output width stays 1 (a window 4 wide at stride 8 over 5 to 11
    columns): no vectors, every column a border column."""
    attrs = (("kernel_shape", (2, 4)), ("strides", (1, 8)), ("pads", (0, 1, 0, 0)))
    for h, w in [(9, 11), (LOW, LOW), (12, 8)]:
        _check(op, attrs, 1, h, w, bounds=(("h", (LOW, 12)), ("w", (LOW, 11))))


@pytest.mark.parametrize("op, attrs", [POOLS[2], POOLS[8], POOLS[9], POOLS[10]])
def test_same_bits_as_a_static_compile(op: str, attrs: tuple) -> None:
    """The window's elements are combined in the static kernel's order: the same bits, NaN
    and infinities included (a max takes the later element unless the running one strictly
    wins, as x86's maxps and onnxruntime do)."""
    model, compiled = _compiled(op, attrs, (1, C, "h", "w"), 1)
    for h, w in [(HIGH, HIGH), (17, 29)]:
        x = _input((1, C, h, w), h + w)
        x.reshape(-1)[::7], x.reshape(-1)[3::11], x.reshape(-1)[5::13] = np.nan, np.inf, -np.inf
        static = hobbit.compile(_model(op, (1, C, h, w), **{k: list(v) if isinstance(v, tuple) else v
                                                            for k, v in attrs}), threads=1, cache=False)
        np.testing.assert_array_equal(compiled.run({"x": x})[0], static.run({"x": x})[0])


@pytest.mark.parametrize("op, attrs", [POOLS[2], POOLS[8]])
def test_run_time_batch(op: str, attrs: tuple) -> None:
    """A run-time batch beside run-time height and width: the planes are batch x channels."""
    bounds = (("n", (1, 3)), ("h", (LOW, HIGH)), ("w", (LOW, HIGH)))
    for n, h, w in [(3, HIGH, HIGH), (1, 9, 12), (2, LOW, 33)]:
        _check(op, attrs, 2, h, w, n=n, dims=("n", C, "h", "w"), bounds=bounds)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, attrs", [POOLS[1], POOLS[2], POOLS[7], POOLS[9], GLOBAL[0]])
def test_reads_and_writes_stay_inside_extents(op: str, attrs: tuple, threads: int) -> None:
    """Data past the extents of a bound-shaped buffer is garbage: NaN there must not leak into
    the result, and nothing past the extents is written (the output keeps its sentinel)."""
    model, compiled = _compiled(op, attrs, (1, C, "h", "w"), threads)
    build = compiled._current
    for h, w in [(LOW, LOW), (11, 30), (HIGH, HIGH)]:
        feeds = {"x": _input((1, C, h, w), h + w)}
        assert_inside_extents(build, model, feeds, [h, w], 1e-5, 1e-5)


def test_refused_and_still_right() -> None:
    """What the pool kernels do not follow is refused by name, and the model compiles per
    shape instead: a run-time channel dim, and integer pools."""
    model = _model("MaxPool", (1, "c", 9, 9), kernel_shape=[3, 3])
    compiled = hobbit.compile(model, threads=1, dynamic_shapes={"c": (2, 8)}, cache=False)
    assert type(compiled).__name__ != "DynamicModel"
    assert "MaxPool" in compiled.reason and "run-time channel dim" in compiled.reason
    x = _input((1, 5, 9, 9), 5)
    np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])

    graph = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], "int_pool",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, "h", "w"])],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    compiled = hobbit.compile(model, threads=1, dynamic_shapes={"h": (LOW, 16), "w": (LOW, 16)}, cache=False)
    assert type(compiled).__name__ != "DynamicModel"
    assert "float32 pools only" in compiled.reason
    x = np.random.default_rng(0).integers(0, 255, (1, 2, 7, 11)).astype(np.uint8)
    np.testing.assert_array_equal(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0])
