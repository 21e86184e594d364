"""SqueezeNet 1.1 (torchvision layout): Fire modules, ceil-mode max pools, a conv classifier."""

from __future__ import annotations

import onnx

from hobbit.zoo.builder import NetBuilder, Tensor

# (feature index, squeeze channels, expand channels per branch); None = MaxPool(3, 2, ceil_mode).
_FEATURES = [(2, None, None), (3, 16, 64), (4, 16, 64), (5, None, None), (6, 32, 128), (7, 32, 128),
             (8, None, None), (9, 48, 192), (10, 48, 192), (11, 64, 256), (12, 64, 256)]


def _fire(b: NetBuilder, x: Tensor, index: int, squeeze: int, expand: int) -> Tensor:
    scope, p = f"/features/features.{index}", f"features.{index}"
    s = b.relu(b.conv(x, f"{scope}/squeeze", f"{p}.squeeze", squeeze, 1, bias=True),
               f"{scope}/squeeze_activation")
    e1 = b.relu(b.conv(s, f"{scope}/expand1x1", f"{p}.expand1x1", expand, 1, bias=True),
                f"{scope}/expand1x1_activation")
    e3 = b.relu(b.conv(s, f"{scope}/expand3x3", f"{p}.expand3x3", expand, 3, pad=1, bias=True),
                f"{scope}/expand3x3_activation")
    return b.concat([e1, e3], scope)


def squeezenet1_1() -> onnx.ModelProto:
    """SqueezeNet 1.1: 1.2 M parameters (5 MB float32), 0.35 GFLOPs at 224x224."""
    b = NetBuilder("squeezenet1_1", 11)
    x = b.relu(b.conv(b.input, "/features/features.0", "features.0", 64, 3, 2, bias=True), "/features/features.1")
    for index, squeeze, expand in _FEATURES:
        if squeeze is None:
            x = b.maxpool(x, f"/features/features.{index}", 3, 2, ceil_mode=True)
        else:
            x = _fire(b, x, index, squeeze, expand)
    x = b.relu(b.conv(x, "/classifier/classifier.1", "classifier.1", 1000, 1, bias=True),
               "/classifier/classifier.2")
    x = b.global_avgpool(x, "/classifier/classifier.3")
    return b.finish(b.flatten(x, ""))
