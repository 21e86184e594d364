"""hobbit.runtime.cuda without a GPU: the errors where there is no driver or cuda-python,
and, through a fake driver whose "device" is host memory and whose launches run the
kernels built for the host (tests/runtime/fake_cuda.py), the launch list turned into
driver calls: grids, blocks, parameter pointers from places, the graph, copies, errors."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.backend.gpu.launch import Launch
from hobbit.errors import ConfigError, DeviceError, InputError
from hobbit.plan.memory import Place
from hobbit.runtime import cuda
from hobbit.runtime.cuda import CudaModel, choose_image
from hobbit.runtime.device_arrays import DeviceArray, device_view, from_dlpack_capsule
from tests.helpers import make_model, rand, run_ort
from tests.runtime import fake_cuda
from tests.runtime.fake_cuda import CUresult, FakeDriver, raising_init

SHAPE = (16, 257)  # 4112 elements: more than one block


@pytest.fixture(scope="module")
def model():
    """Three kernels: an arena intermediate read twice, a weight, two outputs (one read back)."""
    nodes = [helper.make_node("Exp", ["x"], ["t"]), helper.make_node("Add", ["t", "b"], ["y1"]),
             helper.make_node("Mul", ["t", "t"], ["m"]), helper.make_node("Sub", ["m", "y1"], ["y2"])]
    onnx_model = make_model(nodes, {"x": rand(*SHAPE)}, ["y1", "y2"], {"b": rand(SHAPE[1], seed=1)})
    compiled = hobbit.compile(onnx_model, target="cuda")
    return onnx_model, compiled


@pytest.fixture(scope="module")
def host_kernels(model):
    return fake_cuda.host_kernels(model[1])


@pytest.fixture
def fake(monkeypatch, host_kernels):
    driver = FakeDriver(host_kernels)
    monkeypatch.setattr(cuda, "driver_module", lambda: driver)
    for name in ("HOBBIT_CUDA_DEVICE", "HOBBIT_CUDA_GRAPH", "HOBBIT_CUDA_SYNC"):
        monkeypatch.delenv(name, raising=False)
    return driver


def test_run_here_says_what_is_missing_or_matches_emulation(model) -> None:
    """On this machine (no driver, or no cuda-python) run() is a DeviceError that says what
    is missing and what still works; on a machine with a GPU it gives emulate()'s results."""
    onnx_model, compiled = model
    feeds = {"x": rand(*SHAPE, seed=3)}
    fresh = replace(compiled, _device=None, _emulator=None)
    try:
        got = fresh.run(feeds)
    except DeviceError as exc:
        assert "emulate() work without it" in str(exc)
        assert "NVIDIA driver" in str(exc) or "hobbit[cuda]" in str(exc) or "cuInit" in str(exc)
        return
    for g, e in zip(got, fresh.emulate(feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_missing_cuda_python_says_which_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    monkeypatch.setitem(sys.modules, "cuda", None)
    with pytest.raises(DeviceError, match=r"pip install 'hobbit\[cuda\]'"):
        cuda.driver_module()


def test_missing_driver_library_is_a_device_error(fake, model) -> None:
    fake.cuInit = raising_init(RuntimeError('"cuda" is an NVIDIA driver library and can only be found ...'))
    with pytest.raises(DeviceError, match="no NVIDIA driver was found.*emulate"):
        CudaModel(model[1])


def test_no_device(fake, model) -> None:
    fake.fail["cuInit"] = CUresult.CUDA_ERROR_NO_DEVICE
    with pytest.raises(DeviceError, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        CudaModel(model[1])


def test_device_ordinal(fake, model, monkeypatch) -> None:
    monkeypatch.setenv("HOBBIT_CUDA_DEVICE", "1")
    with pytest.raises(DeviceError, match="HOBBIT_CUDA_DEVICE=1, but the driver sees 1"):
        CudaModel(model[1])
    monkeypatch.setenv("HOBBIT_CUDA_DEVICE", "gpu0")
    with pytest.raises(ConfigError, match="HOBBIT_CUDA_DEVICE"):
        CudaModel(model[1])


def test_runs_the_launch_list_as_a_graph(fake, model) -> None:
    onnx_model, compiled = model
    device = CudaModel(compiled)
    assert device.image == "cubin" and fake.loaded == [compiled.cubin]
    feeds = {"x": rand(*SHAPE, seed=4)}
    for _ in range(2):
        fake.launched.clear()
        got = device.run(feeds)
        assert [c for c in fake.names() if c.startswith("cuLaunch")].count("cuLaunchKernel") == len(compiled.launches)
        for g, want in zip(got, run_ort(onnx_model, feeds)):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
        assert len(fake.launched) == len(compiled.launches)
    assert fake.names().count("cuGraphLaunch") == 2 and fake.names().count("cuMemcpyHtoD") == 1  # weights once
    for (kernel, grid, block, shared, pointers), launch in zip(fake.launched, compiled.launches):
        assert (kernel, grid, block, shared) == (launch.kernel, launch.grid, (launch.threads, 1, 1), 0)
        assert pointers == [device.pointer(place) for place in launch.args]
    assert fake.launched[0][1][0] > 1
    first = compiled.launches[0].args
    assert first[0].kind == "input" and fake.launched[0][4][0] == device.inputs[0]
    assert first[1].kind == "arena" and fake.launched[0][4][1] == device.arena + first[1].index
    device.close()


def test_plain_launches_when_graphs_are_off(fake, model, monkeypatch) -> None:
    monkeypatch.setenv("HOBBIT_CUDA_GRAPH", "0")
    onnx_model, compiled = model
    device = CudaModel(compiled)
    feeds = {"x": rand(*SHAPE, seed=5)}
    got = device.run(feeds)
    assert "cuStreamBeginCapture" not in fake.names() and "cuGraphLaunch" not in fake.names()
    for g, want in zip(got, run_ort(onnx_model, feeds)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_pointers_from_places_with_offsets(fake, model) -> None:
    """Every kind of place, offsets included, in a launch list made up for the purpose."""
    compiled = model[1]
    kernel = compiled.launches[0].kernel
    places = (Place("input", 0, 0), Place("arena", 64, 128), Place("const", 0, 4), Place("output", 1, 32))
    made_up = replace(compiled, launches=[Launch(kernel, "n", "Exp", (3, 2, 1), 128, 0, places)], _device=None)
    fake.kernels = {kernel: (lambda *pointers: None, len(places))}
    device = CudaModel(made_up)
    device.run({"x": rand(*SHAPE)})
    _, grid, block, _, pointers = fake.launched[-1]
    assert grid == (3, 2, 1) and block == (128, 1, 1)
    assert pointers == [device.inputs[0], device.arena + 192, device.weights + 4, device.outputs[1] + 32]


def test_launch_failure_names_the_kernel(fake, model) -> None:
    """A failing launch makes capture fail; the plain launches then name the kernel."""
    fake.fail["cuLaunchKernel"] = CUresult.CUDA_ERROR_LAUNCH_FAILED
    compiled = model[1]
    device = CudaModel(compiled)
    assert "cuGraphInstantiate" not in fake.names()
    launch = compiled.launches[0]
    with pytest.raises(DeviceError, match=rf"cuLaunchKernel failed for kernel '{launch.kernel}' \(node "
                                          rf"'{launch.node}'.*CUDA_ERROR_LAUNCH_FAILED"):
        device.run({"x": rand(*SHAPE)})


def test_fault_after_a_kernel_with_sync_each(fake, model, monkeypatch) -> None:
    monkeypatch.setenv("HOBBIT_CUDA_SYNC", "1")
    device = CudaModel(model[1])
    fake.fail["cuStreamSynchronize"] = CUresult.CUDA_ERROR_LAUNCH_FAILED
    with pytest.raises(DeviceError, match=f"cuStreamSynchronize failed after kernel '{model[1].launches[0].kernel}'"):
        device.run({"x": rand(*SHAPE)})


def test_failed_setup_names_the_call_and_frees_what_it_took(fake, model) -> None:
    fake.fail["cuModuleGetFunction"] = CUresult.CUDA_ERROR_NOT_FOUND
    with pytest.raises(DeviceError, match=f"cuModuleGetFunction failed for kernel '{model[1].launches[0].kernel}'"):
        CudaModel(model[1])
    assert fake.names()[-1] == "cuDevicePrimaryCtxRelease"
    fake.fail = {"cuMemAlloc": CUresult.CUDA_ERROR_OUT_OF_MEMORY}
    with pytest.raises(DeviceError, match=r"cuMemAlloc failed \(\d+ bytes for the weights\): CUDA_ERROR_OUT_OF_MEMORY"):
        CudaModel(model[1])


def test_refused_cubin_falls_back_to_ptx(fake, model) -> None:
    compiled = model[1]
    fake.fail["cuModuleLoadData"] = CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU
    with pytest.raises(DeviceError, match=r"cuModuleLoadData failed \(the PTX for sm_90"):
        CudaModel(compiled)
    assert len([c for c in fake.names() if c == "cuModuleLoadData"]) == 2
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


def test_close_frees_everything_once(fake, model) -> None:
    device = CudaModel(model[1])
    assert fake.memory
    device.close()
    device.close()
    assert not fake.memory
    assert fake.names().count("cuDevicePrimaryCtxRelease") == 1
    assert fake.names().count("cuGraphExecDestroy") == 1 and fake.names().count("cuModuleUnload") == 1


class OnDevice:
    """An array "on the GPU" by __cuda_array_interface__ (the fake's device memory is the host's)."""

    def __init__(self, array: np.ndarray, stream: int | None = None):
        self.array = array
        self.__cuda_array_interface__ = {"shape": array.shape, "typestr": array.dtype.str, "version": 3,
                                         "data": (array.ctypes.data, False), "stream": stream,
                                         "strides": None if array.flags.c_contiguous else array.strides}


def test_device_inputs_and_outputs(fake, model) -> None:
    onnx_model, compiled = model
    device = CudaModel(compiled)
    x = rand(*SHAPE, seed=6)
    got = device.run({"x": OnDevice(x, stream=77)}, device_outputs=True)
    assert "cuMemcpyHtoDAsync" not in fake.names() and "cuMemcpyDtoDAsync" in fake.names()
    assert ("cuEventRecord", (device._event, 77)) in fake.calls and "cuStreamWaitEvent" in fake.names()
    assert all(isinstance(g, DeviceArray) for g in got)
    assert [g.__cuda_array_interface__["data"][0] for g in got] == device.outputs
    for g, want in zip(got, run_ort(onnx_model, {"x": x})):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)


def test_device_input_checks(fake, model) -> None:
    device = CudaModel(model[1])
    wide = rand(SHAPE[0], 2 * SHAPE[1])
    with pytest.raises(InputError, match="strided view on the GPU"):
        device.run({"x": OnDevice(wide[:, ::2])})
    with pytest.raises(InputError, match="has dtype float64"):
        device.run({"x": OnDevice(np.zeros(SHAPE))})
    with pytest.raises(InputError, match=r"has shape \(2, 3\)"):
        device.run({"x": OnDevice(rand(2, 3))})
    with pytest.raises(InputError, match="no value for input 'x'"):
        device.run({})


class DlpackOnDevice:
    """DLPack's protocol saying "CUDA device 0", with a host capsule behind it."""

    def __init__(self, array: np.ndarray):
        self.array, self.streams = array, []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, stream: int | None = None) -> object:
        self.streams.append(stream)
        return self.array.__dlpack__()


def test_dlpack_views() -> None:
    x = rand(4, 6)
    view = from_dlpack_capsule(x.__dlpack__())
    assert (view.pointer, view.shape, view.dtype, view.contiguous) == (x.ctypes.data, (4, 6), np.float32, True)
    strided = from_dlpack_capsule(x[:, ::2].__dlpack__())
    assert strided.shape == (4, 3) and not strided.contiguous
    ints = np.arange(6, dtype=np.int64)[2:]
    assert from_dlpack_capsule(ints.__dlpack__()).pointer == ints.ctypes.data
    assert device_view(x, 5) is None
    producer = DlpackOnDevice(x)
    assert device_view(producer, 5).pointer == x.ctypes.data and producer.streams == [5]


def test_dlpack_input_runs(fake, model) -> None:
    onnx_model, compiled = model
    x = rand(*SHAPE, seed=7)
    got = CudaModel(compiled).run({"x": DlpackOnDevice(x)})
    assert "cuMemcpyDtoDAsync" in fake.names() and "cuEventRecord" not in fake.names()  # ordered by __dlpack__
    for g, want in zip(got, run_ort(onnx_model, {"x": x})):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


class ArgumentsChecked:
    """The fake, but every call is first made on the real cuda.bindings.driver, which
    converts its arguments before it finds there is no libcuda: a name it lacks or an
    argument it cannot convert fails the test, which the fake alone would not notice."""

    def __init__(self, fake: FakeDriver, real: object):
        self._fake, self._real = fake, real

    def __getattr__(self, name: str) -> object:
        target = getattr(self._fake, name)
        if not name.startswith("cu"):
            return target
        real = getattr(self._real, name)

        def call(*args: object) -> object:
            try:
                real(*[1 if isinstance(a, str) else a for a in args])  # kernel handles are names in the fake
            except (TypeError, ValueError, OverflowError) as exc:
                raise AssertionError(f"cuda.bindings.driver.{name} refused the runtime's arguments {args}: {exc}")
            except Exception:  # noqa: S110 - no driver: past the argument conversion, as wanted
                pass
            return target(*args)
        return call


def test_real_bindings_accept_the_runtime_calls(fake, model, monkeypatch) -> None:
    real = pytest.importorskip("cuda.bindings.driver")
    try:
        real.cuInit(0)
    except Exception:  # noqa: S110 - the expected case here: no driver
        pass
    else:
        pytest.skip("a CUDA driver is installed: the real calls would act")
    checked = ArgumentsChecked(fake, real)
    monkeypatch.setattr(cuda, "driver_module", lambda: checked)
    device = CudaModel(model[1])
    device.run({"x": OnDevice(rand(*SHAPE), stream=9)})
    device.run({"x": rand(*SHAPE)}, device_outputs=True)[0].numpy()
    device.close()
    assert {"cuLaunchKernel", "cuGraphLaunch", "cuMemcpyDtoDAsync", "cuEventRecord", "cuMemFree"} <= set(fake.names())
