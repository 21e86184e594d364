"""Bad TensorFlow input: each case is a specific hobbit error naming the file, node or
function at fault, never a raw exception from inside the reader; an unknown dtype is
not an error at read time."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import shutil

import numpy as np
import pytest
import tensorflow as tf

from hobbit.errors import CorruptModelError, GraphStructureError, SignatureError, UnsupportedModelError
from hobbit.frontend.tf.graph import TFDType
from hobbit.frontend.tf.graphdef import read_graphdef
from hobbit.frontend.tf.savedmodel import read_saved_model


class _Small(tf.Module):
    def __init__(self):
        self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.matmul(x, self.w)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "saved"
    tf.saved_model.save(_Small(), str(path))
    return path


@pytest.fixture
def copy(saved, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(saved, target)
    return target


@pytest.fixture(scope="module")
def graph_def():
    """An unfrozen graph calling a nested tf.function (a PartitionedCall and a library)."""

    @tf.function
    def inner(x):
        return tf.nn.relu(x) + 1.0

    concrete = tf.function(lambda x: tf.identity(inner(x))).get_concrete_function(tf.TensorSpec([2], tf.float32, name="x"))
    return concrete.graph.as_graph_def()


def test_truncated_graphdef(graph_def, tmp_path):
    path = tmp_path / "model.pb"
    data = graph_def.SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptModelError, match=rf"{path}.*GraphDef"):
        read_graphdef(path)


def test_garbage_graphdef(tmp_path):
    path = tmp_path / "garbage.pb"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    with pytest.raises(CorruptModelError, match=rf"{path}.*GraphDef"):
        read_graphdef(path)


def test_missing_graphdef_file(tmp_path):
    with pytest.raises(CorruptModelError, match="nothing.pb"):
        read_graphdef(tmp_path / "nothing.pb")


def test_dangling_input_names_the_node(graph_def):
    broken = tf.compat.v1.GraphDef()
    broken.CopyFrom(graph_def)
    node = next(n for n in broken.node if n.op == "Identity")
    node.input[0] = "no_such_node:0"
    with pytest.raises(GraphStructureError, match=rf"node '{node.name}' has input 'no_such_node:0'"):
        read_graphdef(broken.SerializeToString())


def test_call_of_a_missing_function(graph_def):
    broken = tf.compat.v1.GraphDef()
    broken.CopyFrom(graph_def)
    call = next(n for n in broken.node if n.op in ("PartitionedCall", "StatefulPartitionedCall"))
    del broken.library.function[:]
    with pytest.raises(GraphStructureError, match=rf"'{call.name}'.*calls function '{call.attr['f'].func.name}'"):
        read_graphdef(broken.SerializeToString())


def test_unknown_dtype_is_read_as_tfdtype(graph_def):
    changed = tf.compat.v1.GraphDef()
    changed.CopyFrom(graph_def)
    placeholder = next(n for n in changed.node if n.op == "Placeholder")
    placeholder.attr["dtype"].type = 99
    graph = read_graphdef(changed.SerializeToString())
    assert graph.inputs[0].dtype == TFDType(99, "DT_UNKNOWN_99")
    assert graph.nodes[placeholder.name].attrs["dtype"] == TFDType(99, "DT_UNKNOWN_99")


def test_saved_model_pb_that_is_not_a_saved_model(copy, graph_def):
    (copy / "saved_model.pb").write_bytes(graph_def.SerializeToString())
    with pytest.raises(CorruptModelError, match=r"saved_model.pb.*not a TensorFlow SavedModel"):
        read_saved_model(copy)


def test_truncated_saved_model_pb(copy):
    data = (copy / "saved_model.pb").read_bytes()
    (copy / "saved_model.pb").write_bytes(data[: len(data) - 100])
    with pytest.raises(CorruptModelError, match=r"saved_model.pb.*SavedModel"):
        read_saved_model(copy)


def test_saved_model_without_variables(copy):
    shutil.rmtree(copy / "variables")
    with pytest.raises(CorruptModelError, match=rf"{copy}.*variables"):
        read_saved_model(copy)


def test_not_a_directory(tmp_path):
    with pytest.raises(CorruptModelError, match="not a SavedModel directory"):
        read_saved_model(tmp_path / "absent")


def test_truncated_variables_data(copy):
    (data_file,) = (copy / "variables").glob("variables.data-*")
    data_file.write_bytes(data_file.read_bytes()[:10])
    with pytest.raises(CorruptModelError, match=rf"{data_file.name}.*truncated"):
        read_saved_model(copy)


def test_missing_variables_data(copy):
    (data_file,) = (copy / "variables").glob("variables.data-*")
    data_file.unlink()
    with pytest.raises(CorruptModelError, match=rf"{data_file.name}: missing"):
        read_saved_model(copy)


@pytest.mark.parametrize("keep", [0, 30, -20, -1])
def test_truncated_variables_index(copy, keep):
    index = copy / "variables" / "variables.index"
    data = index.read_bytes()
    index.write_bytes(data[:keep])
    with pytest.raises(CorruptModelError, match="variables.index"):
        read_saved_model(copy)


def test_missing_signature_lists_those_available(saved):
    with pytest.raises(SignatureError, match=r"no signature 'predict'.*serving_default"):
        read_saved_model(saved, signature="predict")


def test_missing_tags_list_those_available(saved):
    with pytest.raises(SignatureError, match=r"no MetaGraph tagged \['train'\].*\['serve'\]"):
        read_saved_model(saved, tags=("train",))


def _graph_calling(body_op: str, body_inputs: list[str], ret: str) -> bytes:
    """A GraphDef whose node 'call' calls library function 'fn' (x -> y), the body being
    one node 'inner' of op `body_op`."""
    graph = tf.compat.v1.GraphDef()
    function = graph.library.function.add()
    function.signature.name = "fn"
    function.signature.input_arg.add(name="x", type=tf.float32.as_datatype_enum)
    function.signature.output_arg.add(name="y", type=tf.float32.as_datatype_enum)
    function.node_def.add(name="inner", op=body_op, input=body_inputs)
    function.ret["y"] = ret
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = tf.float32.as_datatype_enum
    graph.node.add(name="call", op="fn", input=["x"])
    return graph.SerializeToString()


def test_recursive_function_is_named():
    with pytest.raises(GraphStructureError, match=r"calls function 'fn' recursively"):
        read_graphdef(_graph_calling("fn", ["x"], "inner:y:0"))


def test_body_reference_to_nothing_names_the_function():
    with pytest.raises(GraphStructureError, match=r"function 'fn'.*node 'inner' refers to 'missing'"):
        read_graphdef(_graph_calling("Relu", ["missing"], "inner:activations:0"))


def test_outputs_of_an_unknown_multi_output_op_are_not_guessed():
    graph = tf.compat.v1.GraphDef.FromString(_graph_calling("Mystery", ["x"], "inner:first:0"))
    graph.library.function[0].node_def.add(name="second", op="AddV2", input=["inner:first:0", "inner:other:0"])
    graph.library.function[0].ret["y"] = "second:z:0"
    with pytest.raises(UnsupportedModelError, match=r"(?s)Mystery.*'call/inner'.*outputs 'first' and 'other'"):
        read_graphdef(graph.SerializeToString())
