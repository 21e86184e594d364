"""A TF1-style network (graph mode, placeholders, variables, FusedBatchNormV3 in inference
mode, max pool, a MatMul head), frozen to a .pb and saved as a TF1 SavedModel, against a
tf.compat.v1.Session running the same graph.

TF1 graphs differ from what Keras 3 emits: batch norm is one FusedBatchNormV3 node rather
than decomposed arithmetic, the head is a plain MatMul + BiasAdd on a Reshape with -1,
the SavedModel's variables are either old reference variables (VariableV2, read through
Identity) or resource variables without an object graph, keyed in the checkpoint by
their graph names."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import hobbit  # noqa: E402
from tests.frontend.tf.models import smooth_images  # noqa: E402

SIZE = 16
CHANNELS = (3, 8, 16)
CLASSES = 10
BATCH = 2


def _network(use_resource: bool) -> tf.compat.v1.Graph:
    """conv -> FusedBatchNormV3 -> relu -> max pool -> strided conv + bias -> relu6 ->
    reshape -> matmul + bias -> softmax, as TF1 code wrote it. The batch norm statistics
    are set so its output is near unit scale on smooth images."""
    rng = np.random.default_rng(3)
    graph = tf.compat.v1.Graph()
    with graph.as_default():
        image = tf.compat.v1.placeholder(tf.float32, (None, SIZE, SIZE, CHANNELS[0]), name="image")

        def variable(name: str, value: np.ndarray) -> tf.Variable:
            return tf.compat.v1.get_variable(name, initializer=value.astype(np.float32), use_resource=use_resource)

        kernel = variable("conv1/kernel", rng.normal(0, np.sqrt(2 / 27), (3, 3, CHANNELS[0], CHANNELS[1])))
        x = tf.compat.v1.nn.conv2d(image, kernel, strides=[1, 1, 1, 1], padding="SAME")
        norm = [variable(f"bn1/{name}", value) for name, value in
                [("gamma", rng.uniform(0.8, 1.2, CHANNELS[1])), ("beta", rng.normal(0, 0.2, CHANNELS[1])),
                 ("moving_mean", rng.normal(0, 0.3, CHANNELS[1])),
                 ("moving_variance", rng.uniform(1.0, 2.0, CHANNELS[1]))]]
        x, _, _ = tf.compat.v1.nn.fused_batch_norm(x, *norm[:2], mean=norm[2], variance=norm[3], epsilon=1e-3,
                                                   is_training=False)
        x = tf.nn.relu(x)
        x = tf.compat.v1.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        kernel2 = variable("conv2/kernel", rng.normal(0, np.sqrt(2 / 72), (3, 3, CHANNELS[1], CHANNELS[2])))
        x = tf.compat.v1.nn.conv2d(x, kernel2, strides=[1, 2, 2, 1], padding="SAME")
        x = tf.nn.relu6(tf.nn.bias_add(x, variable("conv2/bias", rng.normal(0, 0.1, CHANNELS[2]))))
        features = (SIZE // 4) ** 2 * CHANNELS[2]
        x = tf.reshape(x, [-1, features])
        weights = variable("fc/kernel", rng.normal(0, np.sqrt(2 / features), (features, CLASSES)))
        logits = tf.nn.bias_add(tf.matmul(x, weights), variable("fc/bias", rng.normal(0, 0.1, CLASSES)))
        tf.nn.softmax(logits, name="output")
    return graph


def _images() -> np.ndarray:
    return smooth_images(BATCH, SIZE, seed=5)


@pytest.fixture(scope="module", params=[False, True], ids=["ref-variables", "resource-variables"])
def tf1_model(request, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The network's frozen .pb, its TF1 SavedModel and the session's output on the images."""
    directory = tmp_path_factory.mktemp("tf1")
    graph = _network(use_resource=request.param)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        expected = session.run("output:0", {"image:0": _images()})
        frozen = tf.compat.v1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), ["output"])
        saved_model = directory / "saved_model"
        tf.compat.v1.saved_model.simple_save(session, str(saved_model), inputs={"image": graph.get_tensor_by_name(
            "image:0")}, outputs={"probabilities": graph.get_tensor_by_name("output:0")})
    pb = directory / "frozen.pb"
    pb.write_bytes(frozen.SerializeToString())
    ops = {node.op for node in frozen.node}
    return {"pb": pb, "saved_model": saved_model, "expected": expected, "ops": ops,
            "graph_ops": {node.op for node in graph.as_graph_def().node},
            "variable_op": "VarHandleOp" if request.param else "VariableV2"}


def _check(got: list[np.ndarray], expected: np.ndarray) -> None:
    assert len(got) == 1 and got[0].shape == expected.shape and got[0].dtype == np.float32
    assert float(expected.std()) > 0.05, f"the reference is degenerate: {expected}"
    np.testing.assert_allclose(got[0], expected, rtol=1e-3, atol=1e-4 * float(np.max(np.abs(expected))))


def test_graph_is_tf1_style(tf1_model):
    """The test means what it says: TensorFlow wrote the ops this test is about."""
    assert {"FusedBatchNormV3", "Conv2D", "MaxPool", "MatMul", "BiasAdd", "Relu6", "Reshape"} <= tf1_model["ops"]
    assert tf1_model["variable_op"] in tf1_model["graph_ops"]


def test_frozen_graph(tf1_model):
    model = hobbit.compile(tf1_model["pb"])
    assert [spec.name for spec in model.inputs] == ["image"]
    assert model.output_names == ["output"]
    _check(model.run({"image": _images()}), tf1_model["expected"])


def test_saved_model(tf1_model):
    model = hobbit.compile(tf1_model["saved_model"])
    assert [spec.name for spec in model.inputs] == ["image"]
    assert model.output_names == ["probabilities"]
    _check(model.run({"image": _images()}), tf1_model["expected"])
