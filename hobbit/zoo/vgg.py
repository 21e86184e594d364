"""VGG-16 (torchvision layout, no BatchNorm). The exported classifier has no
Dropout nodes (eval mode), so it is Gemm+Relu, Gemm+Relu, Gemm.

Size warning: 138 M parameters, 553 MB of float32 weights, of which the first
classifier layer alone (4096 x 25088) is 411 MB."""

from __future__ import annotations

import onnx

from hobbit.zoo.builder import NetBuilder

_CONFIG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16() -> onnx.ModelProto:
    """VGG-16: 138 M parameters (553 MB float32), 15.5 GFLOPs at 224x224."""
    b = NetBuilder("vgg16", 16)
    x, index = b.input, 0
    for item in _CONFIG:
        if item == "M":
            x = b.maxpool(x, f"/features/features.{index}", 2, 2)
            index += 1
        else:
            x = b.conv(x, f"/features/features.{index}", f"features.{index}", int(item), 3, pad=1, bias=True)
            x = b.relu(x, f"/features/features.{index + 1}")
            index += 2
    x = b.identity_avgpool(x, "/avgpool")
    x = b.flatten(x, "")
    x = b.relu(b.gemm(x, "/classifier/classifier.0", "classifier.0", 4096, gain=2.0), "/classifier/classifier.1")
    x = b.relu(b.gemm(x, "/classifier/classifier.3", "classifier.3", 4096, gain=2.0), "/classifier/classifier.4")
    return b.finish(b.gemm(x, "/classifier/classifier.6", "classifier.6", 1000))
