"""Write zoo CNNs with a symbolic image size, for `hobbit bench --sweep height,width=...` (issue 28).

    python scripts/export_dynamic_cnns.py OUTDIR [names...]
    hobbit bench --model OUTDIR/squeezenet1_1.onnx --sweep height,width=224x224,160x240,320x320 \
        --dynamic height=64:320 --dynamic width=64:320 --threads 1,2

Why: issue 28 measures one compile of a fully convolutional CNN at three image sizes against a
static compile per size and against onnxruntime. The zoo's models (hobbit.zoo) declare a fixed
input [1, 3, 224, 224]; this writes them with input dims 2 and 3 the symbols "height" and
"width" (batch 1), which both engines then take at any size:

- SqueezeNet 1.1: fully convolutional (its classifier is a 1x1 conv, then a global average
  pool and a Flatten), so every size gives [1, 1000];
- ResNet-18: convs and pools, a global average pool, a Flatten ([1, 512] at every size) and
  its Gemm.

The weights are the zoo's (deterministic, random, not trained). Nothing else in the graph
changes: the declared shapes of intermediate values (graph.value_info) are dropped, being the
224x224 ones, and each output's declared shape is the one ONNX shape inference derives from
the symbolic input (static [1, 1000] for both). Before a file is written it passes
onnx.checker (full check), and onnxruntime runs it at 224x224 and 160x240, each time equal to
a copy of the model declared static at that size (rtol 1e-5, atol 1e-6).

The detector, retinanet_resnet50_fpn_dense, is hobbit.zoo.dense_detection's: torchvision's
RetinaNet (ResNet-50-FPN, calibrated random weights) from a resized, normalised image of any
size to every anchor's scores and decoded boxes per FPN level, anchors computed in the graph,
NMS left to the caller. hobbit.zoo.detection's whole-model exports are no use here:
torchvision resizes every image to a fixed size inside the graph (so the convs and anchors
never see another size) and ends in NMS, whose output count depends on the data. Its check
compares onnxruntime with torch at CHECK_SIZES (atol 1e-2 on boxes of hundreds of pixels,
1e-4 on scores: float32 summation order through ResNet-50 and an exp).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hobbit import zoo  # noqa: E402
from hobbit.zoo import dense_detection  # noqa: E402

SYMBOLS = ("height", "width")  # input dims 2 and 3
CHECK_SIZES = ((224, 224), (160, 240))  # onnxruntime runs each file at these (height, width)
DETECTOR = "retinanet_resnet50_fpn_dense"
MODELS = ("squeezenet1_1", "resnet18", DETECTOR)


def symbolic_image(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose one input's dims 2 and 3 are SYMBOLS, its value_info dropped and
    each output's declared shape inferred from that input."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    (image,) = [i for i in out.graph.input if i.name not in {t.name for t in out.graph.initializer}]
    dims = image.type.tensor_type.shape.dim
    if len(dims) != 4:
        raise ValueError(f"input '{image.name}' has rank {len(dims)}, not an image [N, C, H, W]")
    for dim, symbol in zip(dims[2:], SYMBOLS):
        dim.ClearField("dim_value")
        dim.dim_param = symbol
    del out.graph.value_info[:]
    probe = onnx.ModelProto()
    probe.CopyFrom(out)
    for output in probe.graph.output:
        output.type.tensor_type.ClearField("shape")
    inferred = {o.name: o for o in onnx.shape_inference.infer_shapes(probe, strict_mode=True).graph.output}
    for output in out.graph.output:
        output.type.CopyFrom(inferred[output.name].type)
    return out


def at_size(model: onnx.ModelProto, height: int, width: int) -> onnx.ModelProto:
    """A copy of the symbolic `model` declared static at this size (the reference for the check)."""
    static = onnx.ModelProto()
    static.CopyFrom(model)
    for dim in static.graph.input[0].type.tensor_type.shape.dim:
        if dim.dim_param in SYMBOLS:
            dim.dim_value = height if dim.dim_param == "height" else width
    return static


def check(name: str, model: onnx.ModelProto) -> list[str]:
    """onnx.checker, then onnxruntime at CHECK_SIZES against a static copy at each size; the
    output shapes seen, or an AssertionError saying what failed."""
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1

    def session(proto: onnx.ModelProto):
        return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])

    dynamic = session(model)
    input_name = model.graph.input[0].name
    seen = []
    for height, width in CHECK_SIZES:
        x = np.random.default_rng(height * 1000 + width).standard_normal((1, 3, height, width)).astype(np.float32)
        got = dynamic.run(None, {input_name: x})
        want = session(at_size(model, height, width)).run(None, {input_name: x})
        for g, w, o in zip(got, want, model.graph.output):
            if g.shape != w.shape or not np.isfinite(g).all() or not np.allclose(g, w, rtol=1e-5, atol=1e-6):
                raise AssertionError(f"{name} at {height}x{width}: output '{o.name}' {g.shape} differs from the "
                                     f"static model's {w.shape} (max abs diff "
                                     f"{np.abs(g - w).max() if g.shape == w.shape else 'n/a'})")
        seen.append(f"{height}x{width} -> {'x'.join(map(str, got[0].shape))}")
    return seen


def check_detector(model: onnx.ModelProto) -> list[str]:
    """onnx.checker, then onnxruntime against torch (dense_detection.reference) at CHECK_SIZES."""
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    seen = []
    for height, width in CHECK_SIZES:
        x = np.random.default_rng(height * 1000 + width).standard_normal((1, 3, height, width)).astype(np.float32)
        outputs = session.run(None, {"image": x})
        for name, got, want in zip(dense_detection.output_names(), outputs, dense_detection.reference(x)):
            atol = 1e-4 if name.startswith("scores") else 1e-2
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=atol):
                raise AssertionError(f"{DETECTOR} at {height}x{width}: output '{name}' {got.shape} differs from "
                                     f"torch's {want.shape}")
        seen.append(f"{height}x{width} -> P3 scores {'x'.join(map(str, outputs[0].shape))}")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where OUTDIR/<name>.onnx are written")
    parser.add_argument("names", nargs="*", default=list(MODELS), help=f"any of {', '.join(MODELS)} (default: all)")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    args.folder.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        t0 = time.perf_counter()
        if name == DETECTOR:
            model = onnx.load_from_string(dense_detection.export())
            seen = check_detector(model)
        else:
            model = symbolic_image(zoo.build(name))
            seen = check(name, model)
        path = args.folder / f"{name}.onnx"
        onnx.save(model, path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {time.perf_counter() - t0:.0f} s; onnxruntime "
              f"{', '.join(seen)})", flush=True)


if __name__ == "__main__":
    main()
