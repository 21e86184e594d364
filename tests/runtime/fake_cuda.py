"""A stand-in for cuda.bindings.driver that runs on the CPU, for testing hobbit.runtime.cuda
on machines with no GPU.

It keeps cuda-python's calling convention (every function returns a tuple whose first
item is a CUresult) and records each call. "Device memory" is host memory: cuMemAlloc
hands out the addresses of numpy buffers and the copies are memmoves, so a kernel
launch can be carried out by the same kernel built for the host (the grid emulation's
`<kernel>.grid` functions) at the pointers cuLaunchKernel's kernelParams hold. A run
through the fake is then a real check of the runtime's parameter arrays: wrong pointers
give wrong outputs (or a crash). Stream capture records launches and cuGraphLaunch
replays them. `fail[name] = CUresult` makes that call fail."""

from __future__ import annotations

import ctypes
import enum
from typing import Any, Callable

import numpy as np


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719


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


OK = CUresult.CUDA_SUCCESS


class FakeDriver:
    CUresult, CUdevice_attribute, CUstream_flags = CUresult, CUdevice_attribute, CUstream_flags
    CUevent_flags, CUstreamCaptureMode, CUstream = CUevent_flags, CUstreamCaptureMode, CUstream

    def __init__(self, kernels: dict[str, tuple[Callable, int]] | None = None, capability: tuple[int, int] = (9, 0),
                 devices: int = 1):
        self.kernels = kernels or {}  # kernel name -> (host function taking its pointers, pointer count)
        self.capability, self.devices = capability, devices
        self.calls: list[tuple[str, tuple]] = []
        self.fail: dict[str, CUresult] = {}
        self.memory: dict[int, np.ndarray] = {}  # address -> the buffer behind it, while allocated
        self.loaded: list[bytes] = []
        self.launched: list[tuple[str, tuple, tuple, int, list[int]]] = []  # kernel, grid, block, shared, pointers
        self._capturing: list | None = None
        self._graphs: dict[int, list] = {}
        self._handles = 1000

    def _handle(self) -> int:
        self._handles += 1
        return self._handles

    def _record(self, name: str, args: tuple) -> CUresult:
        self.calls.append((name, args))
        return self.fail.get(name, OK)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)
        implementation = getattr(self, "_" + name, None)

        def call(*args: Any) -> tuple:
            status = self._record(name, args)
            if status != OK:
                return (status,)
            if implementation is None:
                return (OK,)
            return (OK, *implementation(*args))
        return call

    # -- the calls that return something or move data ------------------------------
    def _cuGetErrorName(self, status: CUresult) -> tuple:
        return (status.name.encode(),)

    def _cuGetErrorString(self, status: CUresult) -> tuple:
        return (b"fake driver error",)

    def _cuDeviceGetCount(self) -> tuple:
        return (self.devices,)

    def _cuDeviceGet(self, ordinal: int) -> tuple:
        return (ordinal,)

    def _cuDeviceGetAttribute(self, attribute: CUdevice_attribute, device: int) -> tuple:
        major = attribute == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return (self.capability[0] if major else self.capability[1],)

    def _cuDevicePrimaryCtxRetain(self, device: int) -> tuple:
        return (self._handle(),)

    def _cuModuleLoadData(self, image: bytes) -> tuple:
        self.loaded.append(bytes(image))
        return (self._handle(),)

    def _cuModuleGetFunction(self, module: int, name: bytes) -> tuple:
        return (name.decode(),)

    def _cuStreamCreate(self, flags: int) -> tuple:
        return (CUstream(self._handle()),)

    def _cuEventCreate(self, flags: int) -> tuple:
        return (self._handle(),)

    def _cuMemAlloc(self, nbytes: int) -> tuple:
        buffer = np.zeros(nbytes + 256, np.uint8)
        address = buffer.ctypes.data + (-buffer.ctypes.data) % 256
        self.memory[address] = buffer
        return (address,)

    def _cuMemFree(self, address: int) -> tuple:
        del self.memory[int(address)]
        return ()

    def _copy(self, destination: int, source: int, nbytes: int, *_: Any) -> tuple:
        ctypes.memmove(int(destination), int(source), int(nbytes))
        return ()

    _cuMemcpyHtoD = _cuMemcpyHtoDAsync = _cuMemcpyDtoHAsync = _cuMemcpyDtoDAsync = _cuMemcpyDtoH = _copy

    def _cuLaunchKernel(self, function: str, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                        stream: int, params: int, extra: int) -> tuple:
        count = self.kernels[function][1] if function in self.kernels else 0
        slots = (ctypes.c_uint64 * count).from_address(params) if count else []
        pointers = [ctypes.c_uint64.from_address(slot).value for slot in slots]
        launch = (function, (gx, gy, gz), (bx, by, bz), shared, pointers)
        if self._capturing is not None:
            self._capturing.append(launch)
        else:
            self._execute(launch)
        return ()

    def _execute(self, launch: tuple) -> None:
        self.launched.append(launch)
        if launch[0] in self.kernels:
            self.kernels[launch[0]][0](*launch[4], *launch[1])

    def _cuStreamBeginCapture(self, stream: int, mode: CUstreamCaptureMode) -> tuple:
        self._capturing = []
        return ()

    def _cuStreamEndCapture(self, stream: int) -> tuple:
        graph = self._handle()
        self._graphs[graph], self._capturing = self._capturing, None
        return (graph,)

    def _cuGraphInstantiate(self, graph: int, flags: int) -> tuple:
        executable = self._handle()
        self._graphs[executable] = self._graphs[graph]
        return (executable,)

    def _cuGraphLaunch(self, executable: int, stream: int) -> tuple:
        for launch in self._graphs[executable]:
            self._execute(launch)
        return ()


def host_kernels(gpu_model: Any) -> dict[str, tuple[Callable, int]]:
    """kernel name -> (the kernel built for the host over its whole grid, its pointer count),
    for a FakeDriver to run `gpu_model`'s launches with; "engine" keeps the machine code alive."""
    from hobbit.backend.llvm import optimize
    from hobbit.runtime.jit import jit_engine
    from hobbit.target import host_target
    engine = jit_engine(optimize(gpu_model.host_module(), host_target()), host_target())
    kernels: dict[str, tuple[Callable, int]] = {"engine": (engine, 0)}
    for launch in gpu_model.launches:
        signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(launch.args), *[ctypes.c_int64] * 3)
        kernels[launch.kernel] = (signature(engine.get_function_address(f"{launch.kernel}.grid")), len(launch.args))
    return kernels


def install(monkeypatch: Any) -> FakeDriver:
    """A FakeDriver in place of cuda-python for every GpuModel.run (each model's host kernels
    are built for it when its device side is opened)."""
    from hobbit.runtime import cuda
    driver = FakeDriver()

    class FakeBackedModel(cuda.CudaModel):
        def __init__(self, gpu_model: Any):
            driver.kernels.update(host_kernels(gpu_model))
            super().__init__(gpu_model)
    monkeypatch.setattr(cuda, "driver_module", lambda: driver)
    monkeypatch.setattr(cuda, "CudaModel", FakeBackedModel)
    return driver


def raising_init(exc: Exception) -> Callable[[int], tuple]:
    """A cuInit that raises as cuda-python's does where libcuda.so is missing."""
    def cu_init(flags: int) -> tuple:
        raise exc
    return cu_init
