"""torchvision's detection models (random weights, no downloads) exported to ONNX, for the
data-dependent-shape tests and benchmarks (hobbit.frontend.bounded).

Building them needs torch and torchvision (`pip install torch==2.14.1 torchvision==0.29.1`);
hobbit itself never imports them. Random weights need calibrating before a
detector detects anything: activations through a randomly initialised backbone decay to
1e-20 (BatchNorm's running statistics do not match them), so every class score is equal.
Each model's BatchNorm statistics are therefore set from one pass over the calibration
image (as batch-norm recalibration does), its classification head's last conv is scaled
to spread the logits, and the score threshold is set in the widest gap among the scores
around rank `CANDIDATES`, so a few dozen well-separated candidates survive and two engines
computing them to float32 rounding keep the same ones."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hobbit.errors import HobbitError

# How many (anchor, class) candidates the calibrated threshold keeps on the calibration image.
CANDIDATES = 60
# The spread (standard deviation) the classification head's logits are scaled to: about 1
# after recalibration for SSDlite, 30 for VGG-16's SSD (every softmax score then rounds to
# 1.0); 1.5 spreads the softmax/sigmoid scores without saturating them.
LOGIT_SPREAD = 1.5


@dataclass(frozen=True)
class Detector:
    name: str
    size: int  # the square input image's side, also the transform's min/max size
    build: Callable[[object], object]  # torchvision.models.detection -> the model
    scores: str  # "softmax" (SSD: class 0 is background) or "sigmoid" (RetinaNet)


def _ssdlite(d):
    return d.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)


def _ssd300(d):
    return d.ssd300_vgg16(weights=None, weights_backbone=None)


def _retinanet(d):
    return d.retinanet_resnet50_fpn(weights=None, weights_backbone=None, min_size=320, max_size=320)


DETECTORS = {d.name: d for d in (
    Detector("ssdlite320_mobilenet_v3_large", 320, _ssdlite, "softmax"),
    Detector("ssd300_vgg16", 300, _ssd300, "softmax"),
    Detector("retinanet_resnet50_fpn", 320, _retinanet, "sigmoid"),
)}


def _torch():
    try:
        import torch
        from torchvision.models import detection
    except ImportError as exc:
        raise HobbitError("the detection models are built with torch and torchvision: "
                          "pip install torch==2.14.1 torchvision==0.29.1") from exc
    return torch, detection


def image(size: int, seed: int = 0) -> np.ndarray:
    """The calibration (and test) image: 3 x size x size in [0, 1)."""
    return np.random.default_rng(seed).random((3, size, size), dtype=np.float32)


def _last_conv(head) -> object:
    """The conv that writes the class logits (SSD: one per feature map, RetinaNet: one shared)."""
    logits = getattr(head, "cls_logits", None)
    if logits is not None:
        return [logits]
    return [m[-1] if hasattr(m, "__getitem__") else m for m in head.module_list]


def _head_logits(model, xs: list):
    images, _ = model.transform(xs)
    features = list(model.backbone(images.tensors).values())
    return model.head(features)["cls_logits"]


def _recalibrate(torch, model, size: int) -> None:
    """BatchNorm running statistics from one training-mode pass (momentum 1) over four
    images (the smallest feature maps are 1x1: batch statistics need several samples)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = 1.0
    model.train()
    _head_logits(model, [torch.from_numpy(image(size, seed)) for seed in range(4)])
    model.eval()


def _candidate_scores(torch, model, detector: Detector, x) -> np.ndarray:
    logits = _head_logits(model, [x])
    if detector.scores == "softmax":
        scores = torch.softmax(logits, -1)[..., 1:]
    else:
        scores = torch.sigmoid(logits)
    return np.sort(scores.detach().numpy().reshape(-1))[::-1]


def threshold(scores: np.ndarray, around: int = CANDIDATES) -> float:
    """A threshold in the widest gap between sorted (descending) scores in ranks
    [around/2, 2*around): the candidates above it are separated from the rest by that gap."""
    lo, hi = around // 2, min(2 * around, len(scores) - 1)
    gaps = scores[lo:hi] - scores[lo + 1:hi + 1]
    at = lo + int(np.argmax(gaps))
    return float((scores[at] + scores[at + 1]) / 2)


def export(name: str, opset: int = 17) -> bytes:
    """The calibrated model `name` (see DETECTORS) as ONNX bytes, input "image" (3 x S x S),
    outputs "boxes", "scores", "labels" with a data-dependent count."""
    if name not in DETECTORS:
        raise HobbitError(f"unknown detection model {name!r}; available: {', '.join(DETECTORS)}")
    detector = DETECTORS[name]
    torch, detection = _torch()
    torch.manual_seed(0)
    model = detector.build(detection).eval()
    with torch.no_grad():
        x = torch.from_numpy(image(detector.size))
        _recalibrate(torch, model, detector.size)
        convs = _last_conv(model.head.classification_head)
        if detector.scores == "sigmoid":
            for conv in convs:
                conv.bias.zero_()  # RetinaNet's prior bias keeps every score near 0.01
        scale = LOGIT_SPREAD / float(_head_logits(model, [x]).std())
        for conv in convs:
            conv.weight.mul_(scale)
        model.score_thresh = threshold(_candidate_scores(torch, model, detector, x))
        buffer = io.BytesIO()
        torch.onnx.export(model, ([x],), buffer, opset_version=opset, dynamo=False,
                          input_names=["image"], output_names=["boxes", "scores", "labels"])
    return buffer.getvalue()
