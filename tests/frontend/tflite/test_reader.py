"""read_tflite on models made by TensorFlow's converter: the translated TFGraph has the
expected TensorFlow ops, constants equal to the interpreter's tensors, the interpreter's
inputs and outputs, and (evaluated with tf.raw_ops) the interpreter's results."""

from __future__ import annotations

import numpy as np
import pytest

from tests.frontend.tflite.oracle import convert, evaluate, interpreter, run_interpreter, tf

from hobbit.frontend.tflite.model import decode_model
from hobbit.frontend.tflite.reader import read_tflite

RNG = np.random.default_rng(7)


def weights(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32) * 0.5)


def spec(*shape) -> tf.TensorSpec:
    return tf.TensorSpec(shape, tf.float32)


def conv(x, strides=1, padding="SAME", dilations=1, cin=3, cout=4):
    return tf.nn.conv2d(x, weights(3, 3, cin, cout), strides, padding, dilations=dilations) + weights(cout)


IMAGE = spec(1, 9, 9, 3)

CASES = {
    "conv_same_relu": (lambda x: tf.nn.relu(conv(x)), [IMAGE], {"Conv2D", "BiasAdd", "Relu"}),
    "conv_valid_stride2_relu6": (lambda x: tf.nn.relu6(conv(x, 2, "VALID")), [IMAGE], {"Conv2D", "Relu6"}),
    "conv_dilated_tanh": (lambda x: tf.tanh(conv(x, dilations=2)), [IMAGE], {"Conv2D", "Tanh"}),
    "conv_relu_n1_to_1": (
        lambda x: tf.clip_by_value(conv(x), -1.0, 1.0), [IMAGE], {"Conv2D", "Minimum", "Maximum"}),
    "depthwise_multiplier2_stride2": (
        lambda x: tf.nn.depthwise_conv2d(x, weights(3, 3, 3, 2), [1, 2, 2, 1], "VALID") + weights(6),
        [IMAGE], {"DepthwiseConv2dNative"}),
    "depthwise_dilated_relu": (
        lambda x: tf.nn.relu(tf.nn.depthwise_conv2d(x, weights(3, 3, 3, 1), [1, 1, 1, 1], "SAME", dilations=[2, 2])),
        [IMAGE], {"DepthwiseConv2dNative", "Relu"}),
    "transpose_conv_same_stride2": (
        lambda x: tf.nn.conv2d_transpose(x, weights(3, 3, 5, 3), [1, 18, 18, 5], 2, "SAME") + weights(5),
        [IMAGE], {"Conv2DBackpropInput"}),
    "transpose_conv_valid": (
        lambda x: tf.nn.conv2d_transpose(x, weights(2, 2, 4, 3), [1, 10, 10, 4], 1, "VALID"),
        [IMAGE], {"Conv2DBackpropInput"}),
    "dense_relu": (lambda x: tf.nn.relu(tf.matmul(x, weights(6, 4)) + weights(4)), [spec(2, 6)], {"MatMul", "Relu"}),
    "dense_3d": (lambda x: tf.matmul(x, weights(6, 4)) + weights(4), [spec(2, 3, 6)], set()),
    "dense_dynamic_batch": (lambda x: tf.matmul(x, weights(6, 4)), [spec(None, 6)], {"MatMul"}),
    "batch_matmul_adjoints": (
        lambda a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True),
        [spec(2, 4, 3), spec(2, 5, 4)], {"BatchMatMulV2"}),
    "arithmetic_broadcast": (
        lambda x, y: tf.nn.relu((x + y) * weights(5) - y / (tf.abs(x) + 1.0)),
        [spec(2, 5), spec(1, 5)], {"AddV2", "Mul", "Sub", "RealDiv", "Relu"}),
    "reductions": (
        lambda x: tf.reduce_mean(x, [1, 2], keepdims=True) + tf.reduce_sum(x, 1, keepdims=True)[:, :1]
        + tf.reduce_max(x, [1, 2], keepdims=True) - tf.reduce_min(x, [1, 2], keepdims=True)
        + tf.reduce_prod(x, 2, keepdims=True)[:, :1, :1],
        [spec(2, 3, 4, 5)], {"Mean", "Sum", "Max", "Min", "Prod"}),
    "reductions_no_keepdims": (lambda x: tf.reduce_mean(x, [1, 2]), [IMAGE], {"Mean"}),
    "pools": (
        lambda x: tf.concat([
            tf.nn.avg_pool2d(x, 3, 2, "SAME"), tf.nn.max_pool2d(x, 3, 2, "SAME")], axis=-1),
        [IMAGE], {"AvgPool", "MaxPool", "ConcatV2"}),
    "pool_valid": (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), [IMAGE], {"MaxPool"}),
    "concat_axis1": (lambda x, y: tf.concat([x, y, x], axis=1), [spec(2, 3), spec(2, 4)], {"ConcatV2"}),
    "shapes": (
        lambda x: tf.transpose(tf.reshape(x, [3, 1, 8]), [1, 2, 0]), [spec(4, 6)], {"Reshape", "Transpose"}),
    "squeeze": (lambda x: tf.squeeze(x, [-1]), [spec(None, None, 1)], {"Squeeze"}),
    "expand_dims": (lambda x: tf.expand_dims(x, 1), [spec(None, 6)], {"ExpandDims"}),
    "softmax": (lambda x: tf.nn.softmax(x), [spec(2, 7)], {"Softmax"}),
    "softmax_beta": (lambda x: tf.nn.softmax(x * 2.5), [spec(2, 7)], {"Softmax", "Mul"}),
    "activations": (
        lambda x: tf.concat([tf.sigmoid(x), tf.tanh(x), tf.nn.relu(x), tf.nn.relu6(x * 4.0),
                             tf.nn.elu(x), tf.nn.leaky_relu(x, 0.15)], axis=1),
        [spec(2, 5)], {"Sigmoid", "Tanh", "Relu", "Relu6", "Elu", "LeakyRelu"}),
    "relu6": (lambda x: tf.nn.relu6(x), [spec(2, 3)], {"Relu6"}),
    "relu_n1_to_1": (lambda x: tf.clip_by_value(x, -1.0, 1.0), [spec(2, 3)], {"Minimum", "Maximum"}),
    "hard_swish": (lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, [spec(2, 8)], set()),
    "gelu_exact": (lambda x: tf.nn.gelu(x, approximate=False), [spec(2, 8)], set()),
    "gelu_approximate": (lambda x: tf.nn.gelu(x, approximate=True), [spec(2, 8)], set()),
    "pad": (lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]), [IMAGE], {"Pad"}),
    "padv2": (lambda x: tf.pad(x, [[0, 0], [1, 0], [0, 2], [0, 0]], constant_values=1.5), [IMAGE], {"PadV2"}),
    "mirror_pad_reflect": (lambda x: tf.pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], "REFLECT"), [IMAGE], {"MirrorPad"}),
    "mirror_pad_symmetric": (
        lambda x: tf.pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], "SYMMETRIC"), [IMAGE], {"MirrorPad"}),
    "strided_slice_masks": (
        lambda x: tf.concat([tf.reshape(x[:, 1:, ::2, ...], [-1]), tf.reshape(x[0, ..., tf.newaxis, 1], [-1]),
                             tf.reshape(x[::-1, 2:-1, 3], [-1])], 0),
        [spec(2, 5, 6, 3)], {"StridedSlice"}),
    "slice": (lambda x: tf.slice(x, [0, 1, 2], [2, 2, -1]), [spec(3, 4, 5)], {"Slice"}),
    "split_and_split_v": (
        lambda x: [*tf.split(x, 3, axis=1), *tf.split(x, [1, 2, 3], axis=1)], [spec(2, 6)], {"Split", "SplitV"}),
    "pack_unpack": (lambda x: [tf.stack(tf.unstack(x, axis=1)[::-1], axis=2)], [spec(2, 3, 4)], {"Pack", "Unpack"}),
    "gather": (lambda x: tf.gather(x, [2, 0, 1, 2], axis=1), [spec(2, 3, 4)], {"GatherV2"}),
    "gather_batch_dims": (
        lambda x, i: tf.gather(x, i, axis=1, batch_dims=1),
        [spec(2, 3, 4), tf.TensorSpec([2, 2], tf.int32)], {"GatherV2"}),
    "resize_bilinear_half_pixel": (lambda x: tf.image.resize(x, [13, 17]), [IMAGE], {"ResizeBilinear"}),
    "resize_bilinear_align_corners": (
        lambda x: tf.compat.v1.image.resize_bilinear(x, [13, 17], align_corners=True), [IMAGE], {"ResizeBilinear"}),
    "resize_nearest": (
        lambda x: tf.image.resize(x, [18, 18], method="nearest"), [IMAGE], {"ResizeNearestNeighbor"}),
    "unary_math": (
        lambda x: tf.concat([tf.math.rsqrt(x), tf.sqrt(x), tf.square(x), tf.exp(x), tf.math.log(x), -x,
                             tf.pow(x, x), tf.maximum(x, 1.0), tf.minimum(x, 1.0),
                             tf.math.squared_difference(x, 1.0)], axis=1),
        [spec(2, 3)], {"Rsqrt", "Sqrt", "Square", "Exp", "Log", "Neg", "Pow", "Maximum", "Minimum",
                       "SquaredDifference"}),
    "shape_fill_cast": (
        lambda x: tf.fill(tf.shape(x), 2.0) * tf.cast(x > 0.0, tf.float32),
        [spec(None, 4)], {"Shape", "Fill", "Cast"}),
    "logical_reductions": (
        lambda x: tf.concat([tf.cast(tf.reduce_all(x > -1.0, 1), tf.float32),
                             tf.cast(tf.reduce_any(x > 1.0, [1, 2]), tf.float32)[:, tf.newaxis]], axis=1),
        [spec(4, 3, 2)], {"All", "Any"}),
    "atan2": (lambda y, x: tf.math.atan2(y, x), [spec(3, 5), spec(3, 5)], {"Atan2"}),
    "cumsum": (
        lambda x: [tf.cumsum(x, 1), tf.cumsum(x, 0, exclusive=True, reverse=True)], [spec(3, 4)], {"Cumsum"}),
    "depth_to_space": (lambda x: tf.nn.depth_to_space(x, 2), [spec(1, 3, 4, 8)], {"DepthToSpace"}),
    "space_to_depth": (lambda x: tf.nn.space_to_depth(x, 2), [spec(1, 4, 6, 3)], {"SpaceToDepth"}),
    "gather_nd": (lambda x: tf.gather_nd(x, [[1, 0], [0, 2], [1, 1]]), [spec(2, 3, 4)], {"GatherNd"}),
    "reverse": (lambda x: [tf.reverse(x, [1]), tf.reverse(x, [-1])], [spec(2, 3, 4)], {"ReverseV2"}),
    "local_response_normalization": (
        lambda x: tf.nn.local_response_normalization(x, 2, 1.0, 0.1, 0.75), [spec(1, 3, 3, 7)], {"LRN"}),
    "floor_div_int": (
        lambda a: tf.math.floordiv(a, tf.constant([3, -2, 5, -4])), [tf.TensorSpec([3, 4], tf.int32)], {"FloorDiv"}),
    "gather_batch_dims_below_axis": (
        lambda x, i: tf.gather(x, i, axis=2, batch_dims=1),
        [spec(2, 3, 4), tf.TensorSpec([2, 2], tf.int32)], {"GatherV2"}),
}

# Inputs the case needs: positive ones for logs and roots, wide ones to reach 6 in relu6,
# negative and positive dividends.
FEED_RANGE = {"unary_math": lambda v: np.abs(v) + 0.1, "relu6": lambda v: v * 5.0,
              "floor_div_int": lambda v: v * 9 - 10}

# What each case must contain, so that the builtin (or option) it is named for is tested.
BUILTINS = {
    "conv_dilated_tanh": {"CONV_2D", "TANH"},
    "depthwise_dilated_relu": {"DEPTHWISE_CONV_2D"},
    "transpose_conv_same_stride2": {"TRANSPOSE_CONV"},
    "dense_3d": {"FULLY_CONNECTED"},
    "batch_matmul_adjoints": {"BATCH_MATMUL"},
    "arithmetic_broadcast": {"ABS", "ADD", "DIV", "MUL", "SUB"},
    "reductions": {"MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "SUM"},
    "pools": {"AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION"},
    "squeeze": {"SQUEEZE"},
    "expand_dims": {"EXPAND_DIMS"},
    "activations": {"ELU", "LEAKY_RELU", "LOGISTIC", "RELU", "TANH"},
    "relu6": {"RELU6"},
    "relu_n1_to_1": {"RELU_N1_TO_1"},
    "hard_swish": {"HARD_SWISH"},
    "gelu_exact": {"GELU"},
    "gelu_approximate": {"GELU"},
    "padv2": {"PADV2"},
    "mirror_pad_symmetric": {"MIRROR_PAD"},
    "strided_slice_masks": {"STRIDED_SLICE"},
    "split_and_split_v": {"SPLIT", "SPLIT_V"},
    "pack_unpack": {"PACK", "UNPACK"},
    "resize_nearest": {"RESIZE_NEAREST_NEIGHBOR"},
    "unary_math": {"EXP", "LOG", "MAXIMUM", "MINIMUM", "NEG", "POW", "RSQRT", "SQRT", "SQUARE",
                   "SQUARED_DIFFERENCE"},
    "shape_fill_cast": {"CAST", "FILL", "SHAPE"},
    "logical_reductions": {"REDUCE_ALL", "REDUCE_ANY"},
    "atan2": {"ATAN2"},
    "cumsum": {"CUMSUM"},
    "depth_to_space": {"DEPTH_TO_SPACE"},
    "space_to_depth": {"SPACE_TO_DEPTH"},
    "gather_nd": {"GATHER_ND"},
    "reverse": {"REVERSE_V2"},
    "local_response_normalization": {"LOCAL_RESPONSE_NORMALIZATION"},
    "floor_div_int": {"FLOOR_DIV"},
    "gather_batch_dims_below_axis": {"GATHER"},
}


def _feeds(content: bytes) -> dict[str, np.ndarray]:
    feeds = {}
    for d in interpreter(content).get_input_details():
        shape = [2 if s < 0 else s for s in d["shape_signature"]]
        if d["dtype"] == np.int32:
            feeds[d["name"]] = RNG.integers(0, 3, shape).astype(np.int32)
        else:
            feeds[d["name"]] = RNG.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("case", CASES)
def test_translation_matches_interpreter(case):
    fn, specs, expected_ops = CASES[case]
    content = convert(fn, specs)
    builtins = {op.builtin for op in decode_model(content, case).operators}
    assert BUILTINS.get(case, set()) <= builtins, f"the converter made {sorted(builtins)}"
    graph = read_tflite(content)
    ops = {n.op for n in graph.nodes.values()}
    assert expected_ops <= ops, f"missing {expected_ops - ops}; got {sorted(ops)}"
    assert not [op for op in ops if op.startswith("TFLite:")]
    feeds = _feeds(content)
    if case in FEED_RANGE:
        feeds = {k: FEED_RANGE[case](v) for k, v in feeds.items()}
    expected = run_interpreter(content, feeds)
    got = evaluate(graph, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_prelu_from_keras():
    import keras

    model = keras.Sequential([keras.Input((3, 5)), keras.layers.PReLU()])
    model.layers[0].set_weights([RNG.standard_normal((3, 5)).astype(np.float32)])
    content = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    assert "PRELU" in {op.builtin for op in decode_model(content, "prelu").operators}
    graph = read_tflite(content)
    feeds = _feeds(content)
    np.testing.assert_allclose(evaluate(graph, feeds)[0], run_interpreter(content, feeds)[0], rtol=1e-5, atol=1e-6)


def test_inputs_and_outputs_are_the_interpreters():
    content = convert(lambda x, y: [tf.nn.relu(x) + 1.0, tf.reduce_sum(y, 1)], [spec(None, 4), spec(3, None)])
    graph = read_tflite(content)
    interp = interpreter(content)
    for tensors, details in ((graph.inputs, interp.get_input_details()), (graph.outputs, interp.get_output_details())):
        assert [t.name for t in tensors] == [d["name"] for d in details]
        assert [t.shape for t in tensors] == [
            tuple(None if s < 0 else int(s) for s in d["shape_signature"]) for d in details]
        assert [t.dtype for t in tensors] == [np.dtype(d["dtype"]) for d in details]
    assert graph.format == "tflite"
    assert {graph.nodes[t.ref.node].op for t in graph.inputs} == {"Placeholder"}


def test_inputs_and_outputs_take_their_signature_names():
    """A model converted from Keras has a signature: its names (the Keras input's, output_0)
    are the model's, as they are for the same model's SavedModel; its tensors' own names
    ('serving_default_image:0') are the converter's."""
    import keras

    image = keras.Input((4, 4, 2), name="image")
    model = keras.Model(image, keras.layers.Dense(3)(image))
    content = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    graph = read_tflite(content)
    signature = interpreter(content).get_signature_list()["serving_default"]
    assert [t.name for t in graph.inputs] == signature["inputs"] == ["image"]
    assert [t.name for t in graph.outputs] == signature["outputs"]
    details = interpreter(content).get_input_details()
    assert graph.inputs[0].ref.node == details[0]["name"] != "image"


def test_constants_are_the_interpreters_tensors():
    content = convert(lambda x: tf.nn.relu(conv(x)) * weights(4), [IMAGE])
    model = decode_model(content, "model.tflite")
    interp = tf.lite.Interpreter(model_content=content, experimental_preserve_all_tensors=True)
    interp.allocate_tensors()
    constants = [t for t in model.tensors if t.data is not None]
    assert len(constants) >= 3
    for t in constants:
        np.testing.assert_array_equal(t.data, interp.get_tensor(t.index))


def test_conv_filter_is_transposed_to_hwio():
    w = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    content = convert(lambda x: tf.nn.conv2d(x, tf.constant(w), 1, "SAME"), [IMAGE])
    graph = read_tflite(content)
    conv2d = next(n for n in graph.nodes.values() if n.op == "Conv2D")
    np.testing.assert_array_equal(graph.nodes[conv2d.inputs[1].node].attrs["value"], w)


def test_float16_weights_are_dequantized_constants():
    w = RNG.standard_normal((6, 4)).astype(np.float32)
    content = convert(lambda x: tf.matmul(x, tf.constant(w)), [spec(2, 6)], float16=True)
    model = decode_model(content, "model.tflite")
    assert any(t.dtype == np.float16 and t.data is not None for t in model.tensors)
    graph = read_tflite(content)
    matmul = next(n for n in graph.nodes.values() if n.op == "MatMul")
    weight = graph.nodes[matmul.inputs[1].node]
    assert weight.op == "Const" and weight.attrs["value"].dtype == np.float32
    np.testing.assert_array_equal(weight.attrs["value"], w.T.astype(np.float16).astype(np.float32))
    feeds = _feeds(content)
    np.testing.assert_allclose(evaluate(graph, feeds)[0], run_interpreter(content, feeds)[0], rtol=1e-4, atol=1e-5)


def test_untranslated_builtin_becomes_a_tflite_node():
    content = convert(lambda x: tf.math.top_k(x, 2).values, [spec(2, 5)])
    graph = read_tflite(content)
    (node,) = [n for n in graph.nodes.values() if n.op.startswith("TFLite:")]
    assert node.op == "TFLite:TOPK_V2"
    assert graph.outputs[0].ref.node == node.name


END_TO_END = [
    "conv_same_relu", "conv_relu_n1_to_1", "depthwise_multiplier2_stride2", "transpose_conv_same_stride2",
    "dense_3d", "pools", "softmax", "hard_swish", "gelu_exact", "strided_slice_masks", "split_and_split_v",
    "resize_bilinear_half_pixel", "shape_fill_cast", "logical_reductions", "atan2", "cumsum", "depth_to_space",
    "space_to_depth", "gather_nd", "reverse", "local_response_normalization", "floor_div_int",
    "gather_batch_dims_below_axis",
]


@pytest.mark.parametrize("case", END_TO_END)
def test_compiled_matches_interpreter(case, tmp_path):
    """The .tflite file through hobbit.compile (reader, TF converters, codegen)."""
    import hobbit

    fn, specs, _ = CASES[case]
    content = convert(fn, specs)
    path = tmp_path / "model.tflite"
    path.write_bytes(content)
    feeds = _feeds(content)
    if case in FEED_RANGE:
        feeds = {k: FEED_RANGE[case](v) for k, v in feeds.items()}
    got = hobbit.compile(str(path)).run(feeds)
    for g, e in zip(got, run_interpreter(content, feeds), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(e)))))
