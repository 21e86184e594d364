"""loops="polly" (hobbit.backend.polly): opt-22 with Polly optimises the module, the result runs
right (JIT, exported library, code for another CPU), Polly really rewrote the naive nests, the
compile cache tells the choices apart, and a missing opt-22 or a bad choice is a clear error."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.backend import polly
from hobbit.compiler import lower_to_llvm
from hobbit.errors import CodegenError, ConfigError, MissingDependencyError
from hobbit.runtime.loaded_report import CachedReport
from tests.helpers import make_model, rand, run_ort

needs_opt = pytest.mark.skipif(shutil.which(polly.OPT) is None, reason=f"{polly.OPT} (Debian's llvm-22) is not installed")


def dense_conv_model():
    """A conv with bias and ReLU, a max pool, and a linear layer: a GEMM, a conv, a pool."""
    x = rand(1, 4, 12, 12)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("MatMul", ["f", "fc"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"w": rand(8, 4, 3, 3, seed=1), "b": rand(8, seed=2),
                                                 "fc": rand(8 * 6 * 6, 10, seed=3)})
    return model, {"x": x}


def product_model():
    x = rand(96, 64)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": rand(64, 80, seed=1)})


@needs_opt
@pytest.mark.parametrize("schedule", ["naive", "auto"])
@pytest.mark.parametrize("loops", ["polly", "polly-early"])
@pytest.mark.parametrize("threads", [1, 2])
def test_polly_matches_onnxruntime(schedule, loops, threads):
    model, feeds = dense_conv_model()
    got = hobbit.compile(model, schedule=schedule, loops=loops, threads=threads, cache=False).run(feeds)
    np.testing.assert_allclose(got[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


@needs_opt
@pytest.mark.parametrize("loops", ["polly", "polly-early"])
def test_polly_rewrites_the_naive_product(loops):
    """Polly's code generator names its loops polly.*: they are there for a naive GEMM, and the
    llvmlite pipeline has none."""
    model = product_model()
    rewritten = str(lower_to_llvm(model, threads=1, schedule="naive", loops=loops).optimized)
    plain = str(lower_to_llvm(model, threads=1, schedule="naive").optimized)
    assert "polly.indvar" in rewritten  # a loop counter of the code Polly generated
    assert "polly." not in plain


@needs_opt
def test_polly_code_exports_and_loads(tmp_path):
    model, feeds = dense_conv_model()
    compiled = hobbit.compile(model, schedule="naive", loops="polly", threads=1, cache=False)
    compiled.export(tmp_path / "lib")
    loaded = hobbit.load(tmp_path / "lib")
    np.testing.assert_allclose(loaded.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


@needs_opt
def test_polly_cross_compiles_for_aarch64():
    """Code for another CPU goes through opt-22 for that target and comes back as an object."""
    model = product_model()
    built = hobbit.compile(model, target="aarch64-linux-gnu:neoverse-n1", schedule="naive", loops="polly")
    report = lower_to_llvm(model, target="aarch64-linux-gnu:neoverse-n1", schedule="naive", loops="polly")
    assert type(built).__name__ == "ExportOnlyModel"
    assert "polly.indvar" in str(report.optimized) and 'target triple = "aarch64' in str(report.optimized)


@needs_opt
def test_cache_keys_tell_the_choices_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path))
    model, feeds = dense_conv_model()
    for schedule, loops in [("auto", "llvm"), ("naive", "llvm"), ("naive", "polly"), ("naive", "polly-early")]:
        compiled = hobbit.compile(model, schedule=schedule, loops=loops, threads=1, cache=True)
        assert not isinstance(compiled.report, CachedReport), (schedule, loops)  # a fresh compile
    again = hobbit.compile(model, schedule="naive", loops="polly", threads=1, cache=True)
    assert isinstance(again.report, CachedReport)
    np.testing.assert_allclose(again.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


def test_missing_opt_is_a_missing_dependency(monkeypatch):
    model, _ = dense_conv_model()
    monkeypatch.setattr(polly.shutil, "which", lambda name: None)
    with pytest.raises(MissingDependencyError, match="apt-get install llvm-22"):
        hobbit.compile(model, loops="polly")


def test_bad_choices_are_config_errors():
    model, _ = dense_conv_model()
    with pytest.raises(ConfigError, match="loops= must be one of"):
        hobbit.compile(model, loops="isl")
    with pytest.raises(ConfigError, match="opt_level=0"):
        hobbit.compile(model, loops="polly", opt_level=0)
    with pytest.raises(ConfigError, match="GPU code"):
        hobbit.compile(model, loops="polly", target="cuda")


def test_opt_failure_is_a_codegen_error(monkeypatch, tmp_path):
    """opt-22 exiting non-zero (here: a stand-in that fails) is a CodegenError quoting it."""
    fake = tmp_path / polly.OPT
    fake.write_text("#!/bin/sh\necho 'opt: something broke' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    model, _ = dense_conv_model()
    with pytest.raises(CodegenError, match="something broke"):
        hobbit.compile(model, schedule="naive", loops="polly", cache=False)


def misaligned(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 array whose data starts 4 bytes past a 64-byte boundary."""
    raw = np.empty(int(np.prod(shape)) * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + 4
    return raw[start: start + int(np.prod(shape)) * 4].view(np.float32).reshape(shape)


@needs_opt
def test_polly_output_claims_no_alignment_it_lacks():
    """Polly's DeLICM gave the vector stores it mapped onto ReduceMax's output the 32-byte alignment
    of the register's stack slot: a segfault on an output not 32-byte aligned. hobbit lowers every
    access of opt-22's output to its element's alignment (hobbit.backend.polly.natural_alignment)."""
    x = rand(64, 256, 64)
    model = make_model([helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=0)], {"x": x}, ["y"],
                       {"axes": np.array([1], np.int64)}, opset=18)
    text = str(lower_to_llvm(model, threads=1, loops="polly").optimized)
    assert not re.search(r"(load|store) <\d+ x float>[^\n]*, align (8|16|32|64)\b", text)
    compiled = hobbit.compile(model, threads=1, loops="polly", cache=False)
    y = misaligned((64, 64))
    compiled.run({"x": x}, out=[y])
    np.testing.assert_array_equal(y, x.max(axis=1))


def test_natural_alignment_lowers_and_never_raises():
    text = ("  store <8 x float> %v, ptr %p, align 32, !alias.scope !0\n"
            "  %a = load <4 x i32>, ptr %q, align 64\n  store double %d, ptr %r, align 4\n"
            "  %b = load float, ptr %s, align 16\n  %c = load i8, ptr %t, align 1\n")
    assert polly.natural_alignment(text) == (
        "  store <8 x float> %v, ptr %p, align 4, !alias.scope !0\n"
        "  %a = load <4 x i32>, ptr %q, align 4\n  store double %d, ptr %r, align 4\n"
        "  %b = load float, ptr %s, align 4\n  %c = load i8, ptr %t, align 1\n")
