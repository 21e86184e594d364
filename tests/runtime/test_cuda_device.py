"""hobbit.runtime.cuda on a real NVIDIA GPU (skipped where there is none: CI has none;
scripts/gpu_check.sh runs these on a GPU machine): one model per kernel family against
onnxruntime on the host (tests/runtime/device_families.py: GEMM/conv, tensor cores in TF32
and bf16, depthwise, pool, reduce, norm, element-wise, tensor ops), results against the grid
emulation, the cubin and PTX images, graph and plain launches, and arrays already on the GPU
(torch CUDA tensors by __cuda_array_interface__ and by DLPack, on a side stream) in and out."""

from __future__ import annotations

import pytest
from onnx import helper

import hobbit
from hobbit.runtime.cuda import CudaModel, driver_module
from tests.helpers import make_model, rand
from tests.runtime.device_families import FAMILIES, close_to, run_once, torch_tensors_in_and_out


def _gpu_present() -> bool:
    try:
        d = driver_module()
        status = d.cuInit(0)
    except Exception:  # DeviceError, or cuda-python finding no libcuda
        return False
    status = status[0] if isinstance(status, tuple) else status
    return status == d.CUresult.CUDA_SUCCESS and d.cuDeviceGetCount()[1] > 0


pytestmark = pytest.mark.skipif(not _gpu_present(), reason="needs an NVIDIA GPU, its driver and cuda-python")
SHAPE = (64, 1000)


def three_kernels():
    nodes = [helper.make_node("Exp", ["x"], ["t"]), helper.make_node("Add", ["t", "b"], ["y1"]),
             helper.make_node("Mul", ["t", "t"], ["m"]), helper.make_node("Sub", ["m", "y1"], ["y2"])]
    return make_model(nodes, {"x": rand(*SHAPE)}, ["y1", "y2"], {"b": rand(SHAPE[1], seed=1)})


@pytest.fixture(scope="module")
def compiled():
    return hobbit.compile(three_kernels(), target="cuda")


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_matches_emulation(arch) -> None:
    model = hobbit.compile(three_kernels(), target=f"cuda:{arch}")
    device = CudaModel(model)
    feeds = {"x": rand(*SHAPE, seed=2)}
    want = model.emulate(feeds)
    for _ in range(3):  # the graph replayed
        close_to(device.run(feeds), want)
    assert device.image in ("cubin", "ptx") and "graph" in repr(device)
    device.close()


@pytest.mark.parametrize("setting", ["HOBBIT_CUDA_GRAPH", "HOBBIT_CUDA_SYNC"])
def test_plain_launches(compiled, monkeypatch, setting) -> None:
    monkeypatch.setenv(setting, "0" if setting == "HOBBIT_CUDA_GRAPH" else "1")
    feeds = {"x": rand(*SHAPE, seed=3)}
    device = CudaModel(compiled)
    close_to(device.run(feeds), compiled.emulate(feeds))
    assert "launches" in repr(device)
    device.close()


def test_torch_tensors_in_and_out(compiled) -> None:
    pytest.importorskip("torch")
    torch_tensors_in_and_out(compiled, rand(*SHAPE, seed=4))


def test_exported_folder_loads_and_runs_on_the_device(tmp_path) -> None:
    """m.export(dir) then hobbit.load(dir) on a real GPU: the loaded model's outputs are the
    compiled model's (grid emulation) and onnxruntime's, and it reads the cubin or the PTX."""
    from tests.helpers import run_ort
    onnx_model = three_kernels()
    compiled = hobbit.compile(onnx_model, target="cuda")
    folder = tmp_path / "three_kernels"
    compiled.export(folder)
    loaded = hobbit.load(folder)
    feeds = {"x": rand(*SHAPE, seed=5)}
    got = loaded.run(feeds)
    close_to(got, compiled.emulate(feeds))
    close_to(got, run_ort(onnx_model, feeds))
    loaded.close()
    compiled.close()


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("graph", ["1", "0"])
def test_kernel_family_on_the_device(name, graph, monkeypatch) -> None:
    """Each family's model run on the device, replayed as a CUDA graph and launched one by one,
    within the family's kernel-test tolerance of onnxruntime (on TF32 / bf16 operands for the
    tensor-core families, whose instruction must be in the code)."""
    monkeypatch.setenv("HOBBIT_CUDA_GRAPH", graph)
    assert run_once(name) == []
