"""torchvision's detection models (random weights, no downloads) exported to ONNX, for the
data-dependent-shape tests and benchmarks (hobbit.frontend.common.bounded).

Building them needs torch and torchvision (`pip install torch==2.14.1 torchvision==0.29.1`);
hobbit itself never imports them. Random weights need calibrating before a
detector detects anything: activations through a randomly initialised backbone decay to
1e-20 (BatchNorm's running statistics do not match them), so every class score is equal.
Each model's BatchNorm statistics are therefore set from one pass over the calibration
image (as batch-norm recalibration does), its classification head's last conv is scaled
to spread the logits, and the score threshold is set in the widest gap among the scores
around rank `CANDIDATES`, so a few dozen well-separated candidates survive and two engines
computing them to float32 rounding keep the same ones.

FasterRCNN scores its classes in a second stage: its class logits (box_predictor.cls_score,
after the RPN, RoiAlign and the box head, computed in torch for the calibration image) are
scaled to the spread and roi_heads.score_thresh is set in their gap. Its RPN is left as
initialised: its objectness ranks 3375 anchors by a TopK per level, NonMaxSuppression and
a cut at 1000 proposals, and where two objectness scores tie to float32 rounding the
engines order them differently. Scaling the objectness head does not separate them (the
rounding scales with it), and it need not: on the calibration image and the other test
images both engines send the same 1000 boxes to RoiAlign, a few near-tied ones in another
order, which the detections (filtered, suppressed and sorted by their own scores) do not
depend on."""

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
    scores: str  # "softmax" (SSD: class 0 is background), "sigmoid" (RetinaNet) or "rcnn" (two stages)


def _ssdlite(d):
    return d.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)


def _ssd300(d):
    return d.ssd300_vgg16(weights=None, weights_backbone=None)


def _retinanet(d):
    return d.retinanet_resnet50_fpn(weights=None, weights_backbone=None, min_size=320, max_size=320)


def _faster_rcnn(d):
    return d.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, min_size=320, max_size=320)


DETECTORS = {d.name: d for d in (
    Detector("ssdlite320_mobilenet_v3_large", 320, _ssdlite, "softmax"),
    Detector("ssd300_vgg16", 300, _ssd300, "softmax"),
    Detector("retinanet_resnet50_fpn", 320, _retinanet, "sigmoid"),
    Detector("fasterrcnn_mobilenet_v3_large_fpn", 320, _faster_rcnn, "rcnn"),
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
    """The calibration (and test) image: 3 x size x size of seeded N(0, 1) data, the input
    `hobbit bench` feeds a model (hobbit.bench.suite.random_inputs, seed 0), so a benchmark of an
    exported detector times the detections it was calibrated for."""
    return np.random.default_rng(seed).standard_normal((3, size, size)).astype(np.float32)


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


def _features(model, xs: list):
    images, _ = model.transform(xs)
    return images, model.backbone(images.tensors)


def _recalibrate(torch, model, size: int, forward: Callable) -> None:
    """BatchNorm running statistics from one training-mode pass (momentum 1) of `forward`
    over four images (the smallest feature maps are 1x1: batch statistics need several
    samples)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = 1.0
    model.train()
    forward(model, [torch.from_numpy(image(size, seed)) for seed in range(4)])
    model.eval()


def _candidate_scores(torch, model, detector: Detector, x) -> np.ndarray:
    logits = _head_logits(model, [x])
    if detector.scores == "softmax":
        scores = torch.softmax(logits, -1)[..., 1:]
    else:
        scores = torch.sigmoid(logits)
    return _descending(scores)


def _descending(scores) -> np.ndarray:
    return np.sort(scores.detach().numpy().reshape(-1))[::-1]


def _calibrate_single_stage(torch, model, detector: Detector, x) -> None:
    _recalibrate(torch, model, detector.size, _head_logits)
    convs = _last_conv(model.head.classification_head)
    if detector.scores == "sigmoid":
        for conv in convs:
            conv.bias.zero_()  # RetinaNet's prior bias keeps every score near 0.01
    scale = LOGIT_SPREAD / float(_head_logits(model, [x]).std())
    for conv in convs:
        conv.weight.mul_(scale)
    model.score_thresh = threshold(_candidate_scores(torch, model, detector, x))


def _rcnn_logits(model, x):
    """The second stage's class logits for one image, as FasterRCNN computes them."""
    images, features = _features(model, [x])
    proposals, _ = model.rpn(images, features)
    heads = model.roi_heads
    pooled = heads.box_roi_pool(features, proposals, images.image_sizes)
    return heads.box_predictor(heads.box_head(pooled))[0]


def _calibrate_rcnn(torch, model, size: int, x) -> None:
    _recalibrate(torch, model, size, _features)
    cls_score = model.roi_heads.box_predictor.cls_score
    scale = LOGIT_SPREAD / float(_rcnn_logits(model, x).std())
    cls_score.weight.mul_(scale)
    cls_score.bias.mul_(scale)
    scores = torch.softmax(_rcnn_logits(model, x), -1)[:, 1:]
    model.roi_heads.score_thresh = threshold(_descending(scores))


def threshold(scores: np.ndarray, around: int = CANDIDATES) -> float:
    """A threshold in the widest gap between sorted (descending) scores in ranks
    [around/2, 2*around): the candidates above it are separated from the rest by that gap."""
    lo, hi = around // 2, min(2 * around, len(scores) - 1)
    gaps = scores[lo:hi] - scores[lo + 1:hi + 1]
    at = lo + int(np.argmax(gaps))
    return float((scores[at] + scores[at + 1]) / 2)


# export()'s `thresholds`: hobbit's calibrated score threshold and head, or torchvision's own.
THRESHOLDS = ("calibrated", "torchvision")


def calibrated(name: str, thresholds: str = "calibrated") -> tuple[object, object]:
    """torch and the model `name` (see DETECTORS) in eval mode, seeded and calibrated as
    export() describes."""
    if name not in DETECTORS:
        raise HobbitError(f"unknown detection model {name!r}; available: {', '.join(DETECTORS)}")
    if thresholds not in THRESHOLDS:
        raise HobbitError(f"thresholds must be one of {', '.join(THRESHOLDS)}; got {thresholds!r}")
    detector = DETECTORS[name]
    torch, detection = _torch()
    torch.manual_seed(0)
    model = detector.build(detection).eval()
    with torch.no_grad():
        x = torch.from_numpy(image(detector.size))
        if thresholds == "torchvision":
            _recalibrate(torch, model, detector.size, _features if detector.scores == "rcnn" else _head_logits)
        elif detector.scores == "rcnn":
            _calibrate_rcnn(torch, model, detector.size, x)
        else:
            _calibrate_single_stage(torch, model, detector, x)
    return torch, model


def export(name: str, opset: int = 17, thresholds: str = "calibrated") -> bytes:
    """The calibrated model `name` (see DETECTORS) as ONNX bytes, input "image" (3 x S x S),
    outputs "boxes", "scores", "labels" with a data-dependent count.

    `thresholds="torchvision"` recalibrates only BatchNorm and keeps torchvision's score
    threshold (0.001) and head, as a user's export of the model would: single-stage models
    then fill all their detections (300 for SSDlite), hundreds of them closer in score than
    two engines' float32 rounding, so their order may differ between engines."""
    torch, model = calibrated(name, thresholds)
    with torch.no_grad():
        x = torch.from_numpy(image(DETECTORS[name].size))
        names = list(model([x])[0])  # the detections dict's order: FasterRCNN's has labels before scores
        buffer = io.BytesIO()
        torch.onnx.export(model, ([x],), buffer, opset_version=opset, dynamo=False,
                          input_names=["image"], output_names=names)
    return _outputs_in_order(buffer.getvalue(), ["boxes", "scores", "labels"])


def _outputs_in_order(data: bytes, names: list[str]) -> bytes:
    import onnx

    proto = onnx.load_from_string(data)
    outputs = {o.name: o for o in proto.graph.output}
    ordered = [onnx.ValueInfoProto.FromString(outputs[n].SerializeToString()) for n in names]
    del proto.graph.output[:]
    proto.graph.output.extend(ordered)
    return proto.SerializeToString()


# -- a YOLO-style detector with NonMaxSuppression, built with onnx.helper ------------------

YOLO_SIZE = 64      # input image side
YOLO_CLASSES = 4
YOLO_STRIDE = 8     # one anchor per 8x8 cell: 64 candidate boxes


def _yolo_head(rng: np.random.Generator):
    """Backbone and head nodes up to boxes [1, A, 4] (centre, size) and scores [1, C, A]."""
    from onnx import helper, numpy_helper

    def conv(name: str, x: str, cin: int, cout: int, k: int, stride: int) -> tuple[list, list]:
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        inits = [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")]
        node = helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], kernel_shape=[k, k],
                                strides=[stride, stride], pads=[k // 2] * 4)
        return [node, helper.make_node("Relu", [name], [f"{name}.relu"])], inits

    nodes, inits = [], []
    x, cin = "image", 3
    for i, (cout, stride) in enumerate(((16, 2), (32, 2), (32, 2))):
        n, w = conv(f"conv{i}", x, cin, cout, 3, stride)
        nodes += n
        inits += w
        x, cin = f"conv{i}.relu", cout
    channels = 5 + YOLO_CLASSES
    w = (rng.standard_normal((channels, cin, 1, 1)) * 0.5).astype(np.float32)
    inits += [numpy_helper.from_array(w, "head.w"), numpy_helper.from_array(np.zeros(channels, np.float32), "head.b"),
              numpy_helper.from_array(np.array([1, channels, -1], np.int64), "flat_shape"),
              numpy_helper.from_array(np.array([4, 1, YOLO_CLASSES], np.int64), "split"),
              numpy_helper.from_array(np.float32(YOLO_SIZE), "image_size")]
    nodes += [helper.make_node("Conv", [x, "head.w", "head.b"], ["head"]),
              helper.make_node("Reshape", ["head", "flat_shape"], ["flat"]),           # [1, 5+C, A]
              helper.make_node("Transpose", ["flat"], ["rows"], perm=[0, 2, 1]),      # [1, A, 5+C]
              helper.make_node("Sigmoid", ["rows"], ["sig"]),
              helper.make_node("Split", ["sig", "split"], ["box01", "objectness", "classes"], axis=2),
              helper.make_node("Mul", ["box01", "image_size"], ["boxes"]),              # [1, A, 4] xc, yc, w, h
              helper.make_node("Mul", ["objectness", "classes"], ["class_scores"]),     # [1, A, C]
              helper.make_node("Transpose", ["class_scores"], ["scores"], perm=[0, 2, 1])]
    return nodes, inits


def yolo_nms(seed: int = 0, max_per_class: int = 20, iou: float = 0.45):
    """A small YOLO-style detector ending as exported YOLO models do: NonMaxSuppression
    (centre-point boxes), then GatherND for the kept boxes and scores and the class column
    of the selection as labels. Its score threshold is calibrated (`threshold`) on the
    head's scores for `image(YOLO_SIZE)`, computed with onnx's reference evaluator."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    nodes, inits = _yolo_head(np.random.default_rng(seed))
    image_info = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, YOLO_SIZE, YOLO_SIZE])

    def model(graph_nodes, outputs, extra=()):
        graph = helper.make_graph(graph_nodes, "yolo_nms", [image_info],
                                  [helper.make_tensor_value_info(n, t, None) for n, t in outputs], inits + list(extra))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    head = model(nodes, [("scores", TensorProto.FLOAT)])
    scores = ReferenceEvaluator(head).run(None, {"image": image(YOLO_SIZE, seed)[None]})[0]
    cut = threshold(np.sort(scores.reshape(-1))[::-1], around=24)
    extra = [numpy_helper.from_array(np.array([max_per_class], np.int64), "max_out"),
             numpy_helper.from_array(np.array([iou], np.float32), "iou"),
             numpy_helper.from_array(np.array([cut], np.float32), "score_threshold"),
             numpy_helper.from_array(np.array([0, 2], np.int64), "batch_box"),
             numpy_helper.from_array(np.array(1, np.int64), "class_column")]
    nodes = nodes + [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_threshold"],
                         ["selected"], center_point_box=1),
        helper.make_node("Gather", ["selected", "batch_box"], ["batch_and_box"], axis=1),
        helper.make_node("GatherND", ["boxes", "batch_and_box"], ["det_boxes"]),
        helper.make_node("GatherND", ["scores", "selected"], ["det_scores"]),
        helper.make_node("Gather", ["selected", "class_column"], ["det_labels"], axis=1)]
    return model(nodes, [("det_boxes", TensorProto.FLOAT), ("det_scores", TensorProto.FLOAT),
                         ("det_labels", TensorProto.INT64)], extra)


def main(argv: list[str] | None = None) -> None:
    """`python -m hobbit.zoo.detection DIR`: write every detector as DIR/<name>.onnx, for
    `hobbit bench --model DIR/<name>.onnx`."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m hobbit.zoo.detection", description=main.__doc__)
    parser.add_argument("directory")
    parser.add_argument("--models", default=",".join([*DETECTORS, "yolo_nms"]))
    parser.add_argument("--thresholds", choices=THRESHOLDS, default="calibrated",
                        help="the torchvision models' score threshold: calibrated (default) or torchvision's own")
    args = parser.parse_args(argv)
    folder = Path(args.directory)
    folder.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        data = yolo_nms().SerializeToString() if name == "yolo_nms" else export(name, thresholds=args.thresholds)
        (folder / f"{name}.onnx").write_bytes(data)
        print(folder / f"{name}.onnx")


if __name__ == "__main__":
    main()
