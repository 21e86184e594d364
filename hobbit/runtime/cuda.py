"""Running a GpuModel on an NVIDIA GPU through the CUDA driver API (cuda-python's
cuda.bindings.driver).

The driver API rather than the runtime: a cubin or PTX module, a few allocations and a
list of launches is all a compiled model needs, and the driver loads PTX itself (its JIT)
where no cubin for the device was built. What every GPU API shares (memory, parameter
arrays, the graph, feeds and outputs) is hobbit.runtime.gpu_runtime's; here is CUDA's
table of call names and what is CUDA's own: the device's primary context, made current
for each run, and the choice of image (cubin or PTX) by compute capability.

Settings: HOBBIT_CUDA_DEVICE (the device ordinal, default 0); HOBBIT_CUDA_GRAPH=0
launches the kernels one by one instead of replaying a CUDA graph; HOBBIT_CUDA_SYNC=1
also synchronizes after every kernel, so that a fault is reported with the kernel that
caused it (slow; for debugging)."""

from __future__ import annotations

from typing import Any

from hobbit.errors import DeviceError, import_optional
from hobbit.runtime.gpu_runtime import STILL_WORKS, DriverApi, GpuRuntime

CUDA_API = DriverApi(
    vendor="CUDA", driver="NVIDIA driver", init="cuInit", device_count="cuDeviceGetCount",
    load="cuModuleLoadData", unload="cuModuleUnload", get_function="cuModuleGetFunction", launch="cuLaunchKernel",
    malloc="cuMemAlloc", free="cuMemFree", htod="cuMemcpyHtoD", htod_async="cuMemcpyHtoDAsync", dtoh="cuMemcpyDtoH",
    dtoh_async="cuMemcpyDtoHAsync", dtod_async="cuMemcpyDtoDAsync", stream_create="cuStreamCreate",
    stream_destroy="cuStreamDestroy", synchronize="cuStreamSynchronize", event_create="cuEventCreate",
    event_destroy="cuEventDestroy", event_record="cuEventRecord", wait_event="cuStreamWaitEvent",
    begin_capture="cuStreamBeginCapture", end_capture="cuStreamEndCapture", instantiate="cuGraphInstantiate",
    graph_launch="cuGraphLaunch", graph_destroy="cuGraphDestroy", exec_destroy="cuGraphExecDestroy",
    error_name="cuGetErrorName", error_string="cuGetErrorString")


def driver_module() -> Any:
    """cuda.bindings.driver, or a DeviceError saying how to install it (tests put a fake here)."""
    return import_optional("cuda.bindings.driver", lambda exc: DeviceError(
        f"running a GPU model needs cuda-python (the CUDA driver's Python bindings), which is not installed: "
        f"pip install 'hobbit[cuda]' ({STILL_WORKS}): {exc}"))


def arch_capability(arch: str) -> tuple[int, int]:
    """"sm_90" -> (9, 0), "sm_100" -> (10, 0)."""
    digits = arch.removeprefix("sm_").rstrip("af")
    return int(digits[:-1]), int(digits[-1])


def choose_image(arch: str, capability: tuple[int, int], has_cubin: bool) -> str:
    """"cubin" or "ptx": which of the model's images a device of `capability` can load.
    A cubin runs on devices of its major version and at least its minor one; PTX is
    compiled by the driver for any device at least as new as its target. Neither: DeviceError."""
    built = arch_capability(arch)
    if has_cubin and capability[0] == built[0] and capability[1] >= built[1]:
        return "cubin"
    if capability >= built:
        return "ptx"
    raise DeviceError(f"the model was compiled for {arch} (compute capability {built[0]}.{built[1]}), which this "
                      f"GPU (compute capability {capability[0]}.{capability[1]}) cannot run: compile it for this GPU "
                      f"with target='cuda:sm_{capability[0]}{capability[1]}' (if hobbit knows that arch) or older")


class CudaModel(GpuRuntime):
    """A GpuModel on one NVIDIA GPU (hobbit.runtime.gpu_runtime's GpuRuntime, CUDA's calls)."""

    api = CUDA_API

    def __init__(self, gpu_model: Any):
        self._context = self._device = None
        super().__init__(gpu_model, driver_module())

    def _success(self) -> Any:
        return self.d.CUresult.CUDA_SUCCESS

    def _open_device(self, ordinal: int) -> None:
        self._device = self._call("cuDeviceGet", ordinal)
        self.image = choose_image(self.model.target.arch, self._capability(), self.model.cubin is not None)
        self._context = self._call("cuDevicePrimaryCtxRetain", self._device)
        self._opened = True
        self._call("cuCtxSetCurrent", self._context)

    def _make_current(self) -> None:
        self._call("cuCtxSetCurrent", self._context)

    def _load_module(self) -> None:
        """The cubin, or the PTX for the driver's JIT; a cubin the driver refuses (one from a
        newer ptxas than the driver knows) falls back to the PTX."""
        if self.image == "cubin":
            try:
                self._module = self._call("cuModuleLoadData", self.model.cubin, what=" (the cubin)")
                return
            except DeviceError:
                self.image = "ptx"  # choose_image picked the cubin, so the device is at least the PTX's target
        self._module = self._call("cuModuleLoadData", self.model.device_code.encode() + b"\0",
                                  what=f" (the PTX for {self.model.target.arch}, compiled by the driver)")

    def _capability(self) -> tuple[int, int]:
        attribute = self.d.CUdevice_attribute
        return tuple(self._call("cuDeviceGetAttribute", which, self._device)
                     for which in (attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                   attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))

    def _stream_flags(self) -> Any:
        return self.d.CUstream_flags.CU_STREAM_NON_BLOCKING.value

    def _event_flags(self) -> Any:
        return self.d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value

    def _capture_mode(self) -> Any:
        return self.d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

    def _producer_stream(self, stream: int) -> Any:
        # 1: the legacy default stream (0 is ambiguous; read as that too), 2: per-thread: CUDA's own handles.
        return self.d.CUstream(stream or 1)

    def _current_steps(self) -> list[tuple[str, Any]]:
        return [("cuCtxSetCurrent", self._context)]

    def _release_steps(self) -> list[tuple[str, Any]]:
        steps = [("cuDevicePrimaryCtxRelease", self._device)]
        self._context = None
        return steps
