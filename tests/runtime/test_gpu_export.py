"""A GPU model's export folder and hobbit.load of it: the same folder shape as a CPU export
(<name>.json beside the native code and <name>.weights), the same trust rules (private
folder, checked manifest, sha256 of the code), and the loaded model run through the fake
CUDA driver (tests/runtime/fake_cuda.py) as the compiled one is."""

from __future__ import annotations

import json
import os
import pickle
import sys

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ArtifactError, ConfigError, DeviceError
from hobbit.runtime import cuda
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.jit import ModelTensors
from tests.helpers import make_model, rand, run_ort
from tests.runtime import fake_cuda, fake_gpu

SHAPE = (8, 129)


@pytest.fixture(scope="module")
def model():
    nodes = [helper.make_node("Exp", ["x"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"]),
             helper.make_node("Mul", ["t", "t"], ["z"])]
    onnx_model = make_model(nodes, {"x": rand(*SHAPE)}, ["y", "z"], {"b": rand(SHAPE[1], seed=1)})
    return onnx_model, hobbit.compile(onnx_model, target="cuda")


@pytest.fixture
def folder(model, tmp_path):
    out = tmp_path / "relu_gpu"
    model[1].export(out)
    return out


@pytest.fixture
def fake(monkeypatch, model):
    """The fake driver, running the compiled model's kernels built for the host (a loaded
    model has no host build; the kernels are the same by name)."""
    driver = fake_cuda.FakeDriver(fake_gpu.host_build(model[1]))
    monkeypatch.setattr(cuda, "driver_module", lambda: driver)
    for name in ("HOBBIT_CUDA_DEVICE", "HOBBIT_CUDA_GRAPH", "HOBBIT_CUDA_SYNC"):
        monkeypatch.delenv(name, raising=False)
    return driver


def test_a_gpu_model_is_model_tensors(model) -> None:
    compiled = model[1]
    assert isinstance(compiled, GpuModel) and isinstance(compiled, ModelTensors)
    assert compiled.output_names == ["y", "z"]
    assert [arg.name for arg in compiled.get_inputs()] == ["x"]
    assert compiled.report.threads == 1 and "define" in compiled.report.llvm_ir


def test_export_has_the_cpu_folder_shape(model, folder) -> None:
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["relu_gpu.cubin", "relu_gpu.json", "relu_gpu.ptx", "relu_gpu.weights"]
    manifest = json.loads((folder / "relu_gpu.json").read_text())
    assert manifest["name"] == "relu_gpu" and manifest["target"] == {"vendor": "cuda", "arch": "sm_90"}
    assert manifest["device_code"]["file"] == "relu_gpu.ptx" and len(manifest["device_code"]["sha256"]) == 64
    assert manifest["weights"]["bytes"] == model[1].weights.nbytes
    assert [launch["kernel"] for launch in manifest["launches"]] == [la.kernel for la in model[1].launches]


def test_load_round_trip_runs_on_the_fake_driver(model, folder, fake) -> None:
    onnx_model, compiled = model
    loaded = hobbit.load(folder)
    assert isinstance(loaded, GpuModel) and loaded.target == compiled.target
    assert loaded.inputs == compiled.inputs and loaded.outputs == compiled.outputs
    assert loaded.launches == compiled.launches and loaded.cubin == compiled.cubin
    assert loaded.device_code == compiled.device_code and loaded.arena_bytes == compiled.arena_bytes
    np.testing.assert_array_equal(loaded.weights, compiled.weights)
    feeds = {"x": rand(*SHAPE, seed=5)}
    got = loaded.run(feeds)
    for g, e in zip(got, run_ort(onnx_model, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    again = pickle.loads(pickle.dumps(loaded))  # a loaded model pickles as its folder
    assert isinstance(again, GpuModel) and again.report.path == str(folder)
    with pytest.raises(hobbit.HobbitError, match="loaded from an export"):
        loaded.emulate(feeds)
    with pytest.raises(ConfigError, match="threads= is for a CPU library"):
        hobbit.load(folder, threads=2)


def test_a_pickled_gpu_model_carries_its_device_code_and_runs(model, fake) -> None:
    onnx_model, compiled = model
    again = pickle.loads(pickle.dumps(compiled))
    assert isinstance(again, GpuModel) and again.device_code == compiled.device_code
    assert again.launches == compiled.launches and again.cubin == compiled.cubin
    feeds = {"x": rand(*SHAPE, seed=6)}
    for g, e in zip(again.run(feeds), run_ort(onnx_model, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    with pytest.raises(hobbit.HobbitError, match="loaded from an export or a pickle"):
        again.emulate(feeds)


def test_load_without_a_device_is_a_clear_error(folder, monkeypatch) -> None:
    """Where cuda-python (or the driver, or a GPU) is missing, hobbit.load says what is missing
    at once, as a library built for CPU features this host lacks is refused at load."""
    for name in ("cuda.bindings.driver", "cuda.bindings", "cuda"):  # the driver module too: import_module
        monkeypatch.setitem(sys.modules, name, None)  # returns an imported submodule without its parents
    with pytest.raises(DeviceError, match=r"pip install 'hobbit\[cuda\]'"):
        hobbit.load(folder)


def test_load_of_a_rocm_export_without_hip_python_says_which_extra(model, tmp_path, monkeypatch) -> None:
    """(Through the HIP runtime, a loaded ROCm export runs: tests/runtime/test_hip.py.)"""
    amd = hobbit.compile(model[0], target="rocm")
    amd.export(tmp_path / "amd")
    assert sorted(p.name for p in (tmp_path / "amd").iterdir()) == ["amd.hsaco", "amd.json", "amd.weights"]
    for name in ("hip.hip", "hip"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(DeviceError, match=r"pip install 'hobbit\[rocm\]'"):
        hobbit.load(tmp_path / "amd")


def _edit(folder, change) -> None:
    path = folder / "relu_gpu.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("change, message", [
    (lambda m: m["launches"][0].update(grid=[1, 0, 1]), "launches\\[0\\].grid"),
    (lambda m: m["launches"][0]["args"].append(["arena", m["arena_bytes"] + 64, 0]), "inside the arena"),
    (lambda m: m["launches"][0]["args"].__setitem__(0, ["input", 5, 0]), "inside one of the model's 1 inputs"),
    (lambda m: m["device_code"].update(file="../other.ptx"), "device_code.file"),
    (lambda m: m["weights"].update(bytes=-1), "weights.bytes"),
    (lambda m: m["target"].update(arch="sm_42"), "a GPU this hobbit does not know"),
    (lambda m: m.pop("launches") and m.update(launches=None), "'launches'"),
])
def test_a_tampered_manifest_is_refused(folder, change, message) -> None:
    _edit(folder, change)
    with pytest.raises(ArtifactError, match=message):
        hobbit.load(folder)


def test_tampered_code_or_weights_are_refused(folder) -> None:
    ptx = folder / "relu_gpu.ptx"
    ptx.write_text(ptx.read_text().replace("sm_90", "sm_80"))
    with pytest.raises(ArtifactError, match="sha256 differs"):
        hobbit.load(folder)


def test_damaged_weights_are_refused(folder) -> None:
    weights = folder / "relu_gpu.weights"
    data = bytearray(weights.read_bytes())
    data[0] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="crc32"):
        hobbit.load(folder)


def test_a_folder_others_can_write_is_refused(folder) -> None:
    os.chmod(folder / "relu_gpu.ptx", 0o666)
    with pytest.raises(ArtifactError, match="writable by group or others"):
        hobbit.load(folder)
