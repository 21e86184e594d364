"""What running a GpuModel on a GPU takes whatever the vendor's API: the part of the CUDA
runtime (hobbit.runtime.cuda) and the HIP runtime (hobbit.runtime.hip) that is the same.

CUDA's driver API (cuda-python) and HIP's module API (hip-python) offer the same calls
under other names, with the same arguments, each returning a tuple whose first item is a
status: load a code object, get a function by name, allocate, copy, launch with an array
of pointers to the arguments, capture a stream into a graph and replay it. So one class
does the work, GpuRuntime, and a table per API (DriverApi) names the calls; a subclass
adds what truly differs: how a device is opened and made current (CUDA's primary context,
HIP's current device), which image it loads (cubin or PTX; the code object), and the
constants (flags, capture mode, the producer's default stream).

Everything is set up once, when the model is first run: the device, the module, one
function per launch, device memory (the weights, copied once; the arena; one buffer per
input and output) and each launch's parameter array (pointers at the places its Launch
names, as the grid emulation computes them on the host). Shapes are fixed, so the launches
are captured once into a graph and each run replays it: one call instead of one per kernel.

A run: inputs host-to-device (or device-to-device from arrays already on the GPU) on the
model's stream, the graph, outputs device-to-host (or left on the device), synchronize.
Every call's status is checked; a failure is a DeviceError naming the call and, for a
launch, its kernel and node.

Settings, per vendor (<V> is CUDA or HIP): HOBBIT_<V>_DEVICE (the device ordinal, default
0); HOBBIT_<V>_GRAPH=0 launches the kernels one by one instead of replaying a graph;
HOBBIT_<V>_SYNC=1 also synchronizes after every kernel, so that a fault is reported with
the kernel that caused it (slow; for debugging)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from hobbit.backend.gpu.launch import Launch
from hobbit.errors import ConfigError, DeviceError, InputError
from hobbit.runtime.device_arrays import DeviceArray, DeviceView, device_view
from hobbit.runtime.jit import TensorSpec, check_feed_names, validate_feeds

STILL_WORKS = "compiling, export() and emulate() work without it"


@dataclass(frozen=True)
class DriverApi:
    """One API's names for the calls GpuRuntime makes (the fake drivers of the tests read
    the same table, so that a fake answers exactly the calls the runtime makes), and the
    words its messages use."""

    vendor: str  # "CUDA", "HIP": the settings' names (HOBBIT_CUDA_GRAPH) and messages
    driver: str  # what cannot be found when the library is missing: "NVIDIA driver (libcuda)"
    init: str
    device_count: str
    load: str
    unload: str
    get_function: str
    launch: str
    malloc: str
    free: str
    htod: str
    htod_async: str
    dtoh: str
    dtoh_async: str
    dtod_async: str
    stream_create: str
    stream_destroy: str
    synchronize: str
    event_create: str
    event_destroy: str
    event_record: str
    wait_event: str
    begin_capture: str
    end_capture: str
    instantiate: str
    graph_launch: str
    graph_destroy: str
    exec_destroy: str
    error_name: str
    error_string: str

    def setting(self, what: str) -> str:
        return f"HOBBIT_{self.vendor}_{what}"


def flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "")
    if value == "":
        return default
    if value not in ("0", "1"):
        raise ConfigError(f"{name}={value!r}: set it to 0 or 1")
    return value == "1"


def device_ordinal(name: str) -> int:
    value = os.environ.get(name, "0")
    if not value.isdigit():
        raise ConfigError(f"{name}={value!r}: set it to a device ordinal (0, 1, ...)")
    return int(value)


def _text(value: Any) -> str:
    """An error name as the bindings return it (bytes; hip-python's CStr) as text."""
    return value.decode() if hasattr(value, "decode") else str(value)


class GpuRuntime:
    """A GpuModel's device side: its memory, module and launches on one GPU (see the module
    doc). Subclasses set `api` and fill in the hooks below the `-- per API --` line."""

    api: DriverApi

    def __init__(self, gpu_model: Any, driver: Any):
        self.d = driver
        self.model = gpu_model
        self._lock = threading.Lock()
        self._allocations: list[Any] = []
        self._module = self._stream = self._event = self._graph = self._graph_exec = None
        self._opened = False  # a device is open: close() has something to give back
        self.image = ""
        self._use_graph = flag(self.api.setting("GRAPH"), True)
        self._sync_each = flag(self.api.setting("SYNC"), False)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- per API ------------------------------------------------------------------
    def _success(self) -> Any:
        raise NotImplementedError

    def _open_device(self, ordinal: int) -> None:
        """Make device `ordinal` this thread's and pick `self.image`; set `self._opened`."""
        raise NotImplementedError

    def _make_current(self) -> None:
        """Make the model's device current for this thread (a run may come from any thread)."""
        raise NotImplementedError

    def _load_module(self) -> None:
        """Load the model's code into `self._module`."""
        raise NotImplementedError

    def _stream_flags(self) -> Any:
        raise NotImplementedError

    def _event_flags(self) -> Any:
        raise NotImplementedError

    def _capture_mode(self) -> Any:
        raise NotImplementedError

    def _producer_stream(self, stream: int) -> Any:
        """A producer's stream as `__cuda_array_interface__` gives it (1: the legacy default
        stream, 2: the per-thread one, else a handle), as this API's stream argument."""
        raise NotImplementedError

    def _current_steps(self) -> list[tuple[str, Any]]:
        """The calls close() makes first, to make the device current."""
        raise NotImplementedError

    def _release_steps(self) -> list[tuple[str, Any]]:
        """The calls close() makes last, to give the device back."""
        return []

    # -- calls ------------------------------------------------------------------
    def _call(self, name: str, *args: Any, what: str = "") -> Any:
        """driver.`name`(*args), its status checked; the value(s) it returns besides."""
        result = getattr(self.d, name)(*args)
        status, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if status != self._success():
            raise DeviceError(f"{name} failed{what}: {self._describe(status)}")
        return values[0] if len(values) == 1 else values

    def _describe(self, status: Any) -> str:
        try:
            _, name = getattr(self.d, self.api.error_name)(status)
            _, text = getattr(self.d, self.api.error_string)(status)
            return f"{_text(name)} ({_text(text)})"
        except Exception:  # the error's name is a nicety; the code itself says enough
            return str(status)

    # -- setup -----------------------------------------------------------------
    def _open(self) -> None:
        api = self.api
        try:
            status = getattr(self.d, api.init)(0)
        except Exception as exc:  # the bindings raise when the driver's library itself is missing
            raise DeviceError(f"no {api.driver} was found (its library could not be loaded: {exc}); running a "
                              f"GPU model needs the GPU and its {api.driver} ({STILL_WORKS})") from exc
        status = status[0] if isinstance(status, tuple) else status
        if status != self._success():
            raise DeviceError(f"{api.init} failed: {self._describe(status)}; running a GPU model needs a working "
                              f"GPU and {api.driver} ({STILL_WORKS})")
        ordinal = device_ordinal(api.setting("DEVICE"))
        count = self._call(api.device_count)
        if ordinal >= count:
            raise DeviceError(f"{api.setting('DEVICE')}={ordinal}, but the driver sees {count} {api.vendor} device(s)")
        self._open_device(ordinal)
        self._load_module()
        functions = {}
        for launch in self.model.launches:
            if launch.kernel not in functions:
                functions[launch.kernel] = self._call(api.get_function, self._module, launch.kernel.encode(),
                                                      what=f" for kernel '{launch.kernel}' (node '{launch.node}')")
        self._functions = [functions[launch.kernel] for launch in self.model.launches]
        # Non-blocking: a blocking stream would wait on the legacy default stream, which also
        # gets in the way of capturing it; producers' streams are waited for explicitly (_feed).
        self._stream = self._call(api.stream_create, self._stream_flags())
        self._event = self._call(api.event_create, self._event_flags())
        self._allocate()
        self._params = [self._parameters(launch) for launch in self.model.launches]
        if self._use_graph and not self._sync_each:
            self._capture()

    def _alloc(self, nbytes: int, what: str) -> int:
        """A device allocation of `nbytes` (none for 0 bytes: its pointer is 0, never read)."""
        if nbytes == 0:
            return 0
        pointer = self._call(self.api.malloc, nbytes, what=f" ({nbytes} bytes for {what})")
        self._allocations.append(pointer)
        return int(pointer)

    def _allocate(self) -> None:
        model = self.model
        self.weights = self._alloc(model.weights.nbytes, "the weights")
        if model.weights.nbytes:
            weights = np.ascontiguousarray(model.weights)
            self._call(self.api.htod, self.weights, weights.ctypes.data, weights.nbytes, what=" (the weights)")
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
        """A launch's kernelParams: an array of pointers, each to one parameter's value (here
        a device pointer), the layout CUDA and HIP share; both arrays live as long as the model."""
        values = np.array([self.pointer(place) for place in launch.args], dtype=np.uint64)
        slots = np.array([values.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
        return values, slots

    def _launch_all(self) -> None:
        """Every launch on the model's stream. The block is the Launch's threads, the size the
        kernel was compiled for; its shared memory is static, so no dynamic bytes are asked."""
        for launch, function, (_, slots) in zip(self.model.launches, self._functions, self._params):
            self._call(self.api.launch, function, *launch.grid, launch.threads, 1, 1, 0, self._stream,
                       slots.ctypes.data if len(slots) else 0, 0,
                       what=f" for kernel '{launch.kernel}' (node '{launch.node}', {launch.op}, grid "
                            f"{launch.grid}, {launch.threads} threads)")
            if self._sync_each:
                self._call(self.api.synchronize, self._stream,
                           what=f" after kernel '{launch.kernel}' (node '{launch.node}', {launch.op})")

    def _capture(self) -> None:
        """The launches as one graph; where capture or instantiation fails the launches
        run one by one instead (the first plain run then names a launch that fails)."""
        api = self.api
        try:
            self._call(api.begin_capture, self._stream, self._capture_mode())
        except DeviceError:
            return
        try:
            self._launch_all()
        except DeviceError:
            launched = False  # a partial graph would skip kernels: end the capture and drop it
        else:
            launched = True
        try:
            self._graph = self._call(api.end_capture, self._stream)
            if launched:
                self._graph_exec = self._call(api.instantiate, self._graph, 0)
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
            self._make_current()
            views = [self._feed(spec, feeds[spec.name], buffer)
                     for spec, buffer in zip(self.model.inputs, self.inputs)]
            if self._graph_exec is not None:
                self._call(self.api.graph_launch, self._graph_exec, self._stream,
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
                        self._call(self.api.dtoh_async, array.ctypes.data, pointer, array.nbytes, self._stream,
                                   what=f" (output '{spec.name}')")
            self._synchronize()
            del views  # the inputs' producers may free them once the copies are done
        return results

    def _feed(self, spec: TensorSpec, value: Any, buffer: int) -> DeviceView | np.ndarray:
        """Queue the copy of one input into its device buffer; returns what must stay alive until it is done."""
        view = self._device_view(value)
        if view is None:
            array = validate_feeds({spec.name: value}, [spec])[0]
            if array.nbytes:
                self._call(self.api.htod_async, buffer, array.ctypes.data, array.nbytes, self._stream,
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
        if view.stream is not None:
            self._call(self.api.event_record, self._event, self._producer_stream(view.stream),
                       what=f" (input '{spec.name}': its producer's stream)")
            self._call(self.api.wait_event, self._stream, self._event, 0, what=f" (input '{spec.name}')")
        if view.nbytes:
            self._call(self.api.dtod_async, buffer, view.pointer, view.nbytes, self._stream,
                       what=f" (input '{spec.name}', from device memory)")
        return view

    def _device_view(self, value: Any) -> DeviceView | None:
        return device_view(value, int(self._stream))

    def _synchronize(self) -> None:
        where = "the graph of kernels" if self._graph_exec is not None else "the kernels"
        self._call(self.api.synchronize, self._stream,
                   what=f" (a fault in {where} or a copy; {self.api.setting('SYNC')}=1 names the kernel)")

    def _to_host(self, array: DeviceArray) -> np.ndarray:
        host = np.empty(array.shape, array.dtype)
        with self._lock:
            self._make_current()
            if host.nbytes:
                self._call(self.api.dtoh, host.ctypes.data, array.pointer, host.nbytes, what=" (a device output)")
        return host

    # -- teardown ---------------------------------------------------------------
    def close(self) -> None:
        """Free everything this model holds on the device; safe to call twice, or on a
        half-built model. Errors here are not raised: a dying context frees it all anyway."""
        d = getattr(self, "d", None)
        if d is None or not self._opened:
            return
        api = self.api
        steps = self._current_steps()
        steps += [(api.exec_destroy, self._graph_exec)] if self._graph_exec is not None else []
        steps += [(api.graph_destroy, self._graph)] if self._graph is not None else []
        steps += [(api.free, pointer) for pointer in self._allocations]
        steps += [(api.unload, self._module)] if self._module is not None else []
        steps += [(api.event_destroy, self._event)] if self._event is not None else []
        steps += [(api.stream_destroy, self._stream)] if self._stream is not None else []
        steps += self._release_steps()
        self._allocations, self._graph_exec, self._graph, self._module = [], None, None, None
        self._event = self._stream = None
        self._opened = False
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
        return (f"{type(self).__name__}({self.model.target.arch} {self.image}, {len(self.model.launches)} kernels, "
                f"{mode})")


def _nbytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
