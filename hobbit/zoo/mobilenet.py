"""MobileNetV2 (torchvision layout): inverted residuals with depthwise 3x3 convs and ReLU6."""

from __future__ import annotations

import onnx

from hobbit.zoo.builder import NetBuilder, Tensor

# (expansion t, output channels c, repeats n, first stride s), from the MobileNetV2 paper.
_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
             (6, 320, 1, 1)]


def _conv_bn(b: NetBuilder, x: Tensor, scope: str, param: str, out_ch: int, k: int, stride: int = 1,
             group: int = 1, act: bool = True, gain: float = 2.0) -> Tensor:
    """torchvision's Conv2dNormActivation: Conv(bias=False) + BatchNorm [+ ReLU6]; children .0 .1 .2."""
    y = b.conv(x, f"{scope}/{param}.0", f"{param}.0", out_ch, k, stride, (k - 1) // 2, group, gain=gain)
    y = b.batchnorm(y, f"{scope}/{param}.1", f"{param}.1")
    return b.relu6(y, f"{scope}/{param}.2") if act else y


def _inverted_residual(b: NetBuilder, x: Tensor, index: int, expand: int, out_ch: int, stride: int) -> Tensor:
    scope = f"/features/features.{index}/conv"
    prefix = f"features.{index}.conv"
    in_ch = x.shape[1]
    hidden = in_ch * expand
    y, i = x, 0
    if expand != 1:
        y = _conv_bn(b, y, scope, f"{prefix}.0", hidden, 1)
        i = 1
    y = _conv_bn(b, y, scope, f"{prefix}.{i}", hidden, 3, stride, group=hidden)
    w = b.conv(y, f"{scope}/{prefix}.{i + 1}", f"{prefix}.{i + 1}", out_ch, 1, gain=1.0)
    y = b.batchnorm(w, f"{scope}/{prefix}.{i + 2}", f"{prefix}.{i + 2}")
    if stride == 1 and in_ch == out_ch:
        y = b.add(x, y, f"/features/features.{index}")
    return y


def mobilenet_v2() -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): 3.5 M parameters (14 MB float32), 0.3 GFLOPs at 224x224."""
    b = NetBuilder("mobilenet_v2", 2)
    x = _conv_bn(b, b.input, "/features", "features.0", 32, 3, 2)
    index = 1
    for expand, out_ch, repeats, first_stride in _SETTINGS:
        for r in range(repeats):
            x = _inverted_residual(b, x, index, expand, out_ch, first_stride if r == 0 else 1)
            index += 1
    x = _conv_bn(b, x, "/features", f"features.{index}", 1280, 1)
    x = b.flatten(b.global_avgpool(x, ""), "")
    return b.finish(b.gemm(x, "/classifier/classifier.1", "classifier.1", 1000))
