"""hobbit.runtime.cuda without a GPU, what is CUDA's own (what the CUDA and HIP runtimes
share is tested once per API in test_gpu_runtime.py): the errors where there is no driver
or cuda-python, the choice of image (cubin or PTX) and the fallback to PTX, the primary
context the fake driver (tests/runtime/fake_cuda.py) requires as a driver does, producers'
streams as CUDA's, and DLPack inputs on a CUDA device."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import hobbit
from hobbit.errors import DeviceError
from hobbit.runtime import cuda
from hobbit.runtime.cuda import CudaModel, choose_image
from hobbit.runtime.device_arrays import DL_CUDA, device_view, from_dlpack_capsule
from tests.helpers import rand, run_ort
from tests.runtime import fake_gpu
from tests.runtime.fake_cuda import CUresult, FakeDriver
from tests.runtime.fake_gpu import DlpackOnDevice, OnDevice

SHAPE = (16, 257)  # 4112 elements: more than one block


@pytest.fixture(scope="module")
def model():
    onnx_model = fake_gpu.three_kernels(SHAPE)
    return onnx_model, hobbit.compile(onnx_model, target="cuda")


@pytest.fixture
def fake(monkeypatch, model):
    driver = FakeDriver(fake_gpu.host_build(model[1]))
    monkeypatch.setattr(cuda, "driver_module", lambda: driver)
    for name in ("HOBBIT_CUDA_DEVICE", "HOBBIT_CUDA_GRAPH", "HOBBIT_CUDA_SYNC"):
        monkeypatch.delenv(name, raising=False)
    return driver


def test_missing_cuda_python_says_which_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    monkeypatch.setitem(sys.modules, "cuda", None)
    with pytest.raises(DeviceError, match=r"pip install 'hobbit\[cuda\]'"):
        cuda.driver_module()


def test_no_device(fake, model) -> None:
    fake.fail["cuInit"] = CUresult.CUDA_ERROR_NO_DEVICE
    with pytest.raises(DeviceError, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        CudaModel(model[1])


def test_the_cubin_where_the_device_runs_it(fake, model) -> None:
    device = CudaModel(model[1])
    assert device.image == "cubin" and fake.loaded == [model[1].cubin] and "sm_90 cubin" in repr(device)
    device.close()
    assert fake.names()[-1] == "cuDevicePrimaryCtxRelease" and not fake.contexts


def test_refused_cubin_falls_back_to_ptx(fake, model) -> None:
    compiled = model[1]
    fake.fail["cuModuleLoadData"] = CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU
    with pytest.raises(DeviceError, match=r"cuModuleLoadData failed \(the PTX for sm_90"):
        CudaModel(compiled)
    assert len([c for c in fake.names() if c == "cuModuleLoadData"]) == 2
    assert fake.names()[-1] == "cuDevicePrimaryCtxRelease"  # the context taken is given back
    fake.fail.clear()
    fake.capability = (10, 0)
    device = CudaModel(compiled)
    assert device.image == "ptx" and fake.loaded[-1] == compiled.device_code.encode() + b"\0"


def test_choose_image() -> None:
    assert choose_image("sm_90", (9, 0), True) == "cubin"
    assert choose_image("sm_80", (8, 6), True) == "cubin"
    assert choose_image("sm_90", (9, 0), False) == "ptx"
    assert choose_image("sm_80", (9, 0), True) == "ptx"
    with pytest.raises(DeviceError, match=r"compiled for sm_90.*compute capability 8\.0"):
        choose_image("sm_90", (8, 0), True)


def test_calls_need_init_and_a_current_context(fake) -> None:
    assert fake.cuMemAlloc(64) == (CUresult.CUDA_ERROR_NOT_INITIALIZED,)
    fake.cuInit(0)
    assert fake.cuMemAlloc(64) == (CUresult.CUDA_ERROR_INVALID_CONTEXT,)
    _, context = fake.cuDevicePrimaryCtxRetain(0)
    fake.cuCtxSetCurrent(context)
    status, pointer = fake.cuMemAlloc(64)
    assert status == CUresult.CUDA_SUCCESS and fake.cuMemFree(pointer) == (CUresult.CUDA_SUCCESS,)
    assert fake.cuMemFree(pointer) == (CUresult.CUDA_ERROR_INVALID_VALUE,)  # twice
    assert fake.cuDevicePrimaryCtxRelease(0) == (CUresult.CUDA_SUCCESS,)
    assert fake.cuMemAlloc(64) == (CUresult.CUDA_ERROR_INVALID_CONTEXT,)  # released: no context any more


def test_producer_streams_are_cuda_streams(fake, model) -> None:
    """__cuda_array_interface__'s 0 (ambiguous) is read as 1, the legacy default stream."""
    device = CudaModel(model[1])
    for stream in (0, 77):
        device.run({"x": OnDevice(rand(*SHAPE), fake, stream=stream)})
    assert fake.recorded_streams == [1, 77] and all(isinstance(s, fake.CUstream) for s in fake.recorded_streams)
    assert ("cuEventRecord", (device._event, 77)) in fake.calls


def test_dlpack_views(fake) -> None:
    x = rand(4, 6)
    view = from_dlpack_capsule(x.__dlpack__())
    assert (view.pointer, view.shape, view.dtype, view.contiguous) == (x.ctypes.data, (4, 6), np.float32, True)
    strided = from_dlpack_capsule(x[:, ::2].__dlpack__())
    assert strided.shape == (4, 3) and not strided.contiguous
    ints = np.arange(6, dtype=np.int64)[2:]
    assert from_dlpack_capsule(ints.__dlpack__()).pointer == ints.ctypes.data
    assert device_view(x, 5) is None
    producer = DlpackOnDevice(x, fake, DL_CUDA)
    assert device_view(producer, 5).pointer == x.ctypes.data and producer.streams == [5]
    assert device_view(DlpackOnDevice(x, fake, 10), 5) is None  # ROCm memory: not CUDA's to copy


def test_dlpack_input_runs(fake, model) -> None:
    onnx_model, compiled = model
    x = rand(*SHAPE, seed=7)
    got = CudaModel(compiled).run({"x": DlpackOnDevice(x, fake, DL_CUDA)})
    assert "cuMemcpyDtoDAsync" in fake.names() and "cuEventRecord" not in fake.names()  # ordered by __dlpack__
    for g, want in zip(got, run_ort(onnx_model, {"x": x})):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
