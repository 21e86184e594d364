"""`hobbit compile/inspect/run --target cuda|rocm` on a machine without a GPU."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import helper

from hobbit.cli.main import main
from hobbit.backend.gpu.device_code import kernel_descriptors
from tests.helpers import make_model, rand


@pytest.fixture()
def model_path(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="act")], {"x": rand(2, 300)}, ["y"]), path)
    return str(path)


def test_inspect_lists_launches_with_ptxas_registers(model_path, capsys) -> None:
    assert main(["inspect", model_path, "--target", "cuda:sm_80"]) == 0
    out = capsys.readouterr().out
    assert "cuda sm_80 (108 SMs" in out and "Relu_act_" in out and "registers" in out and "kernels: 1" in out


def test_emit_ptx_cubin_hsaco_and_lib(model_path, tmp_path, capsys) -> None:
    assert main(["compile", model_path, "--target", "cuda", "--emit", "asm", "-o", str(tmp_path / "m.ptx")]) == 0
    assert ".target sm_90" in (tmp_path / "m.ptx").read_text()
    assert main(["compile", model_path, "--target", "cuda", "--emit", "obj", "-o", str(tmp_path / "m.cubin")]) == 0
    assert (tmp_path / "m.cubin").read_bytes()[:4] == b"\x7fELF"
    assert main(["compile", model_path, "--target", "rocm:gfx90a", "--emit", "obj", "-o", str(tmp_path / "m.hsaco")]) == 0
    assert kernel_descriptors((tmp_path / "m.hsaco").read_bytes()) == ["Relu_act_"]
    assert main(["compile", model_path, "--target", "cuda", "--emit", "lib", "-o", str(tmp_path / "lib")]) == 0
    manifest = json.loads((tmp_path / "lib" / "lib.json").read_text())  # named after the folder, as a CPU export
    assert manifest["target"] == {"vendor": "cuda", "arch": "sm_90"}
    assert [launch["kernel"] for launch in manifest["launches"]] == ["Relu_act_"]
    assert (tmp_path / "lib" / "lib.ptx").exists() and (tmp_path / "lib" / "lib.weights").exists()
    assert main(["compile", model_path, "--target", "rocm", "--emit", "lib", "--name", "relu",
                 "-o", str(tmp_path / "amd")]) == 0
    assert sorted(p.name for p in (tmp_path / "amd").iterdir()) == ["relu.hsaco", "relu.json", "relu.weights"]


def test_run_without_a_gpu_is_a_clear_error(model_path, capsys) -> None:
    assert main(["run", model_path, "--target", "cuda"]) != 0
    err = capsys.readouterr().err
    assert "DeviceError" in err or "GPU" in err or "driver" in err


def test_precision_tf32_and_disable_start_from_the_gpu_pipeline(tmp_path, capsys) -> None:
    """--disable drops a pass from the GPU pipeline (not the CPU's: no Winograd or layout
    pass appears); --precision tf32 puts the matmul on tensor cores."""
    path = tmp_path / "mm.onnx"
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"), helper.make_node("Relu", ["t"], ["y"])]
    onnx.save(make_model(nodes, {"x": rand(64, 32)}, ["y"], {"w": rand(32, 64, seed=1)}), path)
    out = tmp_path / "mm.ptx"
    assert main(["compile", str(path), "--target", "cuda", "--precision", "tf32", "--emit", "asm", "-o", str(out)]) == 0
    assert "mma.sync.aligned.m16n8k8" in out.read_text()
    graph = tmp_path / "graph.txt"
    assert main(["compile", str(path), "--target", "cuda", "--disable", "fuse", "--emit", "graph", "-o", str(graph)]) == 0
    text = graph.read_text()
    assert "= Relu[" in text and "-> Relu" not in text and "Winograd" not in text  # Relu a node of its own
