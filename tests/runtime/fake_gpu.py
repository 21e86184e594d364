"""Strict stand-ins for a GPU API's Python bindings that run on the CPU, for testing
hobbit.runtime.gpu_runtime (CUDA's cu* calls: fake_cuda; HIP's hip* calls: fake_hip) on
machines with no GPU. One machinery, named by the runtime's own table of calls (DriverApi).

It keeps the bindings' calling convention (every call returns a tuple whose first item is
a status) and records each call. It answers only the calls it implements: any other name
is an AttributeError naming it, so a runtime that starts making a new call fails here
until the fake models it. And it refuses what a driver would refuse, with the status a
driver returns (the reason is kept in `refusals`): calls before init, handles it never
handed out or already destroyed, a function name its loaded image does not define, a
block other than the one the kernel was compiled for, dynamic shared memory (hobbit's
kernels use static shared memory only), copies or kernel pointers outside device memory.

"Device memory" is host memory: malloc hands out the addresses of numpy buffers and the
copies are memmoves, so a launch can be carried out by the same kernel built for the host
(the grid emulation's `<kernel>.grid(pointers..., gx, gy, gz)`), with the grid the launch
passes and the pointers its kernelParams hold. A run through the fake is then a real check
of the runtime's parameter arrays and grids: wrong ones give wrong outputs. The host
kernels come from HostBuilds, each registered for the images (PTX, cubin, code object) of
the model it was built from; a module loaded from an image runs its build's kernels.
Stream capture records launches and a graph launch replays them. `fail[name] = status`
makes that call fail."""

from __future__ import annotations

import ctypes
import enum
import re
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from hobbit.backend.gpu.device_code import elf_symbols
from hobbit.runtime.gpu_runtime import DriverApi

BEFORE_INIT = frozenset({"init", "error_name", "error_string"})  # roles a driver answers before init
# The statuses the fakes return, by meaning. HIP numbers its errors as CUDA does, so one table
# serves both: a fake's `Status` enum (CUresult, hipError_t) names them.
CODES = {"success": 0, "invalid_value": 1, "not_initialized": 3, "invalid_device": 101, "invalid_image": 200,
         "invalid_context": 201, "invalid_handle": 400, "not_found": 500, "launch_failed": 719,
         "capture_unsupported": 900}


class Refused(Exception):
    """A call the fake refuses as a driver would: `code` is a key of CODES."""

    def __init__(self, code: str, why: str):
        super().__init__(why)
        self.code, self.why = code, why


@dataclass(frozen=True)
class HostKernel:
    run: Callable[..., None]  # (pointers..., grid x, grid y, grid z)
    pointers: int
    threads: int  # the block size the kernel was compiled for


@dataclass
class HostBuild:
    """A model's kernels built for the host, and the images (device code) they stand for."""

    images: tuple[bytes, ...]
    kernels: dict[str, HostKernel]
    keep: object = None  # the JIT engine holding the machine code


def model_images(gpu_model: Any) -> tuple[bytes, ...]:
    """The images the runtimes load for `gpu_model`: its code object, or its PTX (as loaded,
    NUL-terminated) and cubin."""
    if isinstance(gpu_model.device_code, bytes):
        return (gpu_model.device_code,)
    return (gpu_model.device_code.encode() + b"\0",) + ((gpu_model.cubin,) if gpu_model.cubin is not None else ())


def host_build(gpu_model: Any) -> HostBuild:
    """`gpu_model`'s kernels built for the host over their whole grids (hobbit.backend.gpu.module)."""
    from hobbit.backend.llvm import optimize
    from hobbit.runtime.jit import jit_engine
    from hobbit.target import host_target
    engine = jit_engine(optimize(gpu_model.host_module(), host_target()), host_target())
    kernels = {}
    for launch in gpu_model.launches:
        signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(launch.args), *[ctypes.c_int64] * 3)
        kernels[launch.kernel] = HostKernel(signature(engine.get_function_address(f"{launch.kernel}.grid")),
                                            len(launch.args), launch.threads)
    return HostBuild(model_images(gpu_model), kernels, engine)


def three_kernels(shape: tuple[int, int]) -> Any:
    """The runtime tests' ONNX model: three kernels, an arena intermediate read twice, a
    weight, two outputs (one read back by a later kernel)."""
    from onnx import helper

    from tests.helpers import make_model, rand
    nodes = [helper.make_node("Exp", ["x"], ["t"]), helper.make_node("Add", ["t", "b"], ["y1"]),
             helper.make_node("Mul", ["t", "t"], ["m"]), helper.make_node("Sub", ["m", "y1"], ["y2"])]
    return make_model(nodes, {"x": rand(*shape)}, ["y1", "y2"], {"b": rand(shape[1], seed=1)})


def image_kernels(image: bytes) -> set[str]:
    """The kernels an image defines, read from the image itself: an AMDGPU code object's
    `<kernel>.kd` descriptors, a cubin's functions (the symbols with a `.text.<name>`
    section), PTX's `.entry` names."""
    if image[:4] == b"\x7fELF":
        symbols = set(elf_symbols(image))
        described = {name[:-3] for name in symbols if name.endswith(".kd")}
        return described or {name for name in symbols if f".text.{name}" in symbols}
    return set(re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", image.decode(errors="replace")))


@dataclass(frozen=True)
class Taken:
    """A launch as the fake took it: what it will run, with what."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    pointers: list[int]
    run: Callable[..., None]

    def record(self) -> tuple:
        return (self.kernel, self.grid, self.block, self.shared, self.pointers)


class FakeGpuDriver:
    """The machinery; a subclass names its API (`api`), its statuses (`Status`, an enum with
    CODES' values), its constants, and its own calls (`OWN_CALLS`: name -> method), and may
    add checks before each call (`_check_ready`)."""

    api: DriverApi
    Status: type[enum.IntEnum]
    OWN_CALLS: dict[str, str] = {}
    capture_mode: int = 1

    def __init__(self, *builds: HostBuild, devices: int = 1):
        self.builds = list(builds)
        self.devices = devices
        self.calls: list[tuple[str, tuple]] = []
        self.fail: dict[str, enum.IntEnum] = {}
        self.refusals: list[tuple[str, str]] = []  # (call, why) for each call refused
        self.memory: dict[int, tuple[np.ndarray, int]] = {}  # address -> (buffer, bytes asked), while allocated
        self.foreign: dict[int, int] = {}  # address -> bytes: device memory of other libraries (adopt)
        self.modules: dict[int, tuple[HostBuild, set[str]]] = {}
        self.functions: dict[int, tuple[int, str]] = {}  # handle -> (module, kernel)
        self.streams: set[int] = set()
        self.events: set[int] = set()
        self.graphs: dict[int, list[Taken]] = {}
        self.executables: dict[int, list[Taken]] = {}
        self.recorded_streams: list[Any] = []  # the streams event_record was given (producers' streams)
        self.loaded: list[bytes] = []
        self.launched: list[tuple] = []  # (kernel, grid, block, shared, pointers) of each launch run
        self.initialised = False
        self._capturing: tuple[int, list[Taken]] | None = None
        self._handles = 1000
        roles = {getattr(self.api, f.name): f.name for f in fields(DriverApi) if f.name not in ("vendor", "driver")}
        self._roles = {**roles, **self.OWN_CALLS}
        self.STATUS = {code: self.Status(value) for code, value in CODES.items()}  # meaning -> the API's status

    # -- the calling convention ---------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        roles = self.__dict__.get("_roles", {})
        if name not in roles:
            raise AttributeError(f"{type(self).__name__} does not implement {name!r}: a call the runtime makes "
                                 f"must be modelled here explicitly")
        role = roles[name]
        implementation = getattr(self, "_" + role)

        def call(*args: Any) -> tuple:
            self.calls.append((name, args))
            if name in self.fail:
                return (self.fail[name],)
            try:
                if not self.initialised and role not in BEFORE_INIT:
                    raise Refused("not_initialized", f"{name} before {self.api.init}")
                self._check_ready(role)
                return (self.STATUS["success"], *implementation(*args))
            except Refused as refused:
                self.refusals.append((name, refused.why))
                return (self.STATUS[refused.code],)
        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def _check_ready(self, role: str) -> None:
        """Raise Refused where the API needs some state before `role` (CUDA: a current context)."""

    def _handle(self) -> int:
        self._handles += 1
        return self._handles

    def adopt(self, array: np.ndarray) -> np.ndarray:
        """Count `array`'s memory as device memory another library allocated (a producer's)."""
        self.foreign[array.ctypes.data] = array.nbytes
        return array

    def _device_span(self, address: int, nbytes: int, what: str) -> None:
        address = int(address)
        spans = [(start, size) for start, (_, size) in self.memory.items()] + list(self.foreign.items())
        if not any(start <= address and address + nbytes <= start + size for start, size in spans):
            raise Refused("invalid_value", f"{what}: {nbytes} bytes at 0x{address:x} are not device memory")

    # -- roles: the calls of DriverApi --------------------------------------------
    def _init(self, flags: int) -> tuple:
        if flags != 0:
            raise Refused("invalid_value", f"init flags {flags}")
        self.initialised = True
        return ()

    def _error_name(self, status: Any) -> tuple:
        return (self.Status(int(status)).name.encode(),)

    def _error_string(self, status: Any) -> tuple:
        return (b"refused by the fake driver",)

    def _device_count(self) -> tuple:
        return (self.devices,)

    def _load(self, image: bytes) -> tuple:
        image = bytes(image)
        build = next((b for b in reversed(self.builds) if image in b.images), None)
        if build is None:
            raise Refused("invalid_image", "an image no host build was registered for")
        module = self._handle()
        self.modules[module] = (build, image_kernels(image))
        self.loaded.append(image)
        return (module,)

    def _unload(self, module: int) -> tuple:
        if module not in self.modules:
            raise Refused("invalid_handle", f"module {module} is not loaded")
        del self.modules[module]
        self.functions = {f: (m, k) for f, (m, k) in self.functions.items() if m != module}
        return ()

    def _get_function(self, module: int, name: bytes) -> tuple:
        if not isinstance(name, bytes):
            raise TypeError(f"expected bytes, {type(name).__name__} found")  # as the real bindings do
        if module not in self.modules:
            raise Refused("invalid_handle", f"module {module} is not loaded")
        build, names = self.modules[module]
        kernel = name.decode()
        if kernel not in names:
            raise Refused("not_found", f"the loaded image defines no kernel {kernel!r}")
        if kernel not in build.kernels:
            raise NotImplementedError(f"the host build registered for this image lacks kernel {kernel!r}")
        function = self._handle()
        self.functions[function] = (module, kernel)
        return (function,)

    def _launch(self, function: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                stream: int, params: int, extra: Any) -> tuple:
        if function not in self.functions:
            raise Refused("invalid_handle", f"function {function} was not obtained from a loaded module")
        module, kernel = self.functions[function]
        host = self.modules[module][0].kernels[kernel]
        if min(gx, gy, gz) < 1:
            raise Refused("invalid_value", f"grid ({gx}, {gy}, {gz})")
        if (bx, by, bz) != (host.threads, 1, 1):
            raise Refused("invalid_value", f"block ({bx}, {by}, {bz}) for {kernel}, compiled for {host.threads} "
                                           f"threads")
        if shared != 0:
            raise Refused("invalid_value", f"{shared} bytes of dynamic shared memory for {kernel}, whose shared "
                                           f"memory is static")
        if stream not in self.streams:
            raise Refused("invalid_handle", f"stream {stream}")
        if extra not in (0, None):
            raise Refused("invalid_value", "extra")
        if host.pointers and not params:
            raise Refused("invalid_value", f"no kernelParams for {kernel}'s {host.pointers} parameters")
        slots = (ctypes.c_uint64 * host.pointers).from_address(int(params)) if host.pointers else []
        pointers = [ctypes.c_uint64.from_address(slot).value for slot in slots]
        taken = Taken(kernel, (gx, gy, gz), (bx, by, bz), shared, pointers, host.run)
        self._check_pointers(taken)
        if self._capturing is not None and self._capturing[0] == stream:
            self._capturing[1].append(taken)
        else:
            self._execute(taken)
        return ()

    def _check_pointers(self, taken: Taken) -> None:
        for pointer in taken.pointers:
            if pointer:
                try:
                    self._device_span(pointer, 0, f"kernel {taken.kernel}'s pointer")
                except Refused as refused:
                    raise Refused("launch_failed", refused.why) from None

    def _execute(self, taken: Taken) -> None:
        self.launched.append(taken.record())
        taken.run(*taken.pointers, *taken.grid)

    def _malloc(self, nbytes: int) -> tuple:
        if int(nbytes) <= 0:
            raise Refused("invalid_value", f"malloc of {nbytes} bytes")
        buffer = np.zeros(nbytes + 256, np.uint8)
        address = buffer.ctypes.data + (-buffer.ctypes.data) % 256
        self.memory[address] = (buffer, int(nbytes))
        return (address,)

    def _free(self, address: int) -> tuple:
        if int(address) not in self.memory:
            raise Refused("invalid_value", f"free of 0x{int(address):x}, not an allocation")
        del self.memory[int(address)]
        return ()

    def _stream_ok(self, stream: int) -> None:
        if stream not in self.streams:
            raise Refused("invalid_handle", f"stream {stream}")

    def _htod(self, destination: int, source: int, nbytes: int) -> tuple:
        self._device_span(destination, nbytes, "host-to-device copy")
        ctypes.memmove(int(destination), int(source), int(nbytes))
        return ()

    def _dtoh(self, destination: int, source: int, nbytes: int) -> tuple:
        self._device_span(source, nbytes, "device-to-host copy")
        ctypes.memmove(int(destination), int(source), int(nbytes))
        return ()

    def _htod_async(self, destination: int, source: int, nbytes: int, stream: int) -> tuple:
        self._stream_ok(stream)
        return self._htod(destination, source, nbytes)

    def _dtoh_async(self, destination: int, source: int, nbytes: int, stream: int) -> tuple:
        self._stream_ok(stream)
        return self._dtoh(destination, source, nbytes)

    def _dtod_async(self, destination: int, source: int, nbytes: int, stream: int) -> tuple:
        self._stream_ok(stream)
        self._device_span(source, nbytes, "device-to-device copy's source")
        self._device_span(destination, nbytes, "device-to-device copy's destination")
        ctypes.memmove(int(destination), int(source), int(nbytes))
        return ()

    def _created(self, live: set[int]) -> tuple:
        handle = self._handle()
        live.add(handle)
        return (handle,)

    def _destroyed(self, live: set[int] | dict[int, Any], handle: int, what: str) -> tuple:
        if handle not in live:
            raise Refused("invalid_handle", f"{what} {handle}")
        if isinstance(live, set):
            live.remove(handle)
        else:
            del live[handle]
        return ()

    def _stream_create(self, flags: int) -> tuple:
        return self._created(self.streams)

    def _stream_destroy(self, stream: int) -> tuple:
        return self._destroyed(self.streams, stream, "stream")

    def _synchronize(self, stream: int) -> tuple:
        self._stream_ok(stream)
        if self._capturing is not None and self._capturing[0] == stream:
            raise Refused("capture_unsupported", "synchronize of a stream being captured")
        return ()

    def _event_create(self, flags: int) -> tuple:
        return self._created(self.events)

    def _event_destroy(self, event: int) -> tuple:
        return self._destroyed(self.events, event, "event")

    def _event_record(self, event: int, stream: Any) -> tuple:
        if event not in self.events:
            raise Refused("invalid_handle", f"event {event}")
        self.recorded_streams.append(stream)
        return ()

    def _wait_event(self, stream: int, event: int, flags: int) -> tuple:
        self._stream_ok(stream)
        if event not in self.events or flags != 0:
            raise Refused("invalid_handle" if event not in self.events else "invalid_value", f"wait on {event}")
        return ()

    def _begin_capture(self, stream: int, mode: Any) -> tuple:
        self._stream_ok(stream)
        if self._capturing is not None:
            raise Refused("invalid_value", "a capture is already under way")
        if int(mode) != self.capture_mode:
            raise Refused("invalid_value", f"capture mode {mode}")
        self._capturing = (stream, [])
        return ()

    def _end_capture(self, stream: int) -> tuple:
        if self._capturing is None or self._capturing[0] != stream:
            raise Refused("invalid_value", f"stream {stream} is not being captured")
        graph = self._handle()
        self.graphs[graph], self._capturing = self._capturing[1], None
        return (graph,)

    def _instantiate(self, graph: int, flags: int) -> tuple:
        if graph not in self.graphs or flags != 0:
            raise Refused("invalid_value", f"instantiate graph {graph} with flags {flags}")
        executable = self._handle()
        self.executables[executable] = list(self.graphs[graph])
        return (executable,)

    def _graph_launch(self, executable: int, stream: int) -> tuple:
        self._stream_ok(stream)
        if executable not in self.executables:
            raise Refused("invalid_handle", f"graph executable {executable}")
        for taken in self.executables[executable]:
            self._check_pointers(taken)
            self._execute(taken)
        return ()

    def _graph_destroy(self, graph: int) -> tuple:
        return self._destroyed(self.graphs, graph, "graph")

    def _exec_destroy(self, executable: int) -> tuple:
        return self._destroyed(self.executables, executable, "graph executable")


def install(monkeypatch: Any, runtime: Any, factory: str, model_class: str, driver: FakeGpuDriver) -> FakeGpuDriver:
    """`driver` in place of the bindings `runtime`.`factory`() returns, for every GpuModel
    opened through `runtime`.`model_class`: each model's host build is registered for its
    images when its device side is opened (once per distinct image)."""
    base = getattr(runtime, model_class)

    class FakeBacked(base):
        def __init__(self, gpu_model: Any):
            if not any(image in b.images for b in driver.builds for image in model_images(gpu_model)):
                driver.builds.append(host_build(gpu_model))
            super().__init__(gpu_model)
    monkeypatch.setattr(runtime, factory, lambda: driver)
    monkeypatch.setattr(runtime, model_class, FakeBacked)
    return driver


class OnDevice:
    """An array "on the GPU" by __cuda_array_interface__: the fake's device memory is the
    host's, and the fake counts the array's memory as a producer's device memory."""

    def __init__(self, array: np.ndarray, fake: FakeGpuDriver, stream: int | None = None):
        self.array = fake.adopt(array)
        self.__cuda_array_interface__ = {"shape": array.shape, "typestr": array.dtype.str, "version": 3,
                                         "data": (array.ctypes.data, False), "stream": stream,
                                         "strides": None if array.flags.c_contiguous else array.strides}


class DlpackOnDevice:
    """DLPack's protocol saying "device `device_type`, 0" (2: CUDA, 10: ROCm), with a host
    capsule behind it whose memory the fake counts as device memory."""

    def __init__(self, array: np.ndarray, fake: FakeGpuDriver, device_type: int):
        self.array, self.streams, self.device_type = fake.adopt(array), [], device_type

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, 0)

    def __dlpack__(self, stream: int | None = None) -> object:
        self.streams.append(stream)
        return self.array.__dlpack__()


class ArgumentsChecked:
    """The fake, but every call is first made on the real bindings, which convert their
    arguments before they find there is no driver library: a name they lack or an argument
    they cannot convert fails the test, which the fake alone would not notice. Constants
    (enums, flags) are the real module's, as the runtime would get them."""

    def __init__(self, fake: FakeGpuDriver, real: object):
        self._fake, self._real = fake, real

    def __getattr__(self, name: str) -> object:
        if name not in self._fake._roles:
            return getattr(self._real, name)
        target, real = getattr(self._fake, name), getattr(self._real, name)

        def call(*args: object) -> object:
            try:
                real(*args)
            except (TypeError, ValueError, OverflowError) as exc:
                raise AssertionError(f"the real {name} refused the runtime's arguments {args}: {exc}") from exc
            except Exception:  # noqa: S110 - no driver library: past the argument conversion, as wanted
                pass
            return target(*args)
        return call


def no_driver(real: Any, init: str) -> None:
    """Skip unless the real bindings find no driver library here (else the real calls would act)."""
    import pytest
    try:
        getattr(real, init)(0)
    except Exception:  # noqa: S110 - the expected case here: no driver
        return
    pytest.skip("a GPU driver is installed: the real calls would act")
