"""RetinaNet as a detector is deployed at several image sizes: the network alone, from an
image already resized and normalised (any height and width) to its dense predictions, every
anchor's class scores and decoded box, with the anchors computed in the graph from the
feature maps' sizes. NonMaxSuppression and the top-k cut stay with the caller.

Why not hobbit.zoo.detection's export: torchvision's whole model resizes every image to its
min/max size inside the graph and ends in NMS, whose output count depends on the data, so
its convs and anchors never see another size. Exported from the transformed image instead,
the backbone, the FPN, the heads and the anchors follow the image: `hobbit bench --sweep`
times one compile at several sizes (issue 28).

The network is torchvision's retinanet_resnet50_fpn, calibrated as hobbit.zoo.detection
does (random weights, BatchNorm statistics from one pass, logits spread), in eval mode.
Per FPN level l (P3..P7) the outputs are
- `scores_pl` [1, A, K, H_l, W_l]: sigmoid of the class logits (A = 9 anchors per cell,
  K = 91 classes), the head's [1, A*K, H_l, W_l] split along its channels;
- `boxes_pl` [1, A, 4, H_l, W_l]: (x1, y1, x2, y2) in pixels, torchvision's BoxCoder decode
  (weights 1, 1, 1, 1; dw and dh clamped at log(1000/16)) of the regression head's deltas
  against the anchor of cell (y, x): the level's cell anchor a (torchvision's, centred at 0)
  moved to (x * stride, y * stride).
The predictions keep the feature maps' grid layout: flattening H x W into one anchor axis
(what torchvision's head does) would tie two sizes into one product. The stride is the
level's nominal one (8, 16, 32, 64, 128), as detectron2's anchors are; torchvision's own
generator divides the padded image size by the grid size, which differs at P6 and P7 for
sides that are not multiples of 128."""

from __future__ import annotations

import io

from hobbit.zoo.detection import calibrated

NAME = "retinanet_resnet50_fpn"
LEVELS = ("p3", "p4", "p5", "p6", "p7")
STRIDES = (8, 16, 32, 64, 128)


def _dense(torch, model):
    """The network after the transform, as a torch module (see the module docstring)."""
    head = model.head
    cells = [c.clone() for c in model.anchor_generator.cell_anchors]
    clip = float(model.box_coder.bbox_xform_clip)
    anchors, classes = head.classification_head.num_anchors, head.classification_head.num_classes

    class Dense(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = model.backbone
            self.head = head

        def forward(self, image):
            outputs = []
            for feature, cell, stride in zip(self.backbone(image).values(), cells, STRIDES):
                logits = self.head.classification_head.cls_logits(self.head.classification_head.conv(feature))
                deltas = self.head.regression_head.bbox_reg(self.head.regression_head.conv(feature))
                n, _, h, w = logits.shape
                scores = torch.sigmoid(logits).reshape(n, anchors, classes, h, w)
                outputs += [scores, _decode(torch, deltas.reshape(n, anchors, 4, h, w), cell, stride, clip)]
            return tuple(outputs)

    return Dense().eval()


def _decode(torch, deltas, cell, stride: int, clip: float):
    """Boxes [N, A, 4, H, W] from the deltas [N, A, 4, H, W] and the level's cell anchors [A, 4]."""
    _, _, _, h, w = deltas.shape
    widths = (cell[:, 2] - cell[:, 0]).reshape(-1, 1, 1)
    heights = (cell[:, 3] - cell[:, 1]).reshape(-1, 1, 1)
    centre_x = ((cell[:, 0] + cell[:, 2]) / 2).reshape(-1, 1, 1) + torch.arange(w, dtype=torch.float32) * stride
    centre_y = ((cell[:, 1] + cell[:, 3]) / 2).reshape(-1, 1, 1) + (
        torch.arange(h, dtype=torch.float32) * stride).reshape(-1, 1)
    x = deltas[:, :, 0] * widths + centre_x
    y = deltas[:, :, 1] * heights + centre_y
    half_w = torch.exp(torch.clamp(deltas[:, :, 2], max=clip)) * widths / 2
    half_h = torch.exp(torch.clamp(deltas[:, :, 3], max=clip)) * heights / 2
    return torch.stack([x - half_w, y - half_h, x + half_w, y + half_h], dim=2)


def output_names() -> list[str]:
    return [f"{kind}_{level}" for level in LEVELS for kind in ("scores", "boxes")]


def export(opset: int = 17, size: tuple[int, int] = (320, 320)) -> bytes:
    """The dense RetinaNet as ONNX bytes: input "image" [1, 3, height, width] (symbolic
    "height" and "width"), outputs output_names() with symbolic feature-map sides; traced at
    `size`."""
    torch, model = calibrated(NAME)
    dense = _dense(torch, model)
    names = output_names()
    axes = {"image": {2: "height", 3: "width"}}
    axes.update({n: {3: f"{n}_height", 4: f"{n}_width"} for n in names})
    buffer = io.BytesIO()
    with torch.no_grad():
        x = torch.zeros((1, 3, *size), dtype=torch.float32)
        torch.onnx.export(dense, (x,), buffer, opset_version=opset, dynamo=False, input_names=["image"],
                          output_names=names, dynamic_axes=axes)
    return buffer.getvalue()


def reference(image) -> list:
    """torch's outputs of the dense network for `image` [1, 3, H, W] (numpy), in output_names() order."""
    torch, model = calibrated(NAME)
    with torch.no_grad():
        return [o.numpy() for o in _dense(torch, model)(torch.from_numpy(image))]


def main(argv: list[str] | None = None) -> None:
    """`python -m hobbit.zoo.dense_detection FILE`: write the dense RetinaNet to FILE."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m hobbit.zoo.dense_detection", description=main.__doc__)
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    args.file.write_bytes(export())
    print(args.file)


if __name__ == "__main__":
    main()
