"""hobbit's GraphDef reader against TensorFlow's own parse of the same bytes: node set,
ops, data inputs and every attribute (decoded by TensorFlow's dtype, shape and tensor
helpers), on a frozen graph that carries every attribute kind; function inlining on an
unfrozen graph; and one end-to-end compile compared with TensorFlow's outputs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from hobbit.frontend.tf.convert import import_tf
from hobbit.frontend.tf.graph import TensorRef, TFDType
from hobbit.frontend.tf.graphdef import read_graphdef
from tests.frontend.tf.conftest import assert_close, compile_graph

RNG = np.random.default_rng(1)


class _Net(tf.Module):
    def __init__(self):
        self.kernel = tf.Variable(RNG.standard_normal((3, 3, 2, 4)).astype(np.float32))
        self.stats = [tf.Variable(RNG.uniform(0.5, 1.5, 4).astype(np.float32)) for _ in range(4)]
        self.dense = tf.Variable(RNG.standard_normal((36, 3)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 2], tf.float32, name="image")])
    def __call__(self, image):
        y = tf.nn.conv2d(image, self.kernel, strides=[1, 2, 2, 1], padding="SAME")
        scale, offset, mean, variance = self.stats
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(y, scale, offset, mean, variance, epsilon=1e-3, is_training=False)
        a, b = tf.split(y, 2, axis=3)
        y = tf.concat([b, a], axis=-1) * tf.constant(0.5, shape=[4])
        y = y + tf.cast(tf.constant(np.array([1, 2, 3, 4], np.float16)), tf.float32)
        y = y - tf.cast(tf.constant(np.array([0.5, 1, 2, 4], ml_dtypes.bfloat16)), tf.float32)
        logits = tf.matmul(tf.reshape(y, [1, 36]), self.dense)
        top = tf.math.top_k(logits, k=2)
        mask = tf.cast(tf.constant([True, False, True]), tf.float32)
        first, second = tf.identity_n([logits * mask, top.indices])
        return {"logits": first, "top": second, "count": tf.constant([7, 8], tf.int64)}


@pytest.fixture(scope="module")
def frozen():
    net = _Net()
    function = net.__call__.get_concrete_function()
    concrete = convert_variables_to_constants_v2(function)
    return concrete.graph.as_graph_def().SerializeToString(), concrete


def _reference_value(value):
    """An AttrValue decoded with TensorFlow's own dtype, shape and tensor helpers."""
    kind = value.WhichOneof("value")
    if kind == "list":
        for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
            items = getattr(value.list, field)
            if len(items):
                return [_reference_scalar(field, item) for item in items]
        return []
    return _reference_scalar(kind, getattr(value, kind))


def _reference_scalar(kind, item):
    if kind == "s":
        return item.decode()
    if kind == "type":
        return np.dtype(tf.dtypes.as_dtype(item).as_numpy_dtype)
    if kind == "shape":
        shape = tf.TensorShape(item)
        return None if shape.rank is None else tuple(shape.as_list())
    if kind == "tensor":
        return tf.make_ndarray(item)
    if kind == "func":
        return item.name
    return item


def _assert_same(ours, want, where):
    if isinstance(want, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == want.dtype and ours.shape == want.shape, where
        np.testing.assert_array_equal(ours, want, err_msg=where)
    elif isinstance(want, list):
        assert isinstance(ours, list) and len(ours) == len(want), where
        for o, w in zip(ours, want):
            _assert_same(o, w, where)
    else:
        assert type(ours) is type(want) and ours == want, (where, ours, want)


def test_nodes_and_attrs_equal_tensorflows_parse(frozen):
    data = frozen[0]
    reference = tf.compat.v1.GraphDef.FromString(data)
    graph = read_graphdef(data)
    assert set(graph.nodes) == {node.name for node in reference.node if node.op != "NoOp"}
    kinds = set()
    for node in (node for node in reference.node if node.op != "NoOp"):
        ours = graph.nodes[node.name]
        assert ours.op == node.op
        data_inputs = [name for name in node.input if not name.startswith("^")]
        assert [str(ref) for ref in ours.inputs] == [name if ":" in name else f"{name}:0" for name in data_inputs]
        assert set(ours.attrs) == set(node.attr), node.name
        for key, value in node.attr.items():
            kinds.add(value.WhichOneof("value"))
            _assert_same(ours.attrs[key], _reference_value(value), f"{node.name}.{key}")
    assert {"s", "i", "f", "b", "type", "shape", "tensor", "list"} <= kinds


def test_half_bfloat16_and_splat_constants(frozen):
    data = frozen[0]
    values = [node.attrs["value"] for node in read_graphdef(data).nodes.values() if node.op == "Const"]
    dtypes = {value.dtype for value in values}
    assert {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int64), np.dtype(np.bool_)} <= dtypes
    assert any(value.shape == (4,) and np.all(value == np.float32(0.5)) for value in values)


def test_inputs_and_default_outputs(frozen):
    data, concrete = frozen
    graph = read_graphdef(data)
    assert [(t.name, t.dtype, t.shape) for t in graph.inputs] == [("image", np.dtype(np.float32), (1, 6, 6, 2))]
    assert sorted(str(t.ref) for t in graph.outputs) == sorted(t.name for t in concrete.outputs)


def test_named_outputs_prune_the_graph(frozen, tmp_path):
    data = frozen[0]
    path = tmp_path / "model.pb"
    path.write_bytes(data)
    reference = {node.name: node for node in tf.compat.v1.GraphDef.FromString(data).node}
    top = next(name for name, node in reference.items() if node.op == "TopKV2")
    graph = read_graphdef(path, outputs=[f"{top}:1"])
    assert graph.source == str(path)
    assert [(t.name, t.ref) for t in graph.outputs] == [(f"{top}:1", TensorRef(top, 1))]
    assert "Const" not in {graph.nodes[name].op for name in graph.nodes if "count" in name.lower()}
    ops = {node.op for node in graph.nodes.values()}
    assert "IdentityN" not in ops and "TopKV2" in ops and "Conv2D" in ops


def test_unknown_dtype_is_a_tfdtype(frozen):
    data = frozen[0]
    graph_def = tf.compat.v1.GraphDef.FromString(data)
    node = next(n for n in graph_def.node if n.op == "Cast")
    node.attr["DstT"].type = 77
    graph = read_graphdef(graph_def.SerializeToString())
    assert graph.nodes[node.name].attrs["DstT"] == TFDType(77, "DT_UNKNOWN_77")


@pytest.fixture(scope="module")
def with_calls():
    """An unfrozen graph whose body calls two nested tf.functions (PartitionedCall nodes
    and a function library), one of them twice."""

    @tf.function
    def inner(x):
        return tf.nn.relu(x) * 2.0, x - 1.0

    @tf.function
    def middle(x):
        a, b = inner(x)
        return tf.matmul(a, tf.transpose(b)) + inner(b)[0][:, :1]

    concrete = tf.function(lambda x: tf.identity(middle(x))).get_concrete_function(tf.TensorSpec([2, 3], tf.float32, name="x"))
    return concrete.graph.as_graph_def().SerializeToString(), concrete


def test_calls_are_inlined(with_calls):
    data, concrete = with_calls
    graph_def = tf.compat.v1.GraphDef.FromString(data)
    assert {"PartitionedCall", "StatefulPartitionedCall"} & {node.op for node in graph_def.node}
    graph = read_graphdef(data, outputs=[concrete.outputs[0].name])
    assert not {"PartitionedCall", "StatefulPartitionedCall"} & {node.op for node in graph.nodes.values()}
    assert sum(node.op == "Relu" for node in graph.nodes.values()) == 2
    for node in graph.nodes.values():
        assert all(ref.node in graph.nodes for ref in node.inputs), node.name


def test_inlined_graph_compiles_to_tensorflows_result(with_calls):
    data, concrete = with_calls
    graph = read_graphdef(data, outputs=[concrete.outputs[0].name])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    (got,) = compile_graph(import_tf(graph)).run({"x": x})
    assert_close(got, concrete(tf.constant(x)).numpy())


def test_frozen_graph_compiles_to_tensorflows_result(frozen):
    """The masked logits (IdentityN's first input: hobbit has no TopKV2 converter) of the
    frozen graph, compiled, against TensorFlow running the same GraphDef."""
    data = frozen[0]
    graph_def = tf.compat.v1.GraphDef.FromString(data)
    masked = next(node.input[0] for node in graph_def.node if node.op == "IdentityN")
    imported = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    reference = imported.prune(feeds="image:0", fetches=masked if ":" in masked else f"{masked}:0")
    graph = read_graphdef(data, outputs=[masked])
    image = RNG.standard_normal((1, 6, 6, 2)).astype(np.float32)
    (got,) = compile_graph(import_tf(graph)).run({"image": image})
    assert_close(got, reference(tf.constant(image)).numpy(), rtol=1e-4)
