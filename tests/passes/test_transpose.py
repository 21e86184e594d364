"""Transpose sinking on NHWC graphs written the way a TF converter writes them: every
NCHW op between Transpose(0,3,1,2) and Transpose(0,2,3,1), everything else on NHWC
tensors. After the pass only the boundary conversions may be left, the graph computes
what it did (numpy references of the graph before the pass), and the compiled model
matches onnxruntime on the ONNX model."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit import zoo
from hobbit.compiler import lower_to_llvm
from hobbit.frontend.onnx.importer import import_onnx
from hobbit.passes import DEFAULT_PIPELINE
from hobbit.passes.transpose import sink_transposes, transpose_cost
from tests.helpers import make_model, rand, run_ort
from tests.passes import evaluate, ops

TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
_NCHW_OPS = ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization")


class NHWC:
    """Builds an NHWC model the TF way: `nchw` wraps an NCHW op in Transposes."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value: np.ndarray) -> str:
        name = self.name("c")
        self.inits[name] = np.asarray(value, np.float32)
        return name

    def op_const_int(self, value: list[int]) -> str:
        name = self.name("i")
        self.inits[name] = np.asarray(value, np.int64)
        return name

    def op(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def transpose(self, x: str, perm: list[int]) -> str:
        return self.op("Transpose", [x], perm=perm)

    def nchw(self, op: str, x: str, *consts: np.ndarray, **attrs) -> str:
        inner = self.op(op, [self.transpose(x, TO_NCHW)] + [self.const(c) for c in consts], **attrs)
        return self.transpose(inner, TO_NHWC)

    def conv(self, x: str, cin: int, cout: int, k: int = 3, seed: int = 0, **attrs) -> str:
        """Conv2D + BiasAdd: the bias is a (C,) constant added to the NHWC tensor."""
        w = rand(cout, cin, k, k, seed=seed) / np.sqrt(cin * k * k)
        y = self.nchw("Conv", x, w, pads=[k // 2] * 4, **attrs)
        return self.op("Add", [y, self.const(rand(cout, seed=seed + 100))])

    def model(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> onnx.ModelProto:
        return make_model(self.nodes, inputs, outputs, self.inits)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], transposes: int, rtol: float = 1e-4,
           atol: float = 1e-5):
    """The pass leaves `transposes` Transposes, keeps the graph's results, and the compiled
    model matches onnxruntime."""
    graph = import_onnx(model)
    want = evaluate(graph, feeds)
    graph = sink_transposes(graph)
    assert ops(graph).count("Transpose") == transposes, str(graph)
    for got, expected in zip(evaluate(graph, feeds), want):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    expected = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return graph


def test_cnn_keeps_only_the_input_conversion():
    """Conv -> bias -> Relu -> MaxPool -> Concat(axis 3) -> Mean(H, W) -> Dense: nothing left
    but the input's Transpose (the Mean without keepdims ends the NHWC part)."""
    b = NHWC()
    c = b.op("Relu", [b.conv("x", 3, 8)])
    p = b.nchw("MaxPool", c, kernel_shape=[2, 2], strides=[2, 2])
    q = b.op("Relu", [b.conv(p, 8, 4, k=1, seed=1)])
    cat = b.op("Concat", [p, q], axis=3)
    m = b.op("ReduceMean", [cat], axes=[1, 2], keepdims=0)
    y = b.op("MatMul", [m, b.const(rand(12, 5, seed=2))])
    graph = _check(b.model({"x": rand(1, 8, 8, 3)}, [y]), {"x": rand(1, 8, 8, 3)}, 1)
    assert ops(graph)[0] == "Transpose"
    concat = next(n for n in graph.nodes if n.op == "Concat")
    assert concat.attrs["axis"] == 1
    bias = next(n for n in graph.nodes if n.op == "Add").inputs[1]
    assert bias.shape == (8, 1, 1)


def test_residual_branches_and_the_output_conversion():
    """Two transposed branches meet in an Add; the block's input feeds both the branch and the
    Add (two readers). The 4-D output keeps its one conversion back to NHWC."""
    b = NHWC()
    h = b.op("Relu", [b.conv("x", 4, 4)])
    branch = b.conv(b.op("Relu", [b.conv(h, 4, 4, seed=1)]), 4, 4, seed=2)
    y = b.op("Relu", [b.op("Add", [branch, h])])
    projected = b.conv(y, 4, 6, k=1, seed=3)
    z = b.op("Add", [b.conv(b.op("Relu", [b.conv(y, 4, 6, seed=4)]), 6, 6, seed=5), projected])
    graph = _check(b.model({"x": rand(2, 6, 6, 4)}, [z]), {"x": rand(2, 6, 6, 4, seed=1)}, 2)
    assert graph.outputs[0].producer.op == "Transpose"
    assert tuple(graph.outputs[0].producer.attrs["perm"]) == tuple(TO_NHWC)


def test_swish_and_squeeze_excite():
    """x * sigmoid(x) reads x twice; squeeze-excite's Mean(keepdims) -> 1x1 convs -> Mul
    rescales the NHWC tensor by an [N, 1, 1, C] one."""
    b = NHWC()
    c = b.conv("x", 3, 8)
    h = b.op("Mul", [c, b.op("Sigmoid", [c])])
    s = b.op("ReduceMean", [h], axes=[1, 2], keepdims=1)
    s = b.conv(s, 8, 2, k=1, seed=1)
    s = b.op("Mul", [s, b.op("Sigmoid", [s])])
    s = b.op("Sigmoid", [b.conv(s, 2, 8, k=1, seed=2)])
    y = b.nchw("Conv", b.op("Mul", [h, s]), rand(4, 8, 1, 1, seed=3))
    _check(b.model({"x": rand(1, 5, 5, 3)}, [y]), {"x": rand(1, 5, 5, 3)}, 2)


def test_padding_and_strided_slice():
    """ZeroPadding2D before a VALID conv, and a Slice of the NHWC tensor."""
    b = NHWC()
    c = b.op("Relu", [b.conv("x", 3, 4)])
    padded = b.op("Pad", [c, b.op_const_int([0, 1, 1, 0, 0, 1, 1, 0])])
    v = b.nchw("Conv", padded, rand(4, 4, 3, 3, seed=1), strides=[2, 2])
    cut = b.op("Slice", [v, *(b.op_const_int(a) for a in ([0, 0, 0, 1], [1, 3, 3, 4], [0, 1, 2, 3], [1, 2, 1, 1]))])
    y = b.nchw("Conv", b.op("Relu", [cut]), rand(2, 3, 1, 1, seed=2))
    _check(b.model({"x": rand(1, 7, 7, 3)}, [y]), {"x": rand(1, 7, 7, 3)}, 2)


def test_layernorm_and_dense_on_nhwc():
    """ConvNeXt's block: depthwise conv, LayerNorm over the channel axis, Dense -> Gelu ->
    Dense on the 4-D NHWC tensor, layer scale, residual. LayerNorm becomes reductions over
    NCHW's axis 1 and the Dense layers 1x1 Convs."""
    b = NHWC()
    x = b.conv("x", 3, 8)
    d = b.op("Add", [b.nchw("Conv", x, rand(8, 1, 3, 3, seed=1), pads=[1, 1, 1, 1], group=8),
                     b.const(rand(8, seed=2))])
    n = b.op("LayerNormalization", [d, b.const(1 + 0.1 * rand(8, seed=3)), b.const(rand(8, seed=4))], axis=-1,
             epsilon=1e-6)
    u = b.op("Add", [b.op("MatMul", [n, b.const(rand(8, 16, seed=5) / 3)]), b.const(rand(16, seed=6))])
    u = b.op("Mul", [b.op("Mul", [u, b.const(0.5)]),
                     b.op("Add", [b.op("Erf", [b.op("Div", [u, b.const(np.sqrt(2))])]), b.const(1.0)])])
    v = b.op("Add", [b.op("MatMul", [u, b.const(rand(16, 8, seed=7) / 4)]), b.const(rand(8, seed=8))])
    y = b.op("Add", [x, b.op("Mul", [v, b.const(rand(8, seed=9))])])
    z = b.nchw("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2])
    graph = _check(b.model({"x": rand(1, 6, 6, 3)}, [z]), {"x": rand(1, 6, 6, 3)}, 2, rtol=1e-4, atol=1e-4)
    assert "LayerNormalization" not in ops(graph) and "MatMul" not in ops(graph)
    assert ops(graph).count("Conv") == 4


def test_layernorm_over_kept_dims_stays_one_node():
    """A LayerNormalization of the last axis of a Transpose that keeps that axis in place."""
    x = rand(2, 3, 4, 5)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2, 3]),
             helper.make_node("LayerNormalization", ["t", "s", "b"], ["n"], axis=-1),
             helper.make_node("Transpose", ["n"], ["y"], perm=[1, 0, 2, 3])]
    model = make_model(nodes, {"x": x}, ["y"], {"s": rand(5, seed=1), "b": rand(5, seed=2)})
    graph = _check(model, {"x": x}, 0)
    assert ops(graph) == ["LayerNormalization"]


def test_flatten_dense_reads_nchw_order():
    """Keras Flatten + Dense after the last pool: the weight rows are permuted instead."""
    b = NHWC()
    p = b.nchw("MaxPool", b.op("Relu", [b.conv("x", 3, 4)]), kernel_shape=[2, 2], strides=[2, 2])
    flat = b.op("Reshape", [p, b.op_const_int([1, 36])])
    y = b.op("Add", [b.op("MatMul", [flat, b.const(rand(36, 10, seed=3))]), b.const(rand(10, seed=4))])
    graph = _check(b.model({"x": rand(1, 6, 6, 3)}, [y]), {"x": rand(1, 6, 6, 3)}, 1)
    assert ops(graph).count("MatMul") == 1


def test_general_reshape_keeps_its_transpose():
    """A Reshape that splits the NHWC channel axis reads NHWC memory order: the Transpose stays."""
    b = NHWC()
    c = b.op("Relu", [b.conv("x", 3, 4)])
    r = b.op("Reshape", [c, b.op_const_int([1, 5, 5, 2, 2])])
    y = b.op("ReduceSum", [r, b.op_const_int([4])], keepdims=0)
    _check(b.model({"x": rand(1, 5, 5, 3)}, [y]), {"x": rand(1, 5, 5, 3)}, 2)


def test_multi_reader_transpose_is_not_duplicated():
    """A transposed tensor read by a Gather (does not commute) and a Relu: moving it into the
    Relu would add one Transpose, so both readers keep reading the one there is."""
    b = NHWC()
    c = b.conv("x", 3, 4)
    g = b.op("Gather", [c, b.op_const_int([0, 2])], axis=3)
    r = b.op("Relu", [c])
    graph = _check(b.model({"x": rand(1, 4, 4, 3)}, [g, r]), {"x": rand(1, 4, 4, 3)}, 2)
    assert transpose_cost(graph)[0] == 2


def test_transposes_of_one_tensor_cancel_into_each_reader():
    """One NHWC tensor read by the input Transposes of two convs: both cancel."""
    b = NHWC()
    c = b.op("Relu", [b.conv("x", 3, 4)])
    y = b.op("Add", [b.conv(c, 4, 4, seed=1), b.conv(c, 4, 4, k=1, seed=2)])
    m = b.op("ReduceMax", [y], axes=[1, 2], keepdims=0)
    _check(b.model({"x": rand(1, 4, 4, 3)}, [m]), {"x": rand(1, 4, 4, 3)}, 1)


def test_transpose_does_not_grow_into_a_dead_end():
    """Moving the output conversion below a Pad would copy more elements: it stays above."""
    b = NHWC()
    c = b.nchw("Conv", "x", rand(4, 3, 1, 1))
    y = b.op("Pad", [c, b.op_const_int([0, 2, 2, 0, 0, 2, 2, 0])])
    graph = _check(b.model({"x": rand(1, 4, 4, 3)}, [y]), {"x": rand(1, 4, 4, 3)}, 2)
    assert graph.outputs[0].producer.op == "Pad"


def test_softmax_and_split_along_channels():
    b = NHWC()
    c = b.conv("x", 3, 6)
    s = b.op("Softmax", [c], axis=3)
    first, second = (f"split_{i}" for i in range(2))
    b.nodes.append(helper.make_node("Split", [s, b.op_const_int([2, 4])], [first, second], axis=3))
    y = b.op("Mul", [b.op("ReduceMean", [first], axes=[3], keepdims=1), second])
    _check(b.model({"x": rand(1, 4, 4, 3)}, [y]), {"x": rand(1, 4, 4, 3)}, 2)


def test_size_one_dims_transpose_is_a_view():
    """[N, 1, 1, C] -> [N, C, 1, 1] moves no data: a Reshape."""
    x = rand(2, 1, 1, 8)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=TO_NCHW),
             helper.make_node("Conv", ["t", "w"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"w": rand(3, 8, 1, 1)})
    graph = _check(model, {"x": x}, 0)
    assert ops(graph) == ["Reshape", "Conv"]


def _class_token_model(batch: int | str) -> onnx.ModelProto:
    """ViT's embedding: patches [N, C, H, W] -> [N, C, HW] -> Transpose(0, 2, 1), the class
    token [1, 1, C] expanded to the batch and put first (Concat axis 1), plus positions; a
    head that reads the tokens channels first transposes back."""
    x = rand(1, 8, 3, 3)
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Concat", ["s", "ones"], ["size"], axis=0),
             helper.make_node("Expand", ["token", "size"], ["cls"]),
             helper.make_node("Concat", ["cls", "t"], ["cat"], axis=1),
             helper.make_node("Add", ["cat", "pos"], ["a"]),
             helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 1])]
    inits = {"flat": np.array([0, 8, 9], np.int64), "ones": np.array([1, 1], np.int64),
             "token": rand(1, 1, 8, seed=1), "pos": rand(10, 8, seed=2)}
    model = make_model(nodes, {"x": x}, ["y"], inits)
    model.graph.input[0].type.tensor_type.shape.dim[0].ClearField("dim_value")
    if isinstance(batch, str):
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = batch
    else:
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    return model


def test_class_token_concat_keeps_the_rank_of_its_operands():
    """The [1, 1, C] token moved under the Transpose is [1, C, 1] (rank 3, as Concat needs),
    not the [C, 1] an operand of a broadcasting op may be: the Concat joins the untransposed
    patches on axis 2 and the Transposes cancel."""
    x = rand(1, 8, 3, 3, seed=3)
    graph = _check(_class_token_model(1), {"x": x}, 0)
    concat = next(n for n in graph.nodes if n.op == "Concat")
    assert concat.attrs["axis"] == 2 and [v.shape for v in concat.inputs] == [(1, 8, 1), (1, 8, 9)]


def test_class_token_concat_with_a_symbolic_batch():
    """The same model with a symbolic batch, run at two batch sizes."""
    model = _class_token_model("N")
    compiled = hobbit.compile(model)
    for n in (1, 3):
        x = rand(n, 8, 3, 3, seed=n)
        np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def _nhwc_version(model: onnx.ModelProto) -> onnx.ModelProto:
    """The NCHW zoo model as a TF converter would write it: an NHWC input, every NCHW op
    between Transposes, element-wise ops and Concat on NHWC tensors, the head unchanged."""
    graph = model.graph
    b = NHWC()
    b.inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    name = graph.input[0].name
    nhwc: dict[str, str] = {name: "x"}
    for node in graph.node:
        ins = [nhwc.get(i, i) for i in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in _NCHW_OPS:
            inner = b.op(node.op_type, [b.transpose(ins[0], TO_NCHW)] + ins[1:], **attrs)
            out = b.transpose(inner, TO_NHWC)
        elif node.op_type == "Concat":
            out = b.op("Concat", ins, axis=3)
        else:
            out = b.op(node.op_type, ins, **attrs)
        nhwc[node.output[0]] = out
    shape = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    x = np.zeros((shape[0], shape[2], shape[3], shape[1]), np.float32)
    return b.model({"x": x}, [nhwc[graph.output[0].name]])


@lru_cache(maxsize=None)
def _zoo(name: str) -> onnx.ModelProto:
    return zoo.build(name)


def test_nhwc_resnet18_becomes_the_nchw_network():
    """After the passes the NHWC ResNet-18 is the NCHW one plus the input's conversion."""
    nchw = lower_to_llvm(_zoo("resnet18"), keep_ir=False).graph
    nhwc = lower_to_llvm(_nhwc_version(_zoo("resnet18")), keep_ir=False).graph
    assert ops(nhwc) == ["Transpose"] + ops(nchw)


@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenet_v2"])
def test_nhwc_zoo_model_matches_onnxruntime(name):
    model = _nhwc_version(_zoo(name))
    x = rand(1, 224, 224, 3)
    graph = sink_transposes(import_onnx(model))
    assert ops(graph).count("Transpose") == 1
    got = hobbit.compile(model).run({"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_no_op_on_zoo_models(name):
    graph = import_onnx(_zoo(name))
    before = [(n.op, n.name, dict(n.attrs)) for n in graph.nodes]
    assert [(n.op, n.name, dict(n.attrs)) for n in sink_transposes(graph).nodes] == before


@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenet_v2"])
def test_zoo_llvm_ir_is_unchanged(name):
    without = [p for p in DEFAULT_PIPELINE if p != "sink-transposes"]
    a = lower_to_llvm(_zoo(name), passes=DEFAULT_PIPELINE)
    b = lower_to_llvm(_zoo(name), passes=without)
    assert str(a.optimized) == str(b.optimized)


def test_keras_block_through_the_tf_importer():
    """A Keras 3 model read by hobbit's TF importer: BatchNorm, swish, depthwise conv,
    LayerNorm, Dense (TensorFlow's Reshape -> MatMul -> Reshape) with gelu, residual Add,
    ZeroPadding2D, pool, Flatten + Dense. Only the input's Transpose is left, and the
    compiled graph matches TensorFlow."""
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    from hobbit.frontend.tf.convert import import_tf
    from tests.frontend.tf.conftest import assert_close, compile_graph, freeze

    inp = keras.Input((12, 12, 3), batch_size=1)
    r = keras.layers.Activation("swish")(keras.layers.BatchNormalization(beta_initializer="random_normal")(
        keras.layers.Conv2D(8, 3, padding="same")(inp)))
    y = keras.layers.LayerNormalization()(keras.layers.DepthwiseConv2D(3, padding="same")(r))
    y = keras.layers.Dense(8)(keras.layers.Dense(16, activation="gelu")(y))
    y = keras.layers.Conv2D(8, 3, strides=2)(keras.layers.ZeroPadding2D(1)(keras.layers.Add()([y, r])))
    y = keras.layers.Flatten()(keras.layers.MaxPooling2D()(y))
    model = keras.Model(inp, keras.layers.Dense(5, activation="softmax")(y))
    graph, frozen = freeze(lambda t: model(t, training=False), tf.TensorSpec((1, 12, 12, 3), tf.float32, name="x0"))
    x = rand(1, 12, 12, 3)
    assert ops(sink_transposes(import_tf(graph))).count("Transpose") == 1
    assert_close(compile_graph(import_tf(graph)).run({"x0": x})[0], np.asarray(frozen(tf.constant(x))[0]), 1e-3)
