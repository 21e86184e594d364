"""A GPU target and symbolic dims: GPU code is compiled for fixed shapes, and hobbit.compile says at
compile time which dims (input, dim, symbol) it needs fixed and the input_shapes= that fixes them:
the `reason` of the per-shape model it returns, or a ConfigError where run-time dims were asked
for (dynamic_shapes= bounds, input_shapes= ranges). The per-shape variants run as any GPU model
(checked on the grid emulation against onnxruntime)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.errors import ConfigError
from hobbit.runtime.gpu_model import GpuModel
from tests.helpers import run_ort


def _bias_relu(shape=(1, "seq", 16)) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("target, where", [("cuda:sm_90", r"cuda GPU code \(sm_90\)"),
                                           ("rocm:gfx942", r"rocm GPU code \(gfx942\)")])
def test_the_reason_names_the_dims_to_fix(target, where):
    compiled = hobbit.compile(_bias_relu(("batch", "seq", 16)), target=target, cache=False)
    assert type(compiled).__name__ == "SpecializingModel"
    assert re.search(where + r" is compiled for fixed shapes: it needs input 'x' dim 0 \('batch'\), input 'x' dim 1 "
                     r"\('seq'\) fixed; give them with input_shapes=\{'x': \(N, N, 16\)\}", compiled.reason), \
        compiled.reason


def test_asking_for_run_time_dims_on_a_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match=r"run on this process's CPU JIT only; cuda GPU code \(sm_90\) is compiled "
                                          r"for fixed shapes: it needs input 'x' "
                                          r"dim 1 \('seq'\) fixed; give them with input_shapes=\{'x': \(1, N, 16\)\}"):
        hobbit.compile(_bias_relu(), target="cuda:sm_90", cache=False, dynamic_shapes={"seq": (1, 64)})
    with pytest.raises(ConfigError, match=r"needs input 'x' dim 1 \('seq'\) fixed"):
        hobbit.compile(_bias_relu(), target="cuda:sm_90", cache=False, input_shapes={"x": (1, (1, 64), 16)})


def test_dynamic_shapes_false_compiles_per_shape_without_the_advice():
    compiled = hobbit.compile(_bias_relu(), target="cuda:sm_90", cache=False, dynamic_shapes=False)
    assert compiled.reason == "run-time dims are off (dynamic_shapes=False)"


def test_another_cpu_names_the_dims_too():
    compiled = hobbit.compile(_bias_relu(), target="aarch64-linux-gnu:neoverse-n1", cache=False)
    assert type(compiled).__name__ == "SpecializingModel"
    assert "code for aarch64-unknown-linux-gnu (neoverse-n1) is compiled for fixed shapes" in compiled.reason
    assert "input 'x' dim 1 ('seq')" in compiled.reason


def test_each_shape_is_a_gpu_model_and_fixed_shapes_compile_once():
    model = _bias_relu()
    compiled = hobbit.compile(model, target="cuda:sm_90", cache=False)
    x = np.random.default_rng(0).standard_normal((1, 7, 16)).astype(np.float32)
    variant = compiled.variant({"x": x})
    assert isinstance(variant, GpuModel)
    np.testing.assert_array_equal(variant.emulate({"x": x})[0], run_ort(model, {"x": x})[0])
    fixed = hobbit.compile(model, target="cuda:sm_90", cache=False, input_shapes={"x": (1, 7, 16)})
    assert isinstance(fixed, GpuModel)
    np.testing.assert_array_equal(fixed.emulate({"x": x})[0], run_ort(model, {"x": x})[0])


def test_run_compiles_a_gpu_variant_per_shape_on_the_fake_driver(monkeypatch):
    """run() on the per-shape model, through a driver whose launches run the host-built kernels."""
    from tests.runtime import fake_cuda
    driver = fake_cuda.install(monkeypatch)
    model = _bias_relu()
    compiled = hobbit.compile(model, target="cuda:sm_90", cache=False)
    for size in (3, 11):
        x = np.random.default_rng(size).standard_normal((1, size, 16)).astype(np.float32)
        got, = compiled.run({"x": x})
        np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])
    assert driver.names().count("cuModuleLoadData") == 2  # one GPU variant per shape
