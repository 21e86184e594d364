"""Built-in model zoo: torchvision-shaped CNNs built with onnx.helper, no downloads.

Each function returns an opset-17 `onnx.ModelProto` with input "input"
(float32 1x3x224x224) and output "output" (1x1000), the same layer structure
and op patterns as torchvision's ONNX exports, and deterministic random weights
calibrated so activations stay near unit scale (see hobbit.zoo.builder). They
exist for tests, benchmarks and `hobbit run resnet18`; they are not trained.
vgg16 carries 553 MB of float32 weights. The `-fp16` variants are float16 throughout, input and
output included (hobbit.zoo.float16), for comparing both precisions in one bench run."""

from __future__ import annotations

import os
from typing import Callable

import onnx

from hobbit.errors import HobbitError
from hobbit.zoo.float16 import mobilenet_v2_fp16, resnet18_fp16, squeezenet1_1_fp16
from hobbit.zoo.mobilenet import mobilenet_v2
from hobbit.zoo.resnet import resnet18, resnet50
from hobbit.zoo.squeezenet import squeezenet1_1
from hobbit.zoo.vgg import vgg16

MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2,
    "squeezenet1_1": squeezenet1_1,
    "vgg16": vgg16,
    "squeezenet1_1-fp16": squeezenet1_1_fp16,
    "resnet18-fp16": resnet18_fp16,
    "mobilenet_v2-fp16": mobilenet_v2_fp16,
}


def build(name: str) -> onnx.ModelProto:
    """The zoo model called `name` (see MODELS)."""
    if name not in MODELS:
        raise HobbitError(f"unknown zoo model {name!r}; available: {', '.join(MODELS)}")
    return MODELS[name]()


def resolve(model: object) -> object:
    """hobbit.compile's model argument with a zoo name replaced by that model, as `hobbit run
    NAME` does: a str that names a zoo model and no existing file or folder (a path that
    exists always wins); anything else is returned as it is."""
    if isinstance(model, str) and model in MODELS and not os.path.exists(model):
        return build(model)
    return model


__all__ = ["MODELS", "build", "resolve", "resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "vgg16"]
