"""Zoo models quantized by onnxruntime (quant_pre_process, then quantize_static: QDQ, uint8
activations, int8 per-channel weights, MinMax calibration on four seeded 1/f-noise images)
run through hobbit and compared with onnxruntime's int8 execution of the same QDQ model.

What is compared, and why:
- Every quantized group on its own (each QuantizeLinear output with the DequantizeLinear ->
  op -> QuantizeLinear nodes that make it), fed onnxruntime's own values of the group's
  quantized inputs: within one quantization step, at most 2% of elements a step apart (the
  issue's bar; int8_models.assert_within_one_step). Fed the reference's inputs, each layer is
  held to the bar wherever it sits in the network.
- The whole network end to end, on the float logits (DQ of the last quantized tensor): no
  farther from onnxruntime's int8 than onnxruntime's own float execution of the same QDQ
  graph (optimizations off) is, with a 1.5x margin. The one-step bar cannot hold here for
  two correct implementations: a value on a rounding tie in an early layer moves by a step,
  and random-weight networks amplify it layer by layer. Measured on the evaluation image:
  onnxruntime's float QDQ execution is 1 step (25% of logits) off its int8 on ResNet-18,
  11 steps (85%) on MobileNetV2, 2 steps (40%) on ResNet-50.
- Bit for bit, on the evaluation image only: hobbit's logits equal onnxruntime's int8 logits
  exactly on ResNet-18, MobileNetV2 and SqueezeNet 1.1; on ResNet-50 they are at most 2
  output quantization steps apart (the scale of the last DequantizeLinear). This is not
  true of every input. Measured on a Zen 4 (znver4, AVX-512 VNNI) over 16 seeded images
  (smooth_images(16, EVALUATION_SEED)): equal on 14 of 16 for SqueezeNet (the other two: 1
  step on at most 1.7% of logits), 12 of 16 for ResNet-18 (1 step on 13-25% of logits), 8
  of 16 for MobileNetV2 (up to 5 steps on up to 73% of logits), 0 of 4 for ResNet-50 (2
  steps on 35-40%). Layer by layer on the evaluation image, fed onnxruntime's inputs, 66
  of 66 MobileNetV2 groups, 32 of 33 ResNet-18 groups and 39 of 40 SqueezeNet groups are
  bit-exact; each remaining group has one element one step off (a rounding tie in the
  requantization), which the network then carries to the logits on some inputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

import hobbit
from hobbit import zoo
from hobbit.plan.int8 import dot_product
from hobbit.target import host_target
from hobbit.zoo.images import CALIBRATION_SEED, EVALUATION_SEED, smooth_images
from tests.helpers import exact_u8s8
from tests.backend.cpu.int8_models import assert_within_one_step

# Measured ratios of the two end-to-end distances: 0 (bit-exact) to 1.01 on the int8 kernels,
# 0.90 to 1.17 on the float emulation they replaced.
MARGIN = 1.5


class _Images(CalibrationDataReader):
    def __init__(self, images: np.ndarray):
        self._feeds = iter([{"input": image[None]} for image in images])

    def get_next(self) -> dict | None:
        return next(self._feeds, None)


def _quantize(name: str, folder) -> onnx.ModelProto:
    float_path, prepared, quantized = (folder / f"{name}{suffix}.onnx" for suffix in ("", ".pre", ".qdq"))
    onnx.save(zoo.build(name), float_path)
    quant_pre_process(str(float_path), str(prepared))  # folds BatchNorm into the convolutions
    quantize_static(str(prepared), str(quantized), _Images(smooth_images(4, CALIBRATION_SEED)),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True)
    return onnx.load(str(quantized))


def _run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], optimized: bool = True) -> list[np.ndarray]:
    """Optimized, onnxruntime fuses the QDQ groups into its int8 kernels; unoptimized, it runs
    the graph as written (DequantizeLinear, float op, QuantizeLinear). Its int8 weights are
    stored as uint8 (tests.helpers.run_ort: exact on CPUs without VNNI too)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if not optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    model, feeds = exact_u8s8(model, feeds)
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def _group(model: onnx.ModelProto, quantize: onnx.NodeProto,
           made_by: dict[str, onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The nodes that compute `quantize`'s output from quantized tensors (outputs of other
    QuantizeLinear nodes), graph inputs and initializers, in graph order."""
    members, pending = {id(quantize): quantize}, list(quantize.input)
    while pending:
        producer = made_by.get(pending.pop())
        if producer is None or producer.op_type == "QuantizeLinear" or id(producer) in members:
            continue
        members[id(producer)] = producer
        pending.extend(producer.input)
    return [n for n in model.graph.node if id(n) in members]


def _groups_side_by_side(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict]:
    """One model holding every quantized group separately: group i's quantized inputs become the
    graph inputs "i/<name>", fed onnxruntime's values of them (`values`), and its output is
    "i/<quantized output>". Returns the model and its feeds (the float model input aside)."""
    made_by = {out: n for n in model.graph.node for out in n.output}
    shared = {t.name for t in model.graph.initializer} | {i.name for i in model.graph.input}
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    nodes, feeds, outputs = [], {}, []
    for i, quantize in enumerate(quantizers):
        def local(name: str, i: int = i) -> str:
            return name if not name or name in shared else f"{i}/{name}"
        for node in _group(model, quantize, made_by):
            feeds.update({local(n): values[n] for n in node.input
                          if n in made_by and made_by[n].op_type == "QuantizeLinear"})
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = f"{i}/{node.name}"
            del copy.input[:], copy.output[:]
            copy.input.extend(map(local, node.input))
            copy.output.extend(map(local, node.output))
            nodes.append(copy)
        outputs.append(local(quantize.output[0]))
    inputs = list(model.graph.input) + [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()]
    graph = helper.make_graph(nodes, "quantized groups", inputs,
                              [helper.make_empty_tensor_value_info(n) for n in outputs], list(model.graph.initializer))
    side_by_side = helper.make_model(graph, opset_imports=list(model.opset_import))
    side_by_side.ir_version = model.ir_version
    return side_by_side, feeds


MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", pytest.param("resnet50", marks=pytest.mark.slow)]
# Output quantization steps hobbit's logits may be from onnxruntime's int8 ones on the evaluation
# image: 0 is bit-exact (measured; see the module docstring for other images).
STEPS_ON_THE_EVALUATION_IMAGE = {"resnet18": 0, "mobilenet_v2": 0, "squeezenet1_1": 0, "resnet50": 2}
# Those figures were measured where hobbit runs vpdpbusd (Zen 4). On a CPU without VNNI (the
# vpmaddwd path; measured on a Zen 3, znver3) one more ResNet-18 group, the stem conv's, has
# one element on a requantization rounding tie a step off, which reaches 101 of 1000 logits
# one step apart; MobileNetV2's and SqueezeNet 1.1's logits stay equal.
STEPS_WITHOUT_VNNI = {"resnet18": 1}


@pytest.fixture(scope="module", params=MODELS)
def quantized(request, tmp_path_factory):
    name = request.param
    model = _quantize(name, tmp_path_factory.mktemp(name))
    image = smooth_images(1, EVALUATION_SEED)
    return name, model, {"input": image}


def test_every_quantized_group_within_one_step(quantized):
    name, model, feeds = quantized
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    q_outputs = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    exposed.graph.output.extend(helper.make_empty_tensor_value_info(q) for q in q_outputs)
    values = dict(zip([o.name for o in exposed.graph.output], _run_ort(exposed, feeds)))
    groups, group_feeds = _groups_side_by_side(model, values)
    group_feeds["input"] = feeds["input"]
    want = _run_ort(groups, group_feeds)
    got = hobbit.compile(groups).run(group_feeds)
    assert len(got) == len(want) == len(q_outputs) > 20
    for q, g, w in zip(q_outputs, got, want):
        assert_within_one_step(g, w, f"{name} group of {q}")


def test_logits_as_close_to_onnxruntime_int8_as_its_own_float_qdq(quantized):
    name, model, feeds = quantized
    int8, = _run_ort(model, feeds)
    float_qdq, = _run_ort(model, feeds, optimized=False)
    got, = hobbit.compile(model).run(feeds)
    assert got.shape == int8.shape == (1, 1000) and got.dtype == np.float32

    def distance(a: np.ndarray) -> float:
        return float(np.linalg.norm(a - int8) / np.linalg.norm(int8))

    assert distance(got) <= MARGIN * distance(float_qdq), (name, distance(got), distance(float_qdq))


def test_logits_on_the_evaluation_image_equal_onnxruntime_int8_where_measured_so(quantized):
    """The docs' claim, held to exactly: bit-exact logits for the three models measured so,
    within STEPS_ON_THE_EVALUATION_IMAGE output steps for ResNet-50 (and STEPS_WITHOUT_VNNI
    on a CPU without VNNI)."""
    name, model, feeds = quantized
    int8, = _run_ort(model, feeds)
    got, = hobbit.compile(model).run(feeds)
    steps = STEPS_ON_THE_EVALUATION_IMAGE[name]
    dot = dot_product(host_target())
    if dot is None or dot.name != "vpdpbusd":
        steps = max(steps, STEPS_WITHOUT_VNNI.get(name, 0))
    if steps == 0:
        np.testing.assert_array_equal(got, int8, err_msg=f"{name}: hobbit's int8 logits differ from onnxruntime's")
        return
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert last.op_type == "DequantizeLinear"
    scale = next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == last.input[1])
    assert np.abs(got.astype(np.float64) - int8).max() <= (steps + 0.01) * float(scale), name
