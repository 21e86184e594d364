"""The TensorFlow importer itself: ordering, graph inputs and outputs, and the errors for
graphs it cannot import (unsupported ops all at once, cycles, dangling inputs, dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hobbit.errors import GraphStructureError, ModelFormatError, SymbolicInputShape, UnsupportedModelError
from hobbit.frontend.tf.convert import import_tf
from hobbit.frontend.tf.graph import TensorRef, TFDType, TFGraph, TFNode, TFTensor
from tests.frontend.tf.conftest import check_against_tf, compile_graph, freeze


def _graph(nodes: list[TFNode], outputs: list[str], inputs: dict[str, tuple] | None = None) -> TFGraph:
    return TFGraph({n.name: n for n in nodes},
                   [TFTensor(name, TensorRef(name), np.dtype(np.float32), shape)
                    for name, shape in (inputs or {}).items()],
                   [TFTensor(name, TensorRef(name)) for name in outputs], "graphdef", "model.pb")


def _placeholder(name: str) -> TFNode:
    return TFNode(name, "Placeholder", [], {"dtype": np.dtype(np.float32), "shape": (2, 3)})


def test_conv_bias_relu_matmul_graph_matches_tensorflow():
    rng = np.random.default_rng(0)
    w = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    b = tf.constant(rng.standard_normal(4).astype(np.float32))
    m = tf.constant(rng.standard_normal((64, 5)).astype(np.float32))

    def model(x):
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b))
        y = tf.reshape(y, [-1, 64])
        return tf.identity(tf.matmul(y, m) + 1.0)

    check_against_tf(model, rng.standard_normal((2, 4, 4, 3)).astype(np.float32))


def test_inputs_and_outputs_keep_their_names():
    graph, _ = freeze(lambda x: tf.nn.relu(x), tf.TensorSpec((2, 3), tf.float32, name="image"))
    imported = import_tf(graph)
    assert [v.name for v in imported.inputs] == ["image"]
    assert imported.output_names == [graph.outputs[0].name]
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    (y,) = compile_graph(imported).run({"image": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_unused_nodes_are_not_imported():
    nodes = [_placeholder("x"), TFNode("y", "Relu", [TensorRef("x")]),
             TFNode("unused", "SaveV2", [TensorRef("x")])]
    imported = import_tf(_graph(nodes, ["y"], {"x": (2, 3)}))
    assert [n.op for n in imported.nodes] == ["Relu"]


def test_every_unsupported_op_is_reported_at_once():
    nodes = [_placeholder("x"), TFNode("a", "FancyOp", [TensorRef("x")]), TFNode("b", "OtherOp", [TensorRef("a")]),
             TFNode("c", "TFLite:CUSTOM_THING", [TensorRef("b")])]
    with pytest.raises(UnsupportedModelError) as info:
        import_tf(_graph(nodes, ["c"], {"x": (2, 3)}))
    items = {(i.op_type, i.node, i.domain) for i in info.value.items}
    assert items == {("FancyOp", "a", "tf"), ("OtherOp", "b", "tf"), ("TFLite:CUSTOM_THING", "c", "tflite")}


def test_a_cycle_names_a_node_on_it():
    nodes = [_placeholder("x"), TFNode("a", "AddV2", [TensorRef("x"), TensorRef("c")]),
             TFNode("b", "Relu", [TensorRef("a")]), TFNode("c", "Relu", [TensorRef("b")]),
             TFNode("out", "Identity", [TensorRef("c")])]
    with pytest.raises(GraphStructureError, match=r"node '(a|b|c)' .*cycle") as info:
        import_tf(_graph(nodes, ["out"], {"x": (2, 3)}))
    assert "model.pb" in str(info.value)


def test_a_dangling_input_names_the_node_and_the_missing_input():
    nodes = [_placeholder("x"), TFNode("a", "AddV2", [TensorRef("x"), TensorRef("ghost", 1)])]
    with pytest.raises(GraphStructureError, match=r"node 'a' \(AddV2\) reads 'ghost:1'"):
        import_tf(_graph(nodes, ["a"], {"x": (2, 3)}))


def test_a_missing_output_index_is_a_structure_error():
    nodes = [_placeholder("x"), TFNode("a", "Relu", [TensorRef("x")]), TFNode("b", "Relu", [TensorRef("a", 2)])]
    with pytest.raises(GraphStructureError, match=r"node 'b' \(Relu\) reads 'a:2'"):
        import_tf(_graph(nodes, ["b"], {"x": (2, 3)}))


def test_an_unknown_dtype_names_the_node():
    nodes = [_placeholder("x"), TFNode("s", "Cast", [TensorRef("x")], {"DstT": TFDType(7, "string")})]
    with pytest.raises(UnsupportedModelError) as info:
        import_tf(_graph(nodes, ["s"], {"x": (2, 3)}))
    (item,) = info.value.items
    assert item.node == "s" and "string" in item.reason


def test_unknown_input_dims_ask_for_a_shape():
    graph, _ = freeze(lambda x: tf.nn.relu(x), tf.TensorSpec((None, 3), tf.float32, name="x"))
    with pytest.raises(SymbolicInputShape, match="'x'"):
        import_tf(graph)
    imported = import_tf(graph, input_shapes={"x": (5, 3)})
    assert imported.inputs[0].shape == (5, 3)


def test_input_values_make_constants():
    graph, _ = freeze(lambda x, s: tf.reshape(x, s), tf.TensorSpec((2, 3), tf.float32, name="x"),
                      tf.TensorSpec((2,), tf.int32, name="s"))
    imported = import_tf(graph, input_values={"s": np.array([3, 2], np.int32)})
    assert [v.name for v in imported.inputs] == ["x"]
    assert imported.outputs[0].shape == (3, 2)


def test_a_declared_output_dtype_must_match():
    nodes = [_placeholder("x"), TFNode("y", "Relu", [TensorRef("x")])]
    graph = TFGraph({n.name: n for n in nodes}, [TFTensor("x", TensorRef("x"), np.dtype(np.float32), (2, 3))],
                    [TFTensor("y", TensorRef("y"), np.dtype(np.int32), (2, 3))], "graphdef", "model.pb")
    with pytest.raises(ModelFormatError, match="output 'y' is declared int32"):
        import_tf(graph)


def test_a_placeholder_that_is_not_an_input_is_unsupported():
    nodes = [_placeholder("x"), _placeholder("other"), TFNode("y", "AddV2", [TensorRef("x"), TensorRef("other")])]
    with pytest.raises(UnsupportedModelError) as info:
        import_tf(_graph(nodes, ["y"], {"x": (2, 3)}))
    assert [i.node for i in info.value.items] == ["other"]


def test_a_keras_3_block_matches_tensorflow():
    """What Keras 3 emits for Conv/BatchNorm/swish/depthwise/LayerNorm/gelu/pool/Dense: the
    decomposed BatchNorm and LayerNorm arithmetic, Erfc, IdentityN of the swish gradient."""
    import keras

    inp = keras.Input((12, 12, 3), batch_size=1)
    y = keras.layers.Conv2D(8, 3, padding="same")(inp)
    y = keras.layers.BatchNormalization(moving_variance_initializer="ones", beta_initializer="random_normal")(y)
    y = keras.layers.Activation("swish")(y)
    y = keras.layers.DepthwiseConv2D(3, strides=2, padding="same")(y)
    y = keras.layers.LayerNormalization()(y)
    y = keras.layers.Activation("gelu")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    y = keras.layers.Dense(5, activation="softmax")(y)
    model = keras.Model(inp, y)
    x = np.random.default_rng(1).standard_normal((1, 12, 12, 3)).astype(np.float32)
    check_against_tf(lambda t: model(t, training=False), x, op="Rsqrt")
