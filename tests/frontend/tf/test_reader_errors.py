"""Bad TensorFlow input: each case is a specific hobbit error naming the file, node or
function at fault, never a raw exception from inside the reader; an unknown dtype is
not an error at read time."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import shutil

import numpy as np
import pytest
import tensorflow as tf

import hobbit
from hobbit.errors import CorruptModelError, GraphStructureError, SignatureError, UnsupportedModelError
from hobbit.frontend.tf.graph import TFDType
from hobbit.frontend.tf.graphdef import read_graphdef
from hobbit.frontend.tf.protos import SavedModel
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


def _chain(last_input: str, placeholder_dims: tuple[int, ...] = (2,)) -> tf.compat.v1.GraphDef:
    """x -> a = Relu(x) -> out = Relu(`last_input`)."""
    graph = tf.compat.v1.GraphDef()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = tf.float32.as_datatype_enum
    for size in placeholder_dims:
        x.attr["shape"].shape.dim.add(size=size)
    for name, source in (("a", "x"), ("out", last_input)):
        graph.node.add(name=name, op="Relu", input=[source]).attr["T"].type = tf.float32.as_datatype_enum
    return graph


def test_a_self_cycle_is_an_error_not_a_silently_dropped_output(tmp_path):
    """`out = Relu(out)` is read by itself, so it was no default output and the model answered
    with 'a' instead."""
    path = tmp_path / "cycle.pb"
    path.write_bytes(_chain("out").SerializeToString())
    with pytest.raises(GraphStructureError, match=r"cycle\.pb: the graph has a cycle through node 'out': "
                                                  r"'out' \(Relu\) -> 'out' \(Relu\)"):
        hobbit.compile(str(path), cache=False)


def test_a_longer_cycle_names_its_nodes_in_data_order():
    graph = _chain("b")
    graph.node.add(name="b", op="AddV2", input=["a", "out"]).attr["T"].type = tf.float32.as_datatype_enum
    with pytest.raises(GraphStructureError, match=r"cycle through node '(b|out)': .*'b' \(AddV2\) -> 'out' \(Relu\)"):
        read_graphdef(graph.SerializeToString(), ["a"])


def test_a_tf1_while_loop_is_reported_as_unsupported():
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.disable_control_flow_v2()
        try:
            x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
            _, y = tf.compat.v1.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x])
            tf.identity(y, name="out")
        finally:
            tf.compat.v1.enable_control_flow_v2()
    with pytest.raises(UnsupportedModelError, match=r"NextIteration .*a TF1 while loop \('while/Merge"):
        read_graphdef(graph.as_graph_def().SerializeToString(), ["out"])


def test_a_placeholder_dim_below_minus_one_is_refused(tmp_path):
    """Only -1 means an unknown size; -7 was taken as one more symbolic dim."""
    path = tmp_path / "dims.pb"
    path.write_bytes(_chain("a", (2, -7)).SerializeToString())
    with pytest.raises(CorruptModelError, match=r"node 'x'.*the shape \[2, -7\] has the dim -7; a dim is a size "
                                                r">= 0, or -1 for an unknown size"):
        hobbit.compile(str(path), cache=False)


def test_a_signature_dim_below_minus_one_is_refused(copy):
    saved = SavedModel.FromString((copy / "saved_model.pb").read_bytes())
    signature = saved.meta_graphs[0].signature_def["serving_default"]
    signature.inputs["x"].tensor_shape.dim[0].size = -3
    (copy / "saved_model.pb").write_bytes(saved.SerializeToString())
    with pytest.raises(CorruptModelError, match=r"tensor 'x' of signature 'serving_default': the shape \[-3, 3\]"):
        read_saved_model(copy)
