"""Running a GpuModel on an NVIDIA GPU through the CUDA driver API (cuda-python's
cuda.bindings.driver).

The driver API rather than the runtime: a cubin or PTX module, a few allocations and a
list of launches is all a compiled model needs, and the driver loads PTX itself (its JIT)
where no cubin for the device was built. Everything is set up once, when the model is
first run: the primary context of the device, the module, one function per launch,
device memory (the weights, copied once; the arena; one buffer per input and output) and
each launch's parameter array (pointers at the places its Launch names, as the grid
emulation computes them on the host). Shapes are fixed, so the launches are captured
once into a CUDA graph and each run replays it: one driver call instead of one per kernel.

A run: inputs host-to-device (or device-to-device from arrays already on the GPU) on the
model's stream, the graph, outputs device-to-host (or left on the device), synchronize.
Every driver call's result is checked; a failure is a DeviceError naming the call and,
for a launch, its kernel and node.

Settings: HOBBIT_CUDA_DEVICE (the device ordinal, default 0); HOBBIT_CUDA_GRAPH=0
launches the kernels one by one instead of replaying a graph; HOBBIT_CUDA_SYNC=1 also
synchronizes after every kernel, so that a fault is reported with the kernel that
caused it (slow; for debugging)."""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from hobbit.backend.gpu.launch import Launch
from hobbit.errors import ConfigError, DeviceError, InputError, import_optional
from hobbit.runtime.device_arrays import DeviceArray, DeviceView, device_view
from hobbit.runtime.jit import TensorSpec, check_feed_names, validate_feeds

STILL_WORKS = "compiling, export() and emulate() work without it"


def driver_module() -> Any:
    """cuda.bindings.driver, or a DeviceError saying how to install it (tests put a fake here)."""
    return import_optional("cuda.bindings.driver", lambda exc: DeviceError(
        f"running a GPU model needs cuda-python (the CUDA driver's Python bindings), which is not installed: "
        f"pip install 'hobbit[cuda]' ({STILL_WORKS}): {exc}"))


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "")
    if value == "":
        return default
    if value not in ("0", "1"):
        raise ConfigError(f"{name}={value!r}: set it to 0 or 1")
    return value == "1"


def _device_ordinal() -> int:
    value = os.environ.get("HOBBIT_CUDA_DEVICE", "0")
    if not value.isdigit():
        raise ConfigError(f"HOBBIT_CUDA_DEVICE={value!r}: set it to a device ordinal (0, 1, ...)")
    return int(value)


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


class CudaModel:
    """A GpuModel's device side: its memory, module and launches on one GPU (see the module doc)."""

    def __init__(self, gpu_model: Any):
        self.d = driver_module()
        self.model = gpu_model
        self._lock = threading.Lock()
        self._allocations: list[Any] = []
        self._module = self._stream = self._event = self._graph = self._graph_exec = None
        self._context = self._device = None
        self.image = ""
        self._use_graph = _flag("HOBBIT_CUDA_GRAPH", True)
        self._sync_each = _flag("HOBBIT_CUDA_SYNC", False)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- driver calls ------------------------------------------------------------
    def _call(self, name: str, *args: Any, what: str = "") -> Any:
        """driver.`name`(*args), its CUresult checked; the value(s) it returns besides."""
        result = getattr(self.d, name)(*args)
        status, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if status != self.d.CUresult.CUDA_SUCCESS:
            raise DeviceError(f"{name} failed{what}: {self._describe(status)}")
        return values[0] if len(values) == 1 else values

    def _describe(self, status: Any) -> str:
        try:
            _, name = self.d.cuGetErrorName(status)
            _, text = self.d.cuGetErrorString(status)
            return f"{name.decode()} ({text.decode()})"
        except Exception:  # the error's name is a nicety; the code itself says enough
            return str(status)

    # -- setup -----------------------------------------------------------------
    def _open(self) -> None:
        try:
            status = self.d.cuInit(0)
        except Exception as exc:  # cuda.pathfinder raises when libcuda.so itself is missing
            raise DeviceError(f"no NVIDIA driver was found (libcuda could not be loaded: {exc}); running a GPU model "
                              f"needs an NVIDIA GPU and its driver ({STILL_WORKS})") from exc
        status = status[0] if isinstance(status, tuple) else status
        if status != self.d.CUresult.CUDA_SUCCESS:
            raise DeviceError(f"cuInit failed: {self._describe(status)}; running a GPU model needs a working NVIDIA "
                              f"GPU and driver ({STILL_WORKS})")
        ordinal = _device_ordinal()
        count = self._call("cuDeviceGetCount")
        if ordinal >= count:
            raise DeviceError(f"HOBBIT_CUDA_DEVICE={ordinal}, but the driver sees {count} CUDA device(s)")
        self._device = self._call("cuDeviceGet", ordinal)
        self.image = choose_image(self.model.target.arch, self._capability(), self.model.cubin is not None)
        self._context = self._call("cuDevicePrimaryCtxRetain", self._device)
        self._call("cuCtxSetCurrent", self._context)
        self._load_module()
        functions = {}
        for launch in self.model.launches:
            if launch.kernel not in functions:
                functions[launch.kernel] = self._call("cuModuleGetFunction", self._module, launch.kernel.encode(),
                                                      what=f" for kernel '{launch.kernel}' (node '{launch.node}')")
        self._functions = [functions[launch.kernel] for launch in self.model.launches]
        # Non-blocking: a blocking stream would wait on the legacy default stream, which also
        # gets in the way of capturing it; producers' streams are waited for explicitly (_feed).
        self._stream = self._call("cuStreamCreate", self.d.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        self._event = self._call("cuEventCreate", self.d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value)
        self._allocate()
        self._params = [self._parameters(launch) for launch in self.model.launches]
        if self._use_graph and not self._sync_each:
            self._capture()

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

    def _alloc(self, nbytes: int, what: str) -> int:
        """A device allocation of `nbytes` (none for 0 bytes: its pointer is 0, never read)."""
        if nbytes == 0:
            return 0
        pointer = self._call("cuMemAlloc", nbytes, what=f" ({nbytes} bytes for {what})")
        self._allocations.append(pointer)
        return int(pointer)

    def _allocate(self) -> None:
        model = self.model
        self.weights = self._alloc(model.weights.nbytes, "the weights")
        if model.weights.nbytes:
            weights = np.ascontiguousarray(model.weights)
            self._call("cuMemcpyHtoD", self.weights, weights.ctypes.data, weights.nbytes, what=" (the weights)")
        self.arena = self._alloc(model.arena_bytes, "the arena")
        self.inputs = [self._alloc(_nbytes(s), f"input '{s.name}'") for s in model.inputs]
        self.outputs = [self._alloc(_nbytes(s), f"output '{s.name}'") for s in model.outputs]

    def pointer(self, place: Any) -> int:
        """The device address of a Launch's place (hobbit.plan.memory.Place)."""
        if place.kind == "input":
            return self.inputs[place.index] + place.offset
        if place.kind == "output":
            return self.outputs[place.index] + place.offset
        if place.kind == "const":
            return self.weights + place.index + place.offset
        if place.kind == "arena":
            return self.arena + place.index + place.offset
        raise DeviceError(f"unknown place kind {place.kind!r} in the launch list")

    def _parameters(self, launch: Launch) -> tuple[np.ndarray, np.ndarray]:
        """cuLaunchKernel's kernelParams for `launch`: an array of pointers, each to one
        parameter's value (here a device pointer); both arrays live as long as the model."""
        values = np.array([self.pointer(place) for place in launch.args], dtype=np.uint64)
        slots = np.array([values.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
        return values, slots

    def _launch_all(self) -> None:
        for launch, function, (_, slots) in zip(self.model.launches, self._functions, self._params):
            self._call("cuLaunchKernel", function, *launch.grid, launch.threads, 1, 1, 0, self._stream,
                       slots.ctypes.data if len(slots) else 0, 0,
                       what=f" for kernel '{launch.kernel}' (node '{launch.node}', {launch.op}, grid "
                            f"{launch.grid}, {launch.threads} threads)")
            if self._sync_each:
                self._call("cuStreamSynchronize", self._stream,
                           what=f" after kernel '{launch.kernel}' (node '{launch.node}', {launch.op})")

    def _capture(self) -> None:
        """The launches as one CUDA graph; where capture or instantiation fails the launches
        run one by one instead (the first plain run then names a launch that fails)."""
        mode = self.d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        try:
            self._call("cuStreamBeginCapture", self._stream, mode)
        except DeviceError:
            return
        try:
            self._launch_all()
        except DeviceError:
            launched = False  # a partial graph would skip kernels: end the capture and drop it
        else:
            launched = True
        try:
            self._graph = self._call("cuStreamEndCapture", self._stream)
            if launched:
                self._graph_exec = self._call("cuGraphInstantiate", self._graph, 0)
        except DeviceError:
            self._graph_exec = None

    # -- running ---------------------------------------------------------------
    def run(self, feeds: dict[str, Any], device_outputs: bool = False) -> list[Any]:
        """The model on `feeds` (numpy arrays, or arrays on this GPU exposing
        `__cuda_array_interface__` or DLPack), returning its outputs in graph-output order:
        numpy arrays, or with device_outputs=True DeviceArrays (the model's output buffers,
        valid until the next run). The GPU has finished when it returns."""
        check_feed_names(feeds, [s.name for s in self.model.inputs])
        with self._lock:
            self._call("cuCtxSetCurrent", self._context)
            views = [self._feed(spec, feeds[spec.name], buffer)
                     for spec, buffer in zip(self.model.inputs, self.inputs)]
            if self._graph_exec is not None:
                self._call("cuGraphLaunch", self._graph_exec, self._stream,
                           what=f" (the graph of the model's {len(self.model.launches)} kernels)")
            else:
                self._launch_all()
            if device_outputs:
                results = [DeviceArray(p, s.shape, s.dtype, self._to_host, self)
                           for p, s in zip(self.outputs, self.model.outputs)]
            else:
                results = [np.empty(s.shape, s.dtype) for s in self.model.outputs]
                for array, pointer, spec in zip(results, self.outputs, self.model.outputs):
                    if array.nbytes:
                        self._call("cuMemcpyDtoHAsync", array.ctypes.data, pointer, array.nbytes, self._stream,
                                   what=f" (output '{spec.name}')")
            self._synchronize()
            del views  # the inputs' producers may free them once the copies are done
        return results

    def _feed(self, spec: TensorSpec, value: Any, buffer: int) -> DeviceView | np.ndarray:
        """Queue the copy of one input into its device buffer; returns what must stay alive until it is done."""
        view = device_view(value, int(self._stream))
        if view is None:
            array = validate_feeds({spec.name: value}, [spec])[0]
            if array.nbytes:
                self._call("cuMemcpyHtoDAsync", buffer, array.ctypes.data, array.nbytes, self._stream,
                           what=f" (input '{spec.name}')")
            return array
        if view.dtype != spec.dtype:
            raise InputError(f"input '{spec.name}' has dtype {view.dtype}, "
                             f"the model expects {np.dtype(spec.dtype).name}")
        if view.shape != tuple(spec.shape):
            raise InputError(f"input '{spec.name}' has shape {view.shape}, the model expects {tuple(spec.shape)}")
        if not view.contiguous:
            raise InputError(f"input '{spec.name}' is a strided view on the GPU; pass a C-contiguous array "
                             f"(e.g. tensor.contiguous())")
        if view.stream is not None:  # 1: the legacy default stream (0 is ambiguous; read as that too), 2: per-thread
            self._call("cuEventRecord", self._event, self.d.CUstream(view.stream or 1),
                       what=f" (input '{spec.name}': its producer's stream)")
            self._call("cuStreamWaitEvent", self._stream, self._event, 0, what=f" (input '{spec.name}')")
        if view.nbytes:
            self._call("cuMemcpyDtoDAsync", buffer, view.pointer, view.nbytes, self._stream,
                       what=f" (input '{spec.name}', from device memory)")
        return view

    def _synchronize(self) -> None:
        where = "the graph of kernels" if self._graph_exec is not None else "the kernels"
        self._call("cuStreamSynchronize", self._stream,
                   what=f" (a fault in {where} or a copy; HOBBIT_CUDA_SYNC=1 names the kernel)")

    def _to_host(self, array: DeviceArray) -> np.ndarray:
        host = np.empty(array.shape, array.dtype)
        with self._lock:
            self._call("cuCtxSetCurrent", self._context)
            if host.nbytes:
                self._call("cuMemcpyDtoH", host.ctypes.data, array.pointer, host.nbytes, what=" (a device output)")
        return host

    # -- teardown ---------------------------------------------------------------
    def close(self) -> None:
        """Free everything this model holds on the device; safe to call twice, or on a
        half-built model. Errors here are not raised: a dying context frees it all anyway."""
        d = getattr(self, "d", None)
        if d is None or self._context is None:
            return
        steps = [("cuCtxSetCurrent", self._context)]
        steps += [("cuGraphExecDestroy", self._graph_exec)] if self._graph_exec is not None else []
        steps += [("cuGraphDestroy", self._graph)] if self._graph is not None else []
        steps += [("cuMemFree", pointer) for pointer in self._allocations]
        steps += [("cuModuleUnload", self._module)] if self._module is not None else []
        steps += [("cuEventDestroy", self._event)] if self._event is not None else []
        steps += [("cuStreamDestroy", self._stream)] if self._stream is not None else []
        steps += [("cuDevicePrimaryCtxRelease", self._device)]
        self._allocations, self._graph_exec, self._graph, self._module = [], None, None, None
        self._event = self._stream = self._context = None
        for name, handle in steps:
            try:
                getattr(d, name)(handle)
            except Exception:  # noqa: S112 - at interpreter exit the bindings may already be gone
                continue

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: S110 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        mode = "graph" if self._graph_exec is not None else "launches"
        return f"CudaModel({self.model.target.arch} {self.image}, {len(self.model.launches)} kernels, {mode})"


def _nbytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
