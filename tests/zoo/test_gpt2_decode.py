"""GPT-2 decoding with its key/value cache (tests/zoo/transformer_cases.export_decode): one compile
serves a cache that grows by one position per token. 64 greedy tokens from a 4-position cache,
each step's logits compared with onnxruntime running the same loop (rtol/atol 1e-4: the
engines differ by float32 sums taken in another order), and every token equal."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import hobbit
from hobbit.bench.decode import generate, start_cache
from tests.zoo.transformer_cases import DECODE, exported_decode

STEPS = 64

pytestmark = pytest.mark.slow


def test_greedy_decoding_from_one_compile_matches_onnxruntime():
    model = onnx.load_from_string(exported_decode())
    past_names = [i.name for i in model.graph.input if i.name.startswith("past_")]
    past = start_cache(past_names, DECODE["heads"], DECODE["head_dim"], 4)
    ours = hobbit.compile(model, cache=False, dynamic_shapes={"past": (1, DECODE["positions"] - 1)})
    assert type(ours).__name__ == "DynamicModel", getattr(ours, "reason", None)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = generate(lambda feeds: session.run(None, feeds), past, 1, STEPS)
    got = generate(ours.run, past, 1, STEPS)
    for step, (a, b) in enumerate(zip(got.logits, want.logits)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"step {step}")
    assert got.tokens == want.tokens
    assert ours.compiles == 1
