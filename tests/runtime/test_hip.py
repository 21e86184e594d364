"""hobbit.runtime.hip without an AMD GPU, what is HIP's own (what the CUDA and HIP runtimes
share is tested once per API in test_gpu_runtime.py, the HIP runtime through the strict
fake HIP driver, tests/runtime/fake_hip.py): the errors where there is no ROCm runtime or
hip-python, a device of another arch refused, producers' streams as HIP's, DLPack inputs
on a ROCm device, and a ROCm model compiled, or exported and loaded, run by GpuModel.run
through the HIP runtime and checked against onnxruntime, with graphs and without."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

import hobbit
from hobbit.backend.gpu.device_code import kernel_descriptors
from hobbit.errors import DeviceError
from hobbit.runtime import hip
from hobbit.runtime.device_arrays import DL_CUDA, DL_ROCM
from hobbit.runtime.hip import HipModel, device_arch
from tests.helpers import rand, run_ort
from tests.runtime import fake_gpu, fake_hip
from tests.runtime.fake_gpu import DlpackOnDevice, OnDevice
from tests.runtime.fake_hip import FakeHip

SHAPE = (16, 257)  # 4112 elements: more than one block
ARCH = "gfx90a:sramecc+:xnack-"


@pytest.fixture(scope="module")
def model():
    onnx_model = fake_gpu.three_kernels(SHAPE)
    return onnx_model, hobbit.compile(onnx_model, target="rocm:gfx90a")


@pytest.fixture
def fake(monkeypatch, model):
    driver = FakeHip(fake_gpu.host_build(model[1]), arch=ARCH)
    monkeypatch.setattr(hip, "hip_module", lambda: driver)
    for name in ("HOBBIT_HIP_DEVICE", "HOBBIT_HIP_GRAPH", "HOBBIT_HIP_SYNC"):
        monkeypatch.delenv(name, raising=False)
    return driver


def _matches_ort(onnx_model, feeds, got) -> None:
    for g, want in zip(got, run_ort(onnx_model, feeds)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_missing_hip_python_says_which_extra(monkeypatch) -> None:
    for name in ("hip.hip", "hip"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(DeviceError, match=r"pip install 'hobbit\[rocm\]'"):
        hip.hip_module()


def test_a_device_of_another_arch_is_refused(fake, model) -> None:
    fake.arch = "gfx942:sramecc+:xnack-"
    with pytest.raises(DeviceError, match=r"compiled for gfx90a, and this GPU is gfx942.*rocm:gfx942"):
        HipModel(model[1])
    assert "hipModuleLoadData" not in fake.names() and not fake.memory
    assert device_arch("gfx90a:sramecc+:xnack-") == "gfx90a" and device_arch("gfx1100") == "gfx1100"


def test_the_code_object_and_its_kernels_by_descriptor(fake, model) -> None:
    compiled = model[1]
    device = HipModel(compiled)
    assert device.image == "hsaco" and fake.loaded == [compiled.device_code] and fake.current == 0
    got = [name.decode() for name, in (args[1:] for call, args in fake.calls if call == "hipModuleGetFunction")]
    assert sorted(got) == kernel_descriptors(compiled.device_code) == sorted({la.kernel for la in compiled.launches})


def test_producer_streams_are_hip_streams(fake, model) -> None:
    """__cuda_array_interface__'s 1 (legacy default stream) and 0 are HIP's null stream 0;
    2 (per-thread) is hipStreamPerThread, 2 in HIP too; the rest are hipStream_t handles."""
    onnx_model, compiled = model
    device = HipModel(compiled)
    x = rand(*SHAPE, seed=6)
    for stream in (1, 0, 2, 77):
        _matches_ort(onnx_model, {"x": x}, device.run({"x": OnDevice(x, fake, stream=stream)}))
    assert fake.recorded_streams == [0, 0, 2, 77]


def test_dlpack_input_on_rocm(fake, model) -> None:
    onnx_model, compiled = model
    x = rand(*SHAPE, seed=7)
    producer = DlpackOnDevice(x, fake, DL_ROCM)
    device = HipModel(compiled)
    _matches_ort(onnx_model, {"x": x}, device.run({"x": producer}))
    assert "hipMemcpyDtoDAsync" in fake.names() and producer.streams == [int(device._stream)]
    assert device._device_view(DlpackOnDevice(x, fake, DL_CUDA)) is None  # CUDA memory: not HIP's to copy


@pytest.mark.parametrize("graph", ["1", "0"])
def test_compiled_and_loaded_models_run_through_gpu_model(model, tmp_path, monkeypatch, graph) -> None:
    """GpuModel.run picks the HIP runtime for a rocm model, graph or not; an exported folder
    loads (hobbit.load opens it on the device at once) and runs."""
    monkeypatch.setenv("HOBBIT_HIP_GRAPH", graph)
    onnx_model, compiled = model
    driver = fake_hip.install(monkeypatch, arch=ARCH)
    fresh = replace(compiled, _device=None)
    feeds = {"x": rand(*SHAPE, seed=8)}
    _matches_ort(onnx_model, feeds, fresh.run(feeds))
    assert isinstance(fresh.open(), HipModel)
    assert ("hipGraphLaunch" in driver.names()) == (graph == "1")
    fresh.export(tmp_path / "amd")
    loaded = hobbit.load(tmp_path / "amd")
    _matches_ort(onnx_model, feeds, loaded.run(feeds))
    assert driver.loaded == [compiled.device_code] * 2 and len(driver.builds) == 1
    loaded.close()
    fresh.close()
    assert not driver.memory and not driver.modules
