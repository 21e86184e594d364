"""hobbit.runtime.hip on a real AMD GPU (skipped where there is none, or no hip-python: CI
has neither; scripts/gpu_check_amd.sh runs these on a ROCm machine): results against the
grid emulation and onnxruntime, graph and plain launches, an exported folder loaded and
run, and arrays already on the GPU (PyTorch ROCm tensors by __cuda_array_interface__ and
by DLPack, on a side stream) in and out."""

from __future__ import annotations

import pytest

import hobbit
from hobbit.runtime.hip import HipModel, device_arch, hip_module
from hobbit.target import GPUS
from tests.helpers import rand, run_ort
from tests.runtime.device_families import close_to, torch_tensors_in_and_out
from tests.runtime.fake_gpu import three_kernels


def _device_arch() -> str | None:
    """The arch of HIP device 0, where there is one and hobbit knows its arch; else None."""
    try:
        hip = hip_module()
        status = hip.hipInit(0)
        status = status[0] if isinstance(status, tuple) else status
        if status != hip.hipError_t.hipSuccess or hip.hipGetDeviceCount()[1] < 1:
            return None
        arch = device_arch(str(hip.hipGetDeviceProperties(0)[1].gcnArchName))
    except Exception:  # DeviceError (no hip-python), or hip-python finding no libamdhip64
        return None
    return arch if arch in GPUS and GPUS[arch].vendor == "rocm" else None


ARCH = _device_arch()
pytestmark = pytest.mark.skipif(ARCH is None, reason="needs an AMD GPU of an arch hobbit knows, ROCm and hip-python")
SHAPE = (64, 1000)


@pytest.fixture(scope="module")
def compiled():
    return hobbit.compile(three_kernels(SHAPE), target=f"rocm:{ARCH}")


def test_matches_emulation_and_onnxruntime(compiled) -> None:
    device = HipModel(compiled)
    feeds = {"x": rand(*SHAPE, seed=2)}
    want = compiled.emulate(feeds)
    for _ in range(3):  # the graph replayed
        close_to(device.run(feeds), want)
    close_to(device.run(feeds), run_ort(three_kernels(SHAPE), feeds))
    assert device.image == "hsaco" and "graph" in repr(device)
    device.close()


@pytest.mark.parametrize("setting", ["HOBBIT_HIP_GRAPH", "HOBBIT_HIP_SYNC"])
def test_plain_launches(compiled, monkeypatch, setting) -> None:
    monkeypatch.setenv(setting, "0" if setting == "HOBBIT_HIP_GRAPH" else "1")
    feeds = {"x": rand(*SHAPE, seed=3)}
    device = HipModel(compiled)
    close_to(device.run(feeds), compiled.emulate(feeds))
    assert "launches" in repr(device)
    device.close()


def test_torch_tensors_in_and_out(compiled) -> None:
    torch = pytest.importorskip("torch")
    if not getattr(torch.version, "hip", None) or not torch.cuda.is_available():
        pytest.skip("needs PyTorch's ROCm build")
    torch_tensors_in_and_out(compiled, rand(*SHAPE, seed=4))


def test_exported_folder_loads_and_runs_on_the_device(compiled, tmp_path) -> None:
    folder = tmp_path / "three_kernels"
    compiled.export(folder)
    loaded = hobbit.load(folder)
    feeds = {"x": rand(*SHAPE, seed=5)}
    close_to(loaded.run(feeds), compiled.emulate(feeds))
    loaded.close()
