"""ResNet-18 and ResNet-50 (torchvision layout: v1.5, stride on the 3x3 conv)."""

from __future__ import annotations

import onnx

from hobbit.zoo.builder import NetBuilder, Tensor


def _conv_bn(b: NetBuilder, x: Tensor, scope: str, conv: str, bn: str, out_ch: int, k: int,
             stride: int = 1, pad: int = 0) -> Tensor:
    y = b.conv(x, f"{scope}/{conv}", conv if not scope else f"{_param(scope)}.{conv}", out_ch, k, stride, pad)
    return b.batchnorm(y, f"{scope}/{bn}", bn if not scope else f"{_param(scope)}.{bn}")


def _param(scope: str) -> str:
    """'/layer1/layer1.0' -> 'layer1.0' (torch's parameter prefix)."""
    return scope.rsplit("/", 1)[-1]


def _downsample(b: NetBuilder, x: Tensor, scope: str, out_ch: int, stride: int) -> Tensor:
    if stride == 1 and x.shape[1] == out_ch:
        return x
    p = _param(scope)
    y = b.conv(x, f"{scope}/downsample/downsample.0", f"{p}.downsample.0", out_ch, 1, stride, gain=1.0)
    return b.batchnorm(y, f"{scope}/downsample/downsample.1", f"{p}.downsample.1")


def _basic_block(b: NetBuilder, x: Tensor, scope: str, width: int, stride: int) -> Tensor:
    y = b.relu(_conv_bn(b, x, scope, "conv1", "bn1", width, 3, stride, 1), f"{scope}/relu")
    y = _conv_bn(b, y, scope, "conv2", "bn2", width, 3, 1, 1)
    return b.relu(b.add(y, _downsample(b, x, scope, width, stride), scope), f"{scope}/relu_1")


def _bottleneck(b: NetBuilder, x: Tensor, scope: str, width: int, stride: int) -> Tensor:
    y = b.relu(_conv_bn(b, x, scope, "conv1", "bn1", width, 1), f"{scope}/relu")
    y = b.relu(_conv_bn(b, y, scope, "conv2", "bn2", width, 3, stride, 1), f"{scope}/relu_1")
    y = _conv_bn(b, y, scope, "conv3", "bn3", width * 4, 1)
    return b.relu(b.add(y, _downsample(b, x, scope, width * 4, stride), scope), f"{scope}/relu_2")


def _resnet(name: str, seed: int, block, layers: list[int]) -> onnx.ModelProto:
    b = NetBuilder(name, seed)
    x = b.relu(_conv_bn(b, b.input, "", "conv1", "bn1", 64, 7, 2, 3), "/relu")
    x = b.maxpool(x, "/maxpool", 3, 2, 1)
    for stage, blocks in enumerate(layers, start=1):
        width = 64 * 2 ** (stage - 1)
        for i in range(blocks):
            stride = 2 if stage > 1 and i == 0 else 1
            x = block(b, x, f"/layer{stage}/layer{stage}.{i}", width, stride)
    x = b.flatten(b.global_avgpool(x, "/avgpool"), "")
    return b.finish(b.gemm(x, "/fc", "fc", 1000))


def resnet18() -> onnx.ModelProto:
    """ResNet-18: 11.7 M parameters (47 MB float32), 1.8 GFLOPs at 224x224."""
    return _resnet("resnet18", 18, _basic_block, [2, 2, 2, 2])


def resnet50() -> onnx.ModelProto:
    """ResNet-50: 25.6 M parameters (102 MB float32), 4.1 GFLOPs at 224x224."""
    return _resnet("resnet50", 50, _bottleneck, [3, 4, 6, 3])
