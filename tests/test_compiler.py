"""compile()'s precision option: its checks, the compile cache and pickling keep it apart."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ConfigError, TargetError
from hobbit.passes import DEFAULT_PIPELINE
from hobbit.runtime import cache
from hobbit.runtime.cache import CachedReport
from tests.helpers import make_model, needs_host_feature, rand


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    x = rand(1, 32, 12, 12)
    inits = {"w": rand(48, 32, 1, 1, seed=1) * 0.2, "b": rand(48, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return make_model(nodes, {"x": x}, ["y"], inits)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return rand(1, 32, 12, 12, seed=7)


@pytest.mark.parametrize("target", ["x86-64-v3", "x86_64-linux-gnu:znver4:-avx512bf16"])
def test_bf16_on_a_target_without_avx512bf16_names_the_feature_and_target(model, target):
    with pytest.raises(TargetError, match=r"avx512bf16.*target '(x86-64-v3|znver4)'"):
        hobbit.compile(model, target=target, precision="bf16", cache=False)


@pytest.mark.parametrize("precision", ["int8", "fp16", "BF16", None])
def test_unknown_precision_is_a_config_error(model, precision):
    with pytest.raises(ConfigError, match="precision= must be one of 'fp32', 'bf16'"):
        hobbit.compile(model, precision=precision, cache=False)


def test_bf16_with_a_pass_list_lacking_the_bf16_pass_is_refused(model):
    with pytest.raises(ConfigError, match="no 'bf16' pass"):
        hobbit.compile(model, target="znver4", precision="bf16", passes=DEFAULT_PIPELINE, cache=False)


@needs_host_feature("avx512bf16")
def test_cache_keeps_precisions_apart(model, x, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_WARNED", set())
    fresh_bf16 = hobbit.compile(model, threads=1, precision="bf16", cache=False).run({"x": x})[0]
    fp32 = hobbit.compile(model, threads=1, cache=True).run({"x": x})[0]
    bf16 = hobbit.compile(model, threads=1, precision="bf16", cache=True)
    assert not isinstance(bf16.report, CachedReport), "the bf16 compile was answered by the fp32 entry"
    hit = hobbit.compile(model, threads=1, precision="bf16", cache=True)
    assert isinstance(hit.report, CachedReport)
    assert np.array_equal(hit.run({"x": x})[0], fresh_bf16)
    assert not np.array_equal(fp32, fresh_bf16)


@needs_host_feature("avx512bf16")
def test_pickled_bf16_model_rebuilds_in_bf16(model, x):
    compiled = hobbit.compile(model, threads=1, precision="bf16", cache=False)
    again = pickle.loads(pickle.dumps(compiled))
    assert np.array_equal(again.run({"x": x})[0], compiled.run({"x": x})[0])
    fp32 = hobbit.compile(model, threads=1, cache=False).run({"x": x})[0]
    assert not np.array_equal(again.run({"x": x})[0], fp32)
