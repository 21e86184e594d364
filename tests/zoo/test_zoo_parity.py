"""Zoo models: torchvision structure, non-degenerate logits, and hobbit == onnxruntime.

Parity tolerances: rtol 1e-3, atol 1e-4 on the 1x1000 logits for a random
N(0, 1) input (not the image the BatchNorm statistics were calibrated on)."""

from __future__ import annotations

import shutil
from functools import lru_cache

import numpy as np
import onnx
import pytest

import hobbit
from hobbit import zoo
from tests.helpers import rand, run_ort

# Learnable parameter counts of the torchvision models (BatchNorm running stats excluded).
TORCHVISION_PARAMS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872,
                      "squeezenet1_1": 1_235_496, "vgg16": 138_357_544}


@lru_cache(maxsize=None)
def _model(name: str) -> onnx.ModelProto:
    return zoo.build(name)


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("name", [n for n in TORCHVISION_PARAMS if n != "vgg16"])
def test_structure_and_parameter_count(name):
    model = _model(name)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["output"]
    assert model.opset_import[0].version == 17
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                 if not t.name.endswith(("running_mean", "running_var")))
    assert params == TORCHVISION_PARAMS[name]
    assert "Dropout" not in _ops(model)


def test_models_are_deterministic():
    a, b = zoo.squeezenet1_1(), zoo.squeezenet1_1()
    assert a.SerializeToString() == b.SerializeToString()


def test_op_patterns():
    resnet = _model("resnet18")
    pool = next(n for n in resnet.graph.node if n.op_type == "MaxPool")
    assert _attrs(pool) == {"ceil_mode": 0, "dilations": [1, 1], "kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                            "strides": [2, 2]}
    assert _ops(resnet).count("Add") == 8 and _ops(resnet)[-3:] == ["GlobalAveragePool", "Flatten", "Gemm"]
    assert all(len(n.input) == 2 for n in resnet.graph.node if n.op_type == "Conv")  # bias=False

    mobilenet = _model("mobilenet_v2")
    shapes = {t.name: tuple(t.dims) for t in mobilenet.graph.initializer}
    depthwise = [n for n in mobilenet.graph.node if n.op_type == "Conv" and _attrs(n)["group"] > 1]
    assert len(depthwise) == 17
    assert all(shapes[n.input[1]][1] == 1 for n in depthwise)
    assert all(len(n.input) == 3 for n in mobilenet.graph.node if n.op_type == "Clip")
    assert _ops(mobilenet).count("Add") == 10

    squeezenet = _model("squeezenet1_1")
    assert _ops(squeezenet).count("Concat") == 8
    assert all(_attrs(n)["ceil_mode"] == 1 for n in squeezenet.graph.node if n.op_type == "MaxPool")


def _check_parity(name: str, seed: int, **options) -> None:
    """`options`: hobbit.compile's, e.g. schedule="naive"."""
    model = _model(name)
    x = rand(1, 3, 224, 224, seed=seed)
    expected = run_ort(model, {"input": x})[0]
    assert expected.shape == (1, 1000)
    assert 0.1 <= float(expected.std()) <= 100, f"{name} logits are degenerate (std {expected.std()})"
    got = hobbit.compile(model, **options).run({"input": x})[0]
    assert got.shape == (1, 1000) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1"])
def test_parity_small(name):
    _check_parity(name, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1"])
def test_parity_naive_schedule(name):
    """schedule="naive" (plain loop nests: hobbit.backend.cpu.naive) on the CNN tier; ResNet-18's
    naive nests take 6 s an inference at one thread, so one run each."""
    _check_parity(name, seed=5, schedule="naive", cache=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("opt-22") is None, reason="needs opt-22 (Debian's llvm-22)")
def test_parity_naive_polly():
    """The naive nests through Polly (loops="polly": hobbit.backend.polly) on a whole CNN."""
    _check_parity("squeezenet1_1", seed=6, schedule="naive", loops="polly", cache=False)


@pytest.mark.slow
def test_parity_resnet50():
    _check_parity("resnet50", seed=8)


@pytest.mark.slow
def test_parity_vgg16():
    """One compile of the 553 MB model (the first classifier Gemm alone is 4096x25088)."""
    _check_parity("vgg16", seed=9)
    _model.cache_clear()
