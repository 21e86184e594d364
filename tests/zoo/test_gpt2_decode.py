"""GPT-2 decoding with its key/value cache (tests/zoo/transformer_cases.export_decode): one compile
serves a cache that grows by one position per token. 64 greedy tokens from a 4-position cache,
each step's logits compared with onnxruntime running the same loop (rtol/atol 1e-4: the
engines differ by float32 sums taken in another order), and every token equal: with each
step's presents fed back as the pasts, and with the cache kept in place (DynamicModel.cache,
hobbit.runtime.kvcache), whose presents must also be onnxruntime's at every step."""

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


@pytest.fixture(scope="module")
def decoding():
    """The step model, its start cache, hobbit's compile and onnxruntime's greedy loop."""
    model = onnx.load_from_string(exported_decode())
    past_names = [i.name for i in model.graph.input if i.name.startswith("past_")]
    past = start_cache(past_names, DECODE["heads"], DECODE["head_dim"], 4)
    ours = hobbit.compile(model, cache=False, dynamic_shapes={"past": (1, DECODE["positions"] - 1)})
    assert type(ours).__name__ == "DynamicModel", getattr(ours, "reason", None)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return model, past, ours, session


def test_greedy_decoding_from_one_compile_matches_onnxruntime(decoding):
    _, past, ours, session = decoding
    want = generate(lambda feeds: session.run(None, feeds), past, 1, STEPS)
    got = generate(ours.run, past, 1, STEPS)
    for step, (a, b) in enumerate(zip(got.logits, want.logits)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"step {step}")
    assert got.tokens == want.tokens
    assert ours.compiles == 1


def test_greedy_decoding_with_the_cache_in_place_matches_onnxruntime(decoding):
    model, past, ours, session = decoding
    names = [o.name for o in model.graph.output]
    assert ours.cache_inputs == list(past)
    cache = ours.cache(past)
    theirs, token, position = dict(past), 1, 4
    for step in range(STEPS):
        feeds = {"input_ids": np.array([[token]], np.int64), "position_ids": np.array([[position]], np.int64)}
        want = session.run(None, {**feeds, **theirs})
        got = ours.run(feeds, cache=cache)
        for name, a, b in zip(names, got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"step {step}, {name}")
        token = int(np.argmax(want[0][0, -1]))
        assert int(np.argmax(got[0][0, -1])) == token, f"step {step}"
        theirs = dict(zip(past, want[1:]))
        position += 1
    assert cache[next(iter(past))].shape[2] == 4 + STEPS and ours.compiles == 1
