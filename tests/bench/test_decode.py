"""hobbit bench --decode (hobbit.bench.decode): GPT-2's decoding step (the tiny config of
tests/zoo/transformer_cases.export_decode) generated greedily by hobbit, compiled once, and by
onnxruntime from the same cache."""

from __future__ import annotations

import onnx
import pytest

from hobbit.bench.decode import decode_inputs, decode_table, run_decode
from hobbit.errors import ConfigError
from tests.zoo.transformer_cases import DECODE, exported_decode


@pytest.fixture(scope="module")
def step() -> onnx.ModelProto:
    return onnx.load_from_string(exported_decode())


def test_both_engines_generate_the_same_tokens_from_one_compile(step):
    row, = run_decode(step, 8, [1])
    assert row.same_tokens and row.compiles == 1 and len(row.hobbit.tokens) == 8
    assert row.max_diff < 1e-4
    table = decode_table([row])
    assert table.count("\n") == 3 and "| 1 | 8 |" in table


def test_the_cache_inputs_are_read_from_the_model(step):
    names, symbol, heads, head_dim = decode_inputs(step)
    assert symbol == "past" and (heads, head_dim) == (DECODE["heads"], DECODE["head_dim"])
    assert names == [f"past_{layer}_{kv}" for layer in range(DECODE["layers"]) for kv in "kv"]


def test_a_model_that_is_no_decoding_step_is_refused():
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    with pytest.raises(ConfigError, match="input_ids, position_ids and past_"):
        decode_inputs(helper.make_model(graph))
