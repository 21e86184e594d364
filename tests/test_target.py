"""Targets as an argument: parsing, the known CPUs' facts, and which code may run here."""

from __future__ import annotations

import dataclasses
import gc
import re
import sys
import warnings

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.cli.main import main
from hobbit.errors import TargetError
from hobbit.runtime.export_only import ExportOnlyModel
from hobbit.target import CPUS, cpu_target, host_target, parse_target
from tests.helpers import make_model, rand, run_ort


def _model():
    x = rand(1, 8, 10, 10)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return make_model(nodes, {"x": x}, ["y"], {"W": rand(16, 8, 3, 3, seed=1) * 0.2}), x


@pytest.mark.parametrize("spec", [None, "host", "cpu"])
def test_host_is_the_default_and_its_spellings(spec):
    assert parse_target(spec) == host_target()


@pytest.mark.parametrize("spec, triple, cpu, bits, regs", [
    ("x86-64-v3", "x86_64-unknown-linux-gnu", "x86-64-v3", 256, 16),
    ("x86_64-linux-gnu:x86-64-v3", "x86_64-unknown-linux-gnu", "x86-64-v3", 256, 16),
    ("znver4", "x86_64-unknown-linux-gnu", "znver4", 512, 32),
    ("x86_64-linux-gnu:znver4:-avx512f", "x86_64-unknown-linux-gnu", "znver4", 256, 16),
    ("x86_64-linux-gnu", "x86_64-unknown-linux-gnu", "x86-64", 128, 16),
    ("aarch64-linux-gnu:neoverse-n1", "aarch64-unknown-linux-gnu", "neoverse-n1", 128, 32),
    ("aarch64-linux-gnu:neoverse-v1", "aarch64-unknown-linux-gnu", "neoverse-v1", 256, 32),
    ("aarch64-linux-gnu:neoverse-v1:-sve", "aarch64-unknown-linux-gnu", "neoverse-v1", 128, 32),
    ("aarch64-linux-gnu", "aarch64-unknown-linux-gnu", "generic", 128, 32),
])
def test_a_target_spec_describes_the_machine(spec, triple, cpu, bits, regs):
    target = parse_target(spec)
    assert (target.triple, target.cpu, target.vector_bits, target.vector_registers) == (triple, cpu, bits, regs)


def test_sve_length_is_only_assumed_with_sve():
    assert parse_target("aarch64-linux-gnu:neoverse-v1").sve_bits == 256
    assert parse_target("aarch64-linux-gnu:neoverse-v1:-sve").sve_bits == 0
    assert parse_target("aarch64-linux-gnu:neoverse-n1").sve_bits == 0


def test_every_known_cpu_lists_the_features_its_width_needs():
    for name, known in CPUS.items():
        target = cpu_target(known.arch, name)
        assert target.enabled == set(known.features)
        if target.vector_bits == 512:
            assert "avx512f" in target.enabled, name
        if known.arch == "x86_64" and target.vector_bits == 256:
            assert "avx2" in target.enabled, name


@pytest.mark.parametrize("spec, message", [
    ("pentium5", "unknown target 'pentium5'"),
    ("riscv64-linux-gnu:generic", "unknown target architecture 'riscv64'"),
    ("aarch64-linux-gnu:znver4", "unknown aarch64 CPU 'znver4'"),
    ("x86-64-v3:avx2", "'+name' or '-name'"),
    ("x86_64-linux-gnu:znver4:+a:+b", "more than TRIPLE:CPU:FEATURES"),
    ("x86_64-linux-gnu:znver4:+nonsense", "LLVM does not know the x86_64 CPU feature(s) '+nonsense'"),
    ("znver4:-avx512bf61,+avx2", "'-avx512bf61'"),
    ("aarch64-linux-gnu:neoverse-v1:+avx2", "LLVM does not know the aarch64 CPU feature(s) '+avx2'"),
    ("", "target= is 'host'"),
    (3, "target= is 'host'"),
])
def test_bad_targets_are_one_clear_error(spec, message):
    with pytest.raises(TargetError, match=re.escape(message)):
        parse_target(spec)


def test_a_target_object_with_names_llvm_does_not_know_is_refused():
    host = host_target()
    with pytest.raises(TargetError, match="LLVM does not know the x86_64 CPU 'notacpu'"):
        parse_target(dataclasses.replace(host, cpu="notacpu"))
    with pytest.raises(TargetError, match=re.escape("'+hobbit-imaginary'")):
        parse_target(dataclasses.replace(host, features=host.features + ",+hobbit-imaginary"))
    assert parse_target(host) is host


def test_an_unknown_feature_is_a_target_error_not_an_export_only_model():
    """LLVM only warns about '+nonsense' and ignores it; hobbit took it for a feature the host
    lacks and returned an ExportOnlyModel."""
    model, _ = _model()
    with pytest.raises(TargetError, match=re.escape("'+nonsense'")):
        hobbit.compile(model, target="x86_64-linux-gnu:znver4:+nonsense")


def test_host_detection_closes_the_sysfs_files_it_reads(monkeypatch):
    """A file left to the garbage collector warns (ResourceWarning) from its finaliser, where
    an error filter cannot raise: the unraisable hook sees it."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        host_target.__wrapped__()
        gc.collect()
    assert [str(u.exc_value) for u in unraisable] == []


def test_what_the_host_cannot_run_says_why():
    host = host_target()
    assert parse_target("aarch64-linux-gnu:neoverse-n1").runs_on(host) == "it is aarch64 code and this host is x86_64"
    more = dataclasses.replace(host, features=host.features + ",+imaginaryfeature")
    assert "imaginaryfeature" in more.runs_on(host)
    assert host.runs_on(host) is None


def test_a_model_for_another_architecture_exports_but_does_not_run():
    model, x = _model()
    compiled = hobbit.compile(model, target="aarch64-linux-gnu:neoverse-n1")
    assert isinstance(compiled, ExportOnlyModel)
    assert compiled.object_code[:4] == b"\x7fELF" and compiled.object_code[18] == 183  # e_machine EM_AARCH64
    assert [s.name for s in compiled.inputs] == ["x"] and compiled.outputs[0].shape == (1, 16, 10, 10)
    with pytest.raises(TargetError, match="cannot run in this process: it is aarch64 code"):
        compiled.run({"x": x})
    with pytest.raises(TargetError, match="export it"):
        compiled(x)


def test_a_cpu_the_host_can_stand_in_for_runs_here():
    """x86-64-v3 (AVX2) code runs on any x86-64 host with AVX2, in-process, with its own schedules."""
    if "avx2" not in host_target().enabled:
        pytest.skip("the host has no AVX2")
    model, x = _model()
    compiled = hobbit.compile(model, target="x86-64-v3", cache=False)
    assert compiled.report.target.vector_bits == 256
    np.testing.assert_allclose(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_cli_refuses_an_unknown_target_as_a_usage_error(capsys):
    assert main(["run", "squeezenet1_1", "--target", "pentium5"]) == 2
    assert "unknown target 'pentium5'" in capsys.readouterr().err


def test_cli_run_refuses_a_target_the_host_cannot_run(capsys, tmp_path):
    model, _ = _model()
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["run", str(path), "--target", "aarch64-linux-gnu:neoverse-v1"]) == 2
    assert "cannot run on this host: it is aarch64 code" in capsys.readouterr().err


def test_gpu_targets_parse_with_their_arch_facts() -> None:
    from hobbit.target import GPUS, GpuTarget, is_gpu, parse_target
    cuda = parse_target("cuda")
    assert isinstance(cuda, GpuTarget) and is_gpu(cuda) and cuda.arch == "sm_90" and cuda.warp == 32
    assert cuda.triple == "nvptx64-nvidia-cuda"
    assert parse_target("cuda:sm_80") is GPUS["sm_80"]
    rocm = parse_target("rocm:gfx90a")
    assert rocm.triple == "amdgcn-amd-amdhsa" and rocm.warp == 64 and rocm.shared_bytes == 64 * 1024
    assert parse_target("rocm").arch == "gfx942"
    for bad in ("cuda:sm_42", "rocm:sm_90", "cuda:gfx942"):
        with pytest.raises(TargetError, match="unknown"):
            parse_target(bad)
    assert "GPU code" in cuda.runs_on(parse_target("host"))
