"""A strict stand-in for cuda.bindings.driver that runs on the CPU (tests/runtime/fake_gpu.py's
machinery under CUDA's names), for testing hobbit.runtime.cuda on machines with no GPU.

Besides the calls every GPU API shares, CUDA's own: devices by ordinal, their compute
capability, and the primary context, which must be current for any call that touches the
device (else CUDA_ERROR_INVALID_CONTEXT, as a real driver answers)."""

from __future__ import annotations

import enum
from typing import Any

from hobbit.runtime.cuda import CUDA_API
from tests.runtime import fake_gpu
from tests.runtime.fake_gpu import FakeGpuDriver, HostBuild, Refused


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUstream_flags(enum.IntEnum):
    CU_STREAM_DEFAULT = 0
    CU_STREAM_NON_BLOCKING = 1


class CUevent_flags(enum.IntEnum):
    CU_EVENT_DISABLE_TIMING = 2


class CUstreamCaptureMode(enum.IntEnum):
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1


class CUstream(int):
    pass


# The calls that need no current context: the rest touch the device through it.
WITHOUT_CONTEXT = frozenset({"init", "error_name", "error_string", "device_count", "device_get", "device_attribute",
                             "retain", "release", "set_current"})


class FakeDriver(FakeGpuDriver):
    api = CUDA_API
    CUresult, CUdevice_attribute, CUstream_flags = CUresult, CUdevice_attribute, CUstream_flags
    CUevent_flags, CUstreamCaptureMode, CUstream = CUevent_flags, CUstreamCaptureMode, CUstream
    Status = CUresult
    OWN_CALLS = {"cuDeviceGet": "device_get", "cuDeviceGetAttribute": "device_attribute",
                 "cuDevicePrimaryCtxRetain": "retain", "cuDevicePrimaryCtxRelease": "release",
                 "cuCtxSetCurrent": "set_current"}
    capture_mode = CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

    def __init__(self, *builds: HostBuild, capability: tuple[int, int] = (9, 0), devices: int = 1):
        super().__init__(*builds, devices=devices)
        self.capability = capability
        self.contexts: dict[int, int] = {}  # primary context -> its device
        self.retained: dict[int, int] = {}  # device -> retain count
        self.current: int | None = None

    def _check_ready(self, role: str) -> None:
        if role not in WITHOUT_CONTEXT and self.current not in self.contexts:
            raise Refused("invalid_context", f"{role} with no current context")

    def _device_ok(self, device: int) -> None:
        if not 0 <= int(device) < self.devices:
            raise Refused("invalid_device", f"device {device}")

    def _device_get(self, ordinal: int) -> tuple:
        self._device_ok(ordinal)
        return (int(ordinal),)

    def _device_attribute(self, attribute: CUdevice_attribute, device: int) -> tuple:
        self._device_ok(device)
        major = attribute == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return (self.capability[0] if major else self.capability[1],)

    def _retain(self, device: int) -> tuple:
        self._device_ok(device)
        context = next((c for c, d in self.contexts.items() if d == device), None) or self._handle()
        self.contexts[context] = device
        self.retained[device] = self.retained.get(device, 0) + 1
        return (context,)

    def _release(self, device: int) -> tuple:
        if not self.retained.get(device):
            raise Refused("invalid_context", f"release of device {device}'s primary context, not retained")
        self.retained[device] -= 1
        if not self.retained[device]:
            self.contexts = {c: d for c, d in self.contexts.items() if d != device}
        return ()

    def _set_current(self, context: int) -> tuple:
        if context not in self.contexts:
            raise Refused("invalid_context", f"context {context}")
        self.current = context
        return ()


def install(monkeypatch: Any) -> FakeDriver:
    """A FakeDriver in place of cuda-python for every GpuModel.run (each model's host kernels
    are built for it when its device side is opened)."""
    from hobbit.runtime import cuda
    return fake_gpu.install(monkeypatch, cuda, "driver_module", "CudaModel", FakeDriver())


