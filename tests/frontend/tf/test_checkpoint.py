"""hobbit's tensor-bundle reader against TensorFlow's own checkpoint reader and the
variables' values, over every dtype a variable can have and an index large enough to
span several table blocks."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from hobbit.errors import CorruptModelError
from hobbit.frontend.tf.checkpoint import read_checkpoint

RNG = np.random.default_rng(0)

VALUES = {
    "f32": RNG.standard_normal((3, 5)).astype(np.float32),
    "f64": RNG.standard_normal((7,)),
    "f16": RNG.standard_normal((2, 2)).astype(np.float16),
    "bf16": RNG.standard_normal((4,)).astype(ml_dtypes.bfloat16),
    "i8": np.array([-128, 0, 127], np.int8),
    "i16": np.array([-300, 2, 30000], np.int16),
    "i32": np.arange(-5, 5, dtype=np.int32).reshape(2, 5),
    "i64": np.array([2**40, -(2**50)], np.int64),
    "u8": np.array([0, 200, 255], np.uint8),
    "u16": np.array([0, 60000], np.uint16),
    "boolean": np.array([[True, False], [False, True]]),
    "scalar": np.float32(3.5),
    "empty": np.zeros((0, 4), np.float32),
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A checkpoint of VALUES plus 300 long-named variables (so the index has several
    data blocks), written by tf.train.Checkpoint."""
    variables = {name: tf.Variable(value) for name, value in VALUES.items()}
    many = [tf.Variable(np.full((2,), i, np.float32)) for i in range(300)]
    checkpoint = tf.train.Checkpoint(many_variables_with_a_rather_long_common_prefix=many, **variables)
    prefix = checkpoint.write(str(tmp_path_factory.mktemp("ckpt") / "ckpt"))
    return prefix, variables, many


def test_every_entry_equals_tensorflows_reader(bundle):
    prefix, _, _ = bundle
    ours = read_checkpoint(prefix)
    reference = tf.train.load_checkpoint(prefix)
    expected = reference.get_variable_to_dtype_map()
    assert set(ours.keys()) == set(expected)
    for key in expected:
        value, want = ours.tensor(key), reference.get_tensor(key)
        if expected[key] == tf.string:
            assert value.shape == np.shape(want) and value.reshape(-1).tolist() == np.reshape(want, -1).tolist(), key
        else:
            assert value.dtype == want.dtype and value.shape == want.shape, key
            np.testing.assert_array_equal(value, want, err_msg=key)


def test_values_equal_the_variables(bundle):
    prefix, variables, many = bundle
    ours = read_checkpoint(prefix)
    for name, variable in variables.items():
        value = ours.tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE")
        assert value.dtype == variable.numpy().dtype, name
        np.testing.assert_array_equal(value, variable.numpy(), err_msg=name)
    for i, variable in enumerate(many):
        np.testing.assert_array_equal(
            ours.tensor(f"many_variables_with_a_rather_long_common_prefix/{i}/.ATTRIBUTES/VARIABLE_VALUE"), variable.numpy()
        )


def test_index_spans_several_blocks(bundle):
    """The index block must list more than one data block, else the restart arrays and
    the block chaining went untested."""
    prefix, _, _ = bundle
    assert os.path.getsize(prefix + ".index") > 3 * 4096


def test_object_graph_names_every_variable(bundle):
    prefix, variables, _ = bundle
    graph = read_checkpoint(prefix).object_graph()
    root_children = {child.local_name for child in graph.nodes[0].children}
    assert set(variables) <= root_children
    keys = {attribute.checkpoint_key for node in graph.nodes for attribute in node.attributes}
    assert {f"{name}/.ATTRIBUTES/VARIABLE_VALUE" for name in variables} <= keys


def test_tensors_are_views_on_the_shard(bundle):
    prefix, _, _ = bundle
    value = read_checkpoint(prefix).tensor("f32/.ATTRIBUTES/VARIABLE_VALUE")
    assert not value.flags.owndata and not value.flags.writeable


def test_missing_key_is_named(bundle):
    prefix, _, _ = bundle
    with pytest.raises(CorruptModelError, match="no checkpoint entry 'nope'"):
        read_checkpoint(prefix).tensor("nope")
