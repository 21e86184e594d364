"""hobbit.runtime.gpu_runtime, the part the CUDA and HIP runtimes share, once per API: each
test runs a model compiled for the vendor through its strict fake driver
(tests/runtime/fake_cuda.py, fake_hip.py: "device" memory is host memory, launches run
the kernels built for the host), and checks the launch list turned into calls (grids,
blocks, parameter pointers from places, the graph or the plain launches, copies, device
inputs and outputs) against onnxruntime, the errors it names, and what the fake refuses,
as a driver would. What is one API's own is in test_cuda.py and test_hip.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import pytest

import hobbit
from hobbit.backend.gpu.launch import Launch
from hobbit.errors import ConfigError, DeviceError, InputError
from hobbit.plan.memory import Place
from hobbit.runtime import cuda, hip
from hobbit.runtime.device_arrays import DeviceArray
from tests.helpers import rand, run_ort
from tests.runtime import fake_gpu
from tests.runtime.fake_cuda import FakeDriver
from tests.runtime.fake_gpu import ArgumentsChecked, HostBuild, HostKernel, OnDevice, model_images
from tests.runtime.fake_hip import FakeHip

SHAPE = (16, 257)  # 4112 elements: more than one block


@dataclass(frozen=True)
class Vendor:
    target: str
    runtime: Any  # the runtime's module
    model_class: str
    factory: str  # the module's function returning the bindings, which the fake replaces
    fake: Callable[[HostBuild], fake_gpu.FakeGpuDriver]
    bindings: str  # what to import for the real bindings' argument check
    missing: tuple[str, ...]  # words one of which says what is missing where the device cannot run

    def open(self, gpu_model: Any) -> Any:
        return getattr(self.runtime, self.model_class)(gpu_model)


VENDORS = {"cuda": Vendor("cuda", cuda, "CudaModel", "driver_module", FakeDriver, "cuda.bindings.driver",
                          ("NVIDIA driver", "hobbit[cuda]", "cuInit")),
           "rocm": Vendor("rocm:gfx90a", hip, "HipModel", "hip_module",
                          lambda build: FakeHip(build, arch="gfx90a:xnack-"), "hip",
                          ("ROCm HIP runtime", "hobbit[rocm]", "hipInit"))}


@pytest.fixture(scope="module", params=sorted(VENDORS))
def vendor(request):
    return VENDORS[request.param]


@pytest.fixture(scope="module")
def model(vendor):
    onnx_model = fake_gpu.three_kernels(SHAPE)
    return onnx_model, hobbit.compile(onnx_model, target=vendor.target)


@pytest.fixture(scope="module")
def build(model):
    return fake_gpu.host_build(model[1])


@pytest.fixture
def fake(monkeypatch, vendor, build):
    driver = vendor.fake(build)
    monkeypatch.setattr(vendor.runtime, vendor.factory, lambda: driver)
    for what in ("DEVICE", "GRAPH", "SYNC"):
        monkeypatch.delenv(driver.api.setting(what), raising=False)
    return driver


def _status(fake: fake_gpu.FakeGpuDriver, code: str) -> str:
    return fake.STATUS[code].name


def _matches_ort(onnx_model, feeds, got) -> None:
    for g, want in zip(got, run_ort(onnx_model, feeds)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def _with_first(compiled, launch: Launch):
    return replace(compiled, launches=[launch] + compiled.launches[1:], _device=None)


def test_run_here_says_what_is_missing_or_matches_emulation(vendor, model) -> None:
    """On this machine (no driver, or no bindings) run() is a DeviceError that says what is
    missing and what still works; on a machine with the vendor's GPU it gives emulate()'s results."""
    compiled = replace(model[1], _device=None, _emulator=None)
    feeds = {"x": rand(*SHAPE, seed=3)}
    try:
        got = compiled.run(feeds)
    except DeviceError as exc:
        assert "emulate() work without it" in str(exc)
        assert any(words in str(exc) for words in vendor.missing), str(exc)
        return
    for g, e in zip(got, compiled.emulate(feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_missing_driver_library_is_a_device_error(vendor, fake, model) -> None:
    def init(flags: int) -> tuple:
        raise RuntimeError("the driver's library cannot be loaded")
    setattr(fake, fake.api.init, init)
    with pytest.raises(DeviceError, match=f"no {fake.api.driver} was found.*cannot be loaded.*emulate"):
        vendor.open(model[1])


def test_no_device_and_ordinal(vendor, fake, model, monkeypatch) -> None:
    api = fake.api
    fake.fail[api.init] = fake.STATUS["invalid_device"]
    with pytest.raises(DeviceError, match=f"{api.init} failed: {_status(fake, 'invalid_device')}"):
        vendor.open(model[1])
    fake.fail.clear()
    monkeypatch.setenv(api.setting("DEVICE"), "1")
    with pytest.raises(DeviceError, match=f"{api.setting('DEVICE')}=1, but the driver sees 1 {api.vendor} device"):
        vendor.open(model[1])
    monkeypatch.setenv(api.setting("DEVICE"), "gpu0")
    with pytest.raises(ConfigError, match=api.setting("DEVICE")):
        vendor.open(model[1])


def test_runs_the_launch_list_as_a_graph(vendor, fake, model) -> None:
    onnx_model, compiled = model
    device = vendor.open(compiled)
    assert fake.loaded == [model_images(compiled)[-1]] and "graph" in repr(device)  # the cubin, or the code object
    feeds = {"x": rand(*SHAPE, seed=4)}
    for _ in range(2):
        fake.launched.clear()
        _matches_ort(onnx_model, feeds, device.run(feeds))
        assert len(fake.launched) == len(compiled.launches)
    names, api = fake.names(), fake.api
    assert names.count(api.launch) == len(compiled.launches)  # captured once
    assert names.count(api.graph_launch) == 2 and names.count(api.htod) == 1  # the weights, once
    for (kernel, grid, block, shared, pointers), launch in zip(fake.launched, compiled.launches):
        assert (kernel, grid, block, shared) == (launch.kernel, launch.grid, (launch.threads, 1, 1), 0)
        assert pointers == [device.pointer(place) for place in launch.args]
    assert fake.launched[0][1][0] > 1
    first = compiled.launches[0].args
    assert first[0].kind == "input" and fake.launched[0][4][0] == device.inputs[0]
    assert first[1].kind == "arena" and fake.launched[0][4][1] == device.arena + first[1].index
    device.close()
    device.close()
    assert not fake.memory and not fake.streams and not fake.events and not fake.modules
    assert fake.names().count(api.exec_destroy) == 1 and fake.names().count(api.unload) == 1


def test_plain_launches_when_graphs_are_off(vendor, fake, model, monkeypatch) -> None:
    monkeypatch.setenv(fake.api.setting("GRAPH"), "0")
    onnx_model, compiled = model
    device = vendor.open(compiled)
    feeds = {"x": rand(*SHAPE, seed=5)}
    _matches_ort(onnx_model, feeds, device.run(feeds))
    assert fake.api.begin_capture not in fake.names() and fake.api.graph_launch not in fake.names()
    assert "launches" in repr(device)


def test_pointers_from_places_with_offsets(vendor, fake, model) -> None:
    """Every kind of place, offsets included, in a launch list made up for the purpose; the
    kernel gets the grid the launch passes, not the plan's."""
    compiled = model[1]
    kernel = compiled.launches[0].kernel
    places = (Place("input", 0, 0), Place("arena", 64, 128), Place("const", 0, 4), Place("output", 1, 32))
    made_up = replace(compiled, launches=[Launch(kernel, "n", "Exp", (3, 2, 1), 128, 0, places)], _device=None)
    ran = []
    fake.builds.append(HostBuild(model_images(compiled), {kernel: HostKernel(lambda *a: ran.append(a), 4, 128)}))
    device = vendor.open(made_up)
    device.run({"x": rand(*SHAPE)})
    _, grid, block, _, pointers = fake.launched[-1]
    assert grid == (3, 2, 1) and block == (128, 1, 1)
    assert pointers == [device.inputs[0], device.arena + 192, device.weights + 4, device.outputs[1] + 32]
    assert ran == [(*pointers, 3, 2, 1)]


def test_a_launch_runs_the_grid_it_passes(vendor, fake, model, monkeypatch) -> None:
    """One block where the plan wants many: only the first block's outputs are written."""
    monkeypatch.setenv(fake.api.setting("GRAPH"), "0")
    onnx_model, compiled = model
    first = compiled.launches[0]
    feeds = {"x": rand(*SHAPE, seed=8)}
    got = vendor.open(_with_first(compiled, replace(first, grid=(1, 1, 1)))).run(feeds)
    assert not np.allclose(got[0], run_ort(onnx_model, feeds)[0], rtol=1e-5, atol=1e-6)
    assert fake.launched[0][1] == (1, 1, 1)


def test_launch_failure_names_the_kernel(vendor, fake, model) -> None:
    """A failing launch makes capture fail; the plain launches then name the kernel."""
    api = fake.api
    fake.fail[api.launch] = fake.STATUS["launch_failed"]
    compiled = model[1]
    device = vendor.open(compiled)
    assert api.instantiate not in fake.names()
    launch = compiled.launches[0]
    with pytest.raises(DeviceError, match=rf"{api.launch} failed for kernel '{launch.kernel}' \(node "
                                          rf"'{launch.node}'.*{_status(fake, 'launch_failed')}"):
        device.run({"x": rand(*SHAPE)})


def test_fault_after_a_kernel_with_sync_each(vendor, fake, model, monkeypatch) -> None:
    api = fake.api
    monkeypatch.setenv(api.setting("SYNC"), "1")
    device = vendor.open(model[1])
    fake.fail[api.synchronize] = fake.STATUS["launch_failed"]
    with pytest.raises(DeviceError, match=f"{api.synchronize} failed after kernel '{model[1].launches[0].kernel}'"):
        device.run({"x": rand(*SHAPE)})


def test_failed_setup_names_the_call_and_frees_what_it_took(vendor, fake, model) -> None:
    api = fake.api
    fake.fail[api.get_function] = fake.STATUS["not_found"]
    with pytest.raises(DeviceError, match=f"{api.get_function} failed for kernel '{model[1].launches[0].kernel}'"):
        vendor.open(model[1])
    assert not fake.modules and not fake.streams
    fake.fail = {api.malloc: fake.STATUS["invalid_value"]}
    with pytest.raises(DeviceError, match=rf"{api.malloc} failed \(\d+ bytes for the weights\): "
                                          rf"{_status(fake, 'invalid_value')}"):
        vendor.open(model[1])
    assert not fake.modules and not fake.streams and not fake.events


@pytest.mark.parametrize("change, call, code, why", [
    (lambda la: replace(la, threads=2 * la.threads), "launch", "invalid_value", "compiled for"),
    (lambda la: replace(la, kernel="not_in_the_image"), "get_function", "not_found", "defines no kernel"),
    (lambda la: replace(la, args=la.args[:1] + (Place("arena", 1 << 40, 0),) + la.args[2:]), "launch",
     "launch_failed", "not device memory"),
])
def test_launch_list_the_image_does_not_fit_is_refused(vendor, fake, model, monkeypatch, change, call, code,
                                                       why) -> None:
    """A launch list that does not fit the image (a block the kernel was not compiled for,
    a kernel it lacks, a pointer outside device memory) fails as on a GPU, naming the kernel."""
    monkeypatch.setenv(fake.api.setting("GRAPH"), "0")
    launch = change(model[1].launches[0])
    name = getattr(fake.api, call)
    with pytest.raises(DeviceError, match=rf"{name} failed for kernel '{launch.kernel}'.*{_status(fake, code)}"):
        vendor.open(_with_first(model[1], launch)).run({"x": rand(*SHAPE)})
    assert why in fake.refusals[-1][1]


def test_launch_arguments_are_checked(vendor, fake, model) -> None:
    """The fake's launch call against the runtime's own handles, one argument wrong at a time."""
    device = vendor.open(model[1])
    function, slots = device._functions[0], device._params[0][1].ctypes.data
    threads = model[1].launches[0].threads

    def launch(**change: Any) -> str:
        args = dict(f=function, gx=2, gy=1, gz=1, bx=threads, by=1, bz=1, shared=0, stream=device._stream,
                    params=slots, extra=0) | change
        return getattr(fake, fake.api.launch)(*args.values())[0].name
    assert launch() == _status(fake, "success")
    assert launch(f=123456) == _status(fake, "invalid_handle")  # never obtained
    assert launch(shared=1024) == _status(fake, "invalid_value")  # the kernels' shared memory is static
    assert launch(by=2) == _status(fake, "invalid_value")
    assert launch(gx=0) == _status(fake, "invalid_value")
    assert launch(stream=device._event) == _status(fake, "invalid_handle")
    assert launch(params=0) == _status(fake, "invalid_value")
    getattr(fake, fake.api.unload)(device._module)
    assert launch() == _status(fake, "invalid_handle")  # its module is gone
    device._module = None
    with pytest.raises(TypeError, match="expected bytes"):  # as the real bindings
        getattr(fake, fake.api.get_function)(device._module, model[1].launches[0].kernel)


def test_unknown_calls_are_not_answered(fake) -> None:
    with pytest.raises(AttributeError, match="does not implement 'cudaDeviceSynchronize'"):
        fake.cudaDeviceSynchronize()
    assert getattr(fake, fake.api.malloc)(64)[0].name == _status(fake, "not_initialized")


def test_device_inputs_and_outputs(vendor, fake, model) -> None:
    onnx_model, compiled = model
    device = vendor.open(compiled)
    x = rand(*SHAPE, seed=6)
    got = device.run({"x": OnDevice(x, fake, stream=77)}, device_outputs=True)
    names, api = fake.names(), fake.api
    assert api.htod_async not in names and api.dtod_async in names and api.wait_event in names
    assert fake.recorded_streams == [77]
    assert all(isinstance(g, DeviceArray) for g in got)
    assert [g.__cuda_array_interface__["data"][0] for g in got] == device.outputs
    _matches_ort(onnx_model, {"x": x}, [g.numpy() for g in got])


def test_device_input_checks(vendor, fake, model) -> None:
    device = vendor.open(model[1])
    wide = rand(SHAPE[0], 2 * SHAPE[1])
    with pytest.raises(InputError, match="strided view on the GPU"):
        device.run({"x": OnDevice(wide[:, ::2], fake)})
    with pytest.raises(InputError, match="has dtype float64"):
        device.run({"x": OnDevice(np.zeros(SHAPE), fake)})
    with pytest.raises(InputError, match=r"has shape \(2, 3\)"):
        device.run({"x": OnDevice(rand(2, 3), fake)})
    with pytest.raises(InputError, match="no value for input 'x'"):
        device.run({})


def test_real_bindings_accept_the_runtime_calls(vendor, fake, model, monkeypatch) -> None:
    """Every call the runtime makes, made first on the real bindings (cuda-python, hip-python),
    which have no driver library here: they convert the arguments, then fail to load it."""
    real = pytest.importorskip(vendor.bindings)
    real = getattr(real, "hip", real)  # hip-python: `from hip import hip`
    fake_gpu.no_driver(real, fake.api.init)
    monkeypatch.setattr(vendor.runtime, vendor.factory, lambda: ArgumentsChecked(fake, real))
    device = vendor.open(model[1])
    device.run({"x": OnDevice(rand(*SHAPE), fake, stream=9)})
    device.run({"x": rand(*SHAPE)}, device_outputs=True)[0].numpy()
    device.close()
    api = fake.api
    assert {api.launch, api.graph_launch, api.dtod_async, api.event_record, api.free} <= set(fake.names())
    assert not fake.refusals
