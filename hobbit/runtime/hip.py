"""Running a GpuModel on an AMD GPU through HIP's module API (hip-python's `from hip import hip`).

The AMDGPU back end makes a code object (.hsaco) for one gfx arch; hipModuleLoadData loads
it, hipModuleGetFunction finds each kernel by name (its `<kernel>.kd` descriptor) and
hipModuleLaunchKernel takes the same kernelParams as CUDA's cuLaunchKernel: an array of
pointers to the arguments. So everything but a few constants and the device itself is
hobbit.runtime.gpu_runtime's, shared with the CUDA runtime. HIP has no contexts to hold:
hipSetDevice makes the model's device current for the calling thread, at setup and for
each run. A code object holds machine code for one arch only (there is no PTX to fall back
on), so a device of another arch is refused at setup, before anything is loaded.

Arrays already on the GPU come in by `__cuda_array_interface__` (PyTorch's ROCm build, CuPy
on ROCm and hip-python's own device arrays expose it, with HIP pointers and streams) or by
DLPack's ROCm device type, as in the CUDA runtime.

Settings: HOBBIT_HIP_DEVICE (the device ordinal, default 0); HOBBIT_HIP_GRAPH=0 launches
the kernels one by one instead of replaying a HIP graph; HOBBIT_HIP_SYNC=1 also
synchronizes after every kernel, so that a fault is reported with the kernel that caused it."""

from __future__ import annotations

from typing import Any

from hobbit.errors import DeviceError, import_optional
from hobbit.runtime.device_arrays import ROCM_DLPACK_DEVICES, DeviceView, device_view
from hobbit.runtime.gpu_runtime import STILL_WORKS, DriverApi, GpuRuntime

HIP_API = DriverApi(
    vendor="HIP", driver="ROCm HIP runtime", init="hipInit", device_count="hipGetDeviceCount",
    load="hipModuleLoadData", unload="hipModuleUnload", get_function="hipModuleGetFunction",
    launch="hipModuleLaunchKernel", malloc="hipMalloc", free="hipFree", htod="hipMemcpyHtoD",
    htod_async="hipMemcpyHtoDAsync", dtoh="hipMemcpyDtoH", dtoh_async="hipMemcpyDtoHAsync",
    dtod_async="hipMemcpyDtoDAsync", stream_create="hipStreamCreateWithFlags", stream_destroy="hipStreamDestroy",
    synchronize="hipStreamSynchronize", event_create="hipEventCreateWithFlags", event_destroy="hipEventDestroy",
    event_record="hipEventRecord", wait_event="hipStreamWaitEvent", begin_capture="hipStreamBeginCapture",
    end_capture="hipStreamEndCapture", instantiate="hipGraphInstantiateWithFlags", graph_launch="hipGraphLaunch",
    graph_destroy="hipGraphDestroy", exec_destroy="hipGraphExecDestroy", error_name="hipGetErrorName",
    error_string="hipGetErrorString")


def hip_module() -> Any:
    """hip-python's `hip.hip`, or a DeviceError saying how to install it (tests put a fake here)."""
    def missing(exc: ImportError) -> DeviceError:
        return DeviceError(f"running a ROCm GPU model needs hip-python (HIP's Python bindings), which is not "
                           f"installed: pip install 'hobbit[rocm]', or the hip-python matching your ROCm version "
                           f"({STILL_WORKS}): {exc}")
    package = import_optional("hip", missing)
    module = getattr(package, "hip", None)  # hip-python 7.x+ binds it on the package; older ones are a submodule
    return module if module is not None else import_optional("hip.hip", missing)


def device_arch(gcn_arch_name: str) -> str:
    """hipDeviceProp_t.gcnArchName without its target features: "gfx90a:sramecc+:xnack-" -> "gfx90a"."""
    return gcn_arch_name.split(":")[0].strip()


class HipModel(GpuRuntime):
    """A GpuModel on one AMD GPU (hobbit.runtime.gpu_runtime's GpuRuntime, HIP's calls)."""

    api = HIP_API

    def __init__(self, gpu_model: Any):
        self._ordinal = 0
        super().__init__(gpu_model, hip_module())

    def _success(self) -> Any:
        return self.d.hipError_t.hipSuccess

    def _open_device(self, ordinal: int) -> None:
        """The device, refused unless its arch is the code object's (features such as xnack
        aside: hobbit builds for neither setting, which runs on both)."""
        self._ordinal = ordinal
        properties = self._call("hipGetDeviceProperties", ordinal)
        arch = device_arch(str(properties.gcnArchName))
        if arch != self.model.target.arch:
            raise DeviceError(f"the model was compiled for {self.model.target.arch}, and this GPU is {arch} "
                              f"(HIP device {ordinal}): an AMDGPU code object runs on its own arch only; compile it "
                              f"with target='rocm:{arch}' (if hobbit knows that arch)")
        self._call("hipSetDevice", ordinal)
        self._opened = True
        self.image = "hsaco"

    def _make_current(self) -> None:
        self._call("hipSetDevice", self._ordinal)

    def _load_module(self) -> None:
        code = self.model.device_code
        if not isinstance(code, bytes):
            raise DeviceError(f"the model holds no AMDGPU code object (its device code is "
                              f"{type(code).__name__}); compile it with target='rocm:<gfx arch>'")
        self._module = self._call("hipModuleLoadData", code, what=f" (the code object for {self.model.target.arch})")

    def _stream_flags(self) -> Any:
        return self.d.hipStreamNonBlocking

    def _event_flags(self) -> Any:
        return self.d.hipEventDisableTiming

    def _capture_mode(self) -> Any:
        return self.d.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal

    def _producer_stream(self, stream: int) -> Any:
        # __cuda_array_interface__'s 1 (legacy default stream; 0 read as that too) is HIP's null
        # stream 0; 2 is hipStreamPerThread's own value; anything else is a hipStream_t.
        return 0 if stream in (0, 1) else stream

    def _device_view(self, value: Any) -> DeviceView | None:
        return device_view(value, int(self._stream), ROCM_DLPACK_DEVICES)

    def _current_steps(self) -> list[tuple[str, Any]]:
        return [("hipSetDevice", self._ordinal)]
