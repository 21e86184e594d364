"""The text models of the transformer tier with a run-time batch and sequence: BERT, GPT-2,
DistilBERT and the T5 encoder (small configs, random weights: tests/zoo/transformer_cases.py),
exported with symbolic `batch` and `sequence`, compiled ONCE with bounds, and compared with
onnxruntime at sizes hypothesis draws inside the bounds, padded masks included. Every size
must run on that one module: a silent fall back to one compile per shape fails the test.
(Their attention masks are flattened to batch * sequence, no affine function of the symbols,
so each sample runs on a module for one: hobbit.dynamic_compile.per_sample.)

Tolerances as the static tier's (rtol 1e-4, atol 1e-4 on LayerNorm'd hidden states)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hobbit
from tests.helpers import run_ort
from tests.zoo.transformer_cases import CASES, VOCAB, exported

RTOL, ATOL = 1e-4, 1e-4
TEXT = ["bert", "gpt2", "distilbert", "t5_encoder"]
BOUNDS = {"batch": (1, 3), "sequence": (1, 64)}  # 64: the small configs' position tables

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[onnx.ModelProto, object]]:
    """Each text model exported with a symbolic sequence, and compiled once with BOUNDS."""
    models, errors = exported(TEXT, kinds=("sequence",))
    assert not errors, errors
    out = {}
    for name in TEXT:
        model = onnx.load_from_string(models[(name, "sequence")])
        out[name] = model, hobbit.compile(model, cache=False, dynamic_shapes=BOUNDS)
    return out


def _feeds(name: str, batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Token ids, type ids and masks whose later rows end in padding, at (batch, seq)."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in CASES[name].inputs:
        if spec.kind == "mask":
            mask = np.ones((batch, seq), np.int64)
            for row in range(1, batch):
                mask[row, max(1, seq - 3 * row):] = 0
            out[spec.name] = mask
        else:
            out[spec.name] = rng.integers(0, spec.high if spec.kind == "ids" else VOCAB, (batch, seq), dtype=np.int64)
    return out


@pytest.mark.parametrize("name", TEXT)
def test_one_module_matches_onnxruntime_at_every_size(compiled, name):
    model, ours = compiled[name]
    assert type(ours).__name__ == "DynamicModel", getattr(ours, "reason", None)

    @settings(max_examples=6, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(batch=st.integers(1, 3), seq=st.sampled_from([1, 2, 5, 16, 17, 33, 64]) | st.integers(1, 64))
    def check(batch: int, seq: int) -> None:
        feeds = _feeds(name, batch, seq, seed=batch * 100 + seq)
        want = run_ort(model, feeds)[0]
        got = ours.run(feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name} at batch {batch}, seq {seq}")

    check()
    assert ours.compiles == 1
