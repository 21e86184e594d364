"""hobbit's SavedModel reader against the models TensorFlow and Keras 3 write: the
signature as TensorFlow loads it, every variable's value exactly, a flat graph (no calls,
no variable ops), and outputs computed from the read graph equal TensorFlow's: by a small
numpy evaluator for a tf.Module whose nested functions use multi-output ops (so output
numbering inside function bodies is checked), and by hobbit's compiler for a Keras model
and a TF1-style SavedModel."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import tensorflow as tf

from hobbit.frontend.tf.convert import import_tf
from hobbit.frontend.tf.savedmodel import read_saved_model
from tests.frontend.tf.conftest import assert_close, compile_graph

RNG = np.random.default_rng(2)
FLAT_OPS_ONLY = {"PartitionedCall", "StatefulPartitionedCall", "ReadVariableOp", "VarHandleOp", "VariableV2"}


class _Multi(tf.Module):
    def __init__(self):
        self.w = tf.Variable(RNG.standard_normal((4, 6)).astype(np.float32))
        self.b = tf.Variable(RNG.standard_normal(6).astype(np.float32))
        self.bn = [tf.Variable(RNG.uniform(0.5, 1.5, 2).astype(np.float32)) for _ in range(4)]

    @tf.function
    def inner(self, h):
        a, b, c = tf.split(h, 3, axis=1)
        first, second = tf.unstack(tf.reshape(c, [-1, 2, 1]), axis=1)
        return a * second + b, first

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def __call__(self, x):
        h = tf.nn.relu(tf.matmul(x, self.w) + self.b)
        p, q = self.inner(h)
        top = tf.math.top_k(h, k=2)
        scale, offset, mean, variance = self.bn
        y, batch_mean, _ = tf.compat.v1.nn.fused_batch_norm(
            tf.reshape(p, [-1, 1, 1, 2]), scale, offset, mean, variance, epsilon=1e-3, is_training=False
        )
        i, j = tf.identity_n([q, top.indices])
        return {"p": p, "q": i, "top_values": top.values, "top_indices": j, "bn": y, "bn_mean": batch_mean}

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="v")])
    def double(self, v):
        return {"doubled": v * 2.0 + self.b[:2]}


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    module = _Multi()
    path = str(tmp_path_factory.mktemp("multi") / "saved")
    tf.saved_model.save(module, path, signatures={"serving_default": module.__call__, "double": module.double})
    return path, module


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Flatten()(h)
    model = keras.Model(inputs, keras.layers.Dense(5)(h))
    bn = model.layers[2]
    bn.set_weights([RNG.uniform(0.5, 1.5, 4).astype(np.float32) for _ in range(4)])
    path = str(tmp_path_factory.mktemp("keras") / "exported")
    model.export(path, verbose=False)
    return path, model


def _evaluate(graph, feeds):
    """The outputs of a TFGraph of the few ops the test modules use, in numpy."""
    values = {}

    def value(ref):
        if ref.node not in values:
            values[ref.node] = _run(graph.nodes[ref.node], [value(i) for i in graph.nodes[ref.node].inputs], feeds)
        return values[ref.node][ref.index]

    return {tensor.name: value(tensor.ref) for tensor in graph.outputs}


def _run(node, args, feeds):
    op, attrs = node.op, node.attrs
    if op == "Placeholder":
        return [feeds[node.name]]
    if op == "Const":
        return [attrs["value"]]
    if op in ("Identity", "IdentityN"):
        return list(args)
    if op == "MatMul":
        return [args[0] @ args[1]]
    if op in ("AddV2", "Add", "BiasAdd"):
        return [args[0] + args[1]]
    if op == "Mul":
        return [args[0] * args[1]]
    if op == "Relu":
        return [np.maximum(args[0], 0)]
    if op == "Reshape":
        return [args[0].reshape(args[1])]
    if op == "Split":
        return np.split(args[1], attrs["num_split"], axis=int(args[0]))
    if op == "Unpack":
        return [np.take(args[0], k, axis=attrs["axis"]) for k in range(attrs["num"])]
    if op == "TopKV2":
        order = np.argsort(-args[0], axis=-1, kind="stable")[..., : int(args[1])]
        return [np.take_along_axis(args[0], order, -1), order.astype(np.int32)]
    if op == "FusedBatchNormV3":
        x, scale, offset, mean, variance = args
        y = (x - mean) / np.sqrt(variance + np.float32(attrs["epsilon"])) * scale + offset
        return [y.astype(np.float32), mean, variance]
    raise AssertionError(f"the test evaluator has no {op}")


def _signature_reference(path, name):
    signature = tf.saved_model.load(path).signatures[name]
    _, inputs = signature.structured_input_signature
    return (
        [(key, spec.dtype.as_numpy_dtype, tuple(spec.shape.as_list())) for key, spec in sorted(inputs.items())],
        [(key, spec.dtype.as_numpy_dtype, tuple(spec.shape.as_list())) for key, spec in sorted(signature.structured_outputs.items())],
    )


def _declared(graph):
    return (
        [(t.name, t.dtype.type, t.shape) for t in graph.inputs],
        [(t.name, t.dtype.type, t.shape) for t in graph.outputs],
    )


@pytest.mark.parametrize("signature", ["serving_default", "double"])
def test_signature_matches_tensorflows(multi, signature):
    path, _ = multi
    graph = read_saved_model(path, signature=signature)
    assert graph.format == "savedmodel"
    assert _declared(graph) == _signature_reference(path, signature)


def test_graph_is_flat(multi, keras_model):
    for path in (multi[0], keras_model[0]):
        graph = read_saved_model(path)
        assert not FLAT_OPS_ONLY & {node.op for node in graph.nodes.values()}
        for node in graph.nodes.values():
            assert all(ref.node in graph.nodes for ref in node.inputs), node.name


def test_multi_output_ops_inside_functions_compute_tensorflows_outputs(multi):
    path, module = multi
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = _evaluate(read_saved_model(path), {"serving_default_x": x})
    want = module(tf.constant(x))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name].numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(got["bn_mean"], module.bn[2].numpy())


def test_second_signature_computes_tensorflows_output(multi):
    path, module = multi
    graph = read_saved_model(path, signature="double")
    v = np.array([1.5, -2.0], np.float32)
    (got,) = compile_graph(import_tf(graph)).run({"v": v})
    assert_close(got, module.double(tf.constant(v))["doubled"].numpy())


def _variable_constants(graph):
    return [node.attrs["value"] for node in graph.nodes.values() if node.op == "Const" and node.attrs["value"].size > 1]


def test_every_variable_value_is_exact(multi, keras_model):
    for path, variables in ((multi[0], multi[1].variables), (keras_model[0], keras_model[1].variables)):
        constants = _variable_constants(read_saved_model(path))
        for variable in variables:
            value = np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)
            matches = [c for c in constants if c.shape == value.shape and c.dtype == value.dtype and np.array_equal(c, value)]
            assert len(matches) == 1, (path, variable.name)


def test_keras_export_compiles_to_keras_outputs(keras_model):
    path, model = keras_model
    graph = read_saved_model(path)
    assert _declared(graph) == _signature_reference(path, "serving_default")
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    (got,) = compile_graph(import_tf(graph, input_shapes={graph.inputs[0].name: (2, 8, 8, 3)})).run({graph.inputs[0].name: x})
    assert_close(got, np.asarray(model(x)), rtol=1e-4)


@pytest.fixture(scope="module")
def tf1_model(tmp_path_factory):
    """A TF1-style SavedModel: VariableV2 nodes, keys named after them, no functions."""
    path = str(tmp_path_factory.mktemp("tf1") / "saved")
    w = RNG.standard_normal((3, 2)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        weights = tf.compat.v1.Variable(w, name="weights", use_resource=False)
        bias = tf.compat.v1.Variable(b, name="bias", use_resource=False)
        y = tf.nn.relu(tf.matmul(x, weights) + bias, name="y")
        session.run(tf.compat.v1.global_variables_initializer())
        builder = tf.compat.v1.saved_model.Builder(path)
        signature = tf.compat.v1.saved_model.predict_signature_def({"features": x}, {"scores": y})
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={"serving_default": signature})
        builder.save()
    return path, w, b


def test_tf1_saved_model(tf1_model):
    path, w, b = tf1_model
    graph = read_saved_model(path)
    assert [t.name for t in graph.inputs] == ["features"] and [t.name for t in graph.outputs] == ["scores"]
    assert "VariableV2" not in {node.op for node in graph.nodes.values()}
    np.testing.assert_array_equal(graph.nodes["weights"].attrs["value"], w)
    np.testing.assert_array_equal(graph.nodes["bias"].attrs["value"], b)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    (got,) = compile_graph(import_tf(graph, input_shapes={"features": (4, 3)})).run({"features": x})
    assert_close(got, np.maximum(x @ w + b, 0))
