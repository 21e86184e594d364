"""A strict stand-in for hip-python's `hip.hip` that runs on the CPU (tests/runtime/fake_gpu.py's
machinery under HIP's names), for testing hobbit.runtime.hip on machines with no AMD GPU.

Besides the calls every GPU API shares, HIP's own: hipSetDevice (the calling thread's
device) and hipGetDeviceProperties, whose gcnArchName says the device's arch ("gfx90a"
with its target features). Code objects' kernels are read from their `.kd` symbols."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from hobbit.runtime.hip import HIP_API
from tests.runtime import fake_gpu
from tests.runtime.fake_gpu import FakeGpuDriver, HostBuild, Refused


class hipError_t(enum.IntEnum):
    hipSuccess = 0
    hipErrorInvalidValue = 1
    hipErrorNotInitialized = 3
    hipErrorNoDevice = 100
    hipErrorInvalidDevice = 101
    hipErrorInvalidImage = 200
    hipErrorInvalidContext = 201
    hipErrorNoBinaryForGpu = 209
    hipErrorInvalidHandle = 400
    hipErrorNotFound = 500
    hipErrorLaunchFailure = 719
    hipErrorStreamCaptureUnsupported = 900


class hipStreamCaptureMode(enum.IntEnum):
    hipStreamCaptureModeGlobal = 0
    hipStreamCaptureModeThreadLocal = 1


@dataclass
class hipDeviceProp_t:
    gcnArchName: str


class FakeHip(FakeGpuDriver):
    api = HIP_API
    hipError_t, hipStreamCaptureMode = hipError_t, hipStreamCaptureMode
    hipStreamNonBlocking, hipEventDisableTiming = 1, 2
    Status = hipError_t
    OWN_CALLS = {"hipSetDevice": "set_device", "hipGetDeviceProperties": "properties"}
    capture_mode = hipStreamCaptureMode.hipStreamCaptureModeThreadLocal

    def __init__(self, *builds: HostBuild, arch: str = "gfx90a:sramecc+:xnack-", devices: int = 1):
        super().__init__(*builds, devices=devices)
        self.arch = arch
        self.current: int | None = None

    def _device_ok(self, ordinal: int) -> None:
        if not 0 <= int(ordinal) < self.devices:
            raise Refused("invalid_device", f"device {ordinal}")

    def _set_device(self, ordinal: int) -> tuple:
        self._device_ok(ordinal)
        self.current = int(ordinal)
        return ()

    def _properties(self, ordinal: int) -> tuple:
        self._device_ok(ordinal)
        return (hipDeviceProp_t(self.arch),)


def install(monkeypatch: Any, arch: str = "gfx942:sramecc+:xnack-") -> FakeHip:
    """A FakeHip in place of hip-python for every GpuModel.run of a rocm model (each model's
    host kernels are built for it when its device side is opened)."""
    from hobbit.runtime import hip
    return fake_gpu.install(monkeypatch, hip, "hip_module", "HipModel", FakeHip(arch=arch))
