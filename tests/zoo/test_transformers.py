"""The transformer tier: ViT, DeiT, Swin, BERT, GPT-2, DistilBERT, the T5 and Whisper
encoders and MobileViT (small configs, random weights: tests/zoo/transformer_cases.py),
exported by torch's classic exporter at opset 17, compiled by hobbit and compared with
onnxruntime, with a static batch of 1 and with a symbolic batch run at batches 1 and 3.

Tolerances: rtol 1e-4, atol 1e-4 on outputs of magnitude 0.5 to 10 (LayerNorm'd hidden
states, pooled features); the two engines differ by at most about 2e-5 on them, from
float32 sums, softmaxes and GELUs taken in another order."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hobbit
from tests.helpers import run_ort
from tests.zoo.transformer_cases import CASES, feeds, exported

RTOL, ATOL = 1e-4, 1e-4

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models() -> tuple[dict[tuple[str, bool], bytes], dict[str, str]]:
    """Every case exported once, in one fresh interpreter (the file runs on one worker)."""
    return exported(list(CASES))


def _model(models, name: str, symbolic: bool):
    onnx_bytes, errors = models
    if name in errors:
        pytest.fail(f"torch could not export {name}:\n{errors[name]}")
    return onnx.load_from_string(onnx_bytes[(name, symbolic)])


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_onnxruntime(models, name, symbolic):
    model = _model(models, name, symbolic)
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert (batch.dim_param == "batch") if symbolic else (batch.dim_value == 1)
    compiled = hobbit.compile(model, cache=False)
    for n in (1, 3) if symbolic else (1,):
        inputs = feeds(CASES[name], n, seed=n)
        want = run_ort(model, inputs)[0]
        assert 0.1 <= float(want.std()) <= 100, f"{name}'s output is degenerate (std {want.std()})"
        got = compiled.run(inputs)[0]
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}, batch {n}")


@pytest.mark.parametrize("name", list(CASES))
def test_naive_schedule_matches_onnxruntime(models, name):
    """schedule="naive" (plain loop nests for MatMul, Conv, pooling, reductions) on the tier."""
    model = _model(models, name, False)
    inputs = feeds(CASES[name], 1, seed=4)
    got = hobbit.compile(model, schedule="naive", cache=False).run(inputs)[0]
    np.testing.assert_allclose(got, run_ort(model, inputs)[0], rtol=RTOL, atol=ATOL, err_msg=name)
