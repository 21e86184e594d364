"""hobbit.load: an exported library (hobbit.runtime.export) back in Python, without recompiling.

The LoadedModel has a CompiledModel's run / inputs / outputs / get_inputs / get_outputs and
onnxruntime's run(output_names, feeds, out=), because it is one: only the native call
differs (the library's <name>_run through ctypes instead of the JIT'd entry point).

Everything that could make loading run the wrong code, or crash, is checked before the
library is mapped, each as an ArtifactError naming the file: the folder and its files are
private to this user (hobbit.runtime.trust: a folder others can write is a way for them to
run code as you); the manifest is one hobbit wrote, every field of the right type and
range (hobbit.runtime.manifest); the library was built for this machine's triple and the
host has every CPU feature it was built with (else the first run would die on an illegal
instruction); the library's sha256 is the one recorded when it was written; and the
weights file has the recorded size. Each file is opened once and checked and used through
that descriptor, so a file swapped after its check is never the one used
(hobbit.runtime.verified). The library then checks the weights' crc32 itself when the
first context is made, and its sizes are compared with the manifest's.

Each Python thread gets its own context (its own arena), as a CompiledModel gives each
thread its own arena, so concurrent runs on one model are safe.

A library with run-time dims (DynamicModel.export: the manifest's "dynamic" section) loads
as a DynamicModel over the LoadedModel (hobbit.runtime.dynamic.loaded): run() checks the
inputs against the symbols' bounds and passes their values as the last input, as the JIT'd
model does; the bounds are the library's, since a load compiles nothing.

A GPU model's export folder (hobbit.runtime.gpu_export) loads as a GpuModel under the same
rules (private folder, checked manifest, sha256 of the device code, size and crc32 of the
weights), and is set up on the GPU at once: where no GPU, driver or cuda-python can run it,
hobbit.load is the DeviceError saying what is missing, as a library built for CPU features
this host lacks is refused at load, not at its first run."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hobbit.errors import ArtifactError, ConfigError, HobbitError, RunError
from hobbit.runtime.cpus import capped_threads
from hobbit.runtime.dynamic import DynamicModel, loaded
from hobbit.runtime.export import MANIFEST_FORMAT, ArtifactFiles, artifact_files
from hobbit.runtime.export_c import RunTimeDims
from hobbit.frontend.common.export_folder import exported_names, not_an_export
from hobbit.runtime.gpu_export import is_device_manifest, read_device_export
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.jit import CompiledModel, TensorSpec
from hobbit.runtime.layout import from_json, grouped_layout, per_output
from hobbit.runtime.manifest import check_manifest
from hobbit.runtime.trust import check_private_tree
from hobbit.runtime.verified import descriptor_path, load_library, open_private, read_private
from hobbit.target import host_target

# The library's status codes (hobbit.runtime.export_c.STATUS_CODES).
_E_INVALID_DATA = 4


@dataclass
class LoadedReport:
    """Where a loaded model came from and what it was built for."""

    path: str
    manifest: dict
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def threads(self) -> int:
        return int(self.manifest.get("threads", 1))  # a GPU model's: one host thread


def load(directory: str | os.PathLike, name: str | None = None, threads: int | None = None
         ) -> LoadedModel | DynamicModel | GpuModel:
    """The library exported into `directory` (by CompiledModel.export), ready to run (by
    DynamicModel.export: a DynamicModel over it), or the GPU model exported there (by
    GpuModel.export), set up on the GPU (a DeviceError where there is none). `name` picks one
    when the folder holds several exports; `threads` (1 to the count it was built for, default
    all of them) is how many threads work on each inference of a library."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ArtifactError(not_an_export(folder))
    problem = check_private_tree(folder, "artifact folder")
    if problem is not None:
        raise ArtifactError(f"hobbit.load refuses to load native code: {problem}")
    manifest_path = _manifest_path(folder, name)
    manifest = _read_manifest(manifest_path)
    if is_device_manifest(manifest):
        return _load_device(folder, manifest, manifest_path, threads)
    manifest = check_manifest(manifest, manifest_path)
    built = manifest["threads"]
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= built):
        raise ConfigError(f"threads= must be 1 to {built} (the library was built for {built} thread(s); export "
                          f"again for more) or None for all of them; got {threads!r}")
    files = artifact_files(folder, manifest["name"], embedded=manifest["weights"]["file"] is None)
    _check_cpu(manifest["target"], files.library)
    model = LoadedModel(files, manifest, LoadedReport(str(folder), manifest), threads or 0)
    if manifest.get("dynamic") is None:
        return model
    dynamic = loaded(model, RunTimeDims.from_json(manifest["dynamic"]))
    dynamic.recipe = Reload(str(folder), manifest["name"])
    return dynamic


class LoadedModel(CompiledModel):
    """An exported library run through ctypes; see hobbit.runtime.load."""

    def __init__(self, files: ArtifactFiles, manifest: dict, report: LoadedReport, threads: int = 0):
        self.inputs = [TensorSpec.from_json(s) for s in manifest["inputs"]]
        self.outputs = [TensorSpec.from_json(s) for s in manifest["outputs"]]
        layout = manifest["layout"]
        self.layout = grouped_layout(None if layout is None else from_json(layout))
        self._per_output = per_output(self.outputs, self.layout)
        self.report = report
        self._name = manifest["name"]
        self._weights_path = None  # None: the weights are inside the library
        if files.weights is not None:
            fd = _open_weights(files.weights, manifest["weights"]["bytes"])
            weakref.finalize(self, os.close, fd)  # each thread's context maps the file through it
            self._weights_path = os.fsencode(descriptor_path(fd))
        self._threads = threads
        self._arena_bytes = int(manifest["arena_bytes"])  # what each thread's context allocates in C
        self._lib = load_library(files.library, manifest["library"]["sha256"])  # embedded weights included
        self._api = bind_api(self._lib, self._name, files.library)
        self._check_sizes(manifest, files.library)
        self._local = threading.local()
        self._context()  # the weights' crc32 is checked now, not at the first run

    def _check_sizes(self, manifest: dict, library: Path) -> None:
        arena = self._api["arena_bytes"]()
        sizes = [self._api["input_bytes"](i) for i in range(len(self.inputs))]
        sizes += [self._api["output_bytes"](i) for i in range(len(self.outputs))]
        expected = [int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in self.inputs + self.outputs]
        if arena != int(manifest["arena_bytes"]) or sizes != expected:
            raise ArtifactError(f"{library} does not match its manifest (arena {arena} bytes, tensors {sizes}; "
                                f"the manifest says {manifest['arena_bytes']} and {expected}): export it again")

    def _working_memory(self, touched: bool = False) -> ctypes.c_void_p:
        """A loaded library's arena is its context's: made in C on the thread's first run
        (`touched` cannot reach it: its pages fault as the C code first writes them)."""
        return self._context()

    def _has_working_memory(self) -> bool:
        return getattr(self._local, "context", None) is not None

    def _context(self) -> ctypes.c_void_p:
        context = getattr(self._local, "context", None)
        if context is None:
            threads = self._threads or capped_threads(self.report.threads)
            context = self._local.context = _Context(self._api, self._weights_path, threads)
        return context.handle

    def _call_native(self, arrays: list[np.ndarray], results: list[np.ndarray]) -> None:
        in_table = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        out_table = (ctypes.c_void_p * max(1, len(results)))(*[r.ctypes.data for r in results])
        handle = self._context()
        code = self._api["run"](handle, in_table, out_table)
        if code:
            message = self._api["error"](handle).decode(errors="replace")
            raise (RunError if code == _E_INVALID_DATA else HobbitError)(message)

    def export(self, directory: str | os.PathLike, name: str | None = None):
        raise HobbitError("a loaded library cannot be exported again: copy its folder instead")

    def native_model(self):
        raise HobbitError("a loaded library cannot be exported again: copy its folder instead")

    def profile(self, feeds: dict[str, np.ndarray], runs: int = 20):
        raise HobbitError("a loaded library has no per-kernel timers: compile the model with profile=True")

    def __reduce__(self) -> tuple:
        return load, (self.report.path, self._name)


class _Context:
    """One <name>_ctx: mapped weights and an arena, destroyed with this object."""

    def __init__(self, api: dict, weights_path: bytes | None, threads: int):
        self._destroy = api["destroy"]
        self.handle = ctypes.c_void_p()
        code = api["create"](weights_path, threads, None, 0, ctypes.byref(self.handle))
        if code:
            message = api["error"](self.handle).decode(errors="replace")
            raise ArtifactError(f"the library refused to start: {message}")

    def __del__(self) -> None:
        if self.handle:
            self._destroy(self.handle)
            self.handle = ctypes.c_void_p()


def bind_api(lib: ctypes.CDLL, name: str, path: Path | None = None) -> dict[str, ctypes._CFuncPtr]:
    """The library's C API with its argument and result types; `path` names the library in
    errors (default: the name it was loaded by)."""
    c = ctypes
    signatures = {
        "create": (c.c_int, [c.c_char_p, c.c_int, c.c_void_p, c.c_size_t, c.POINTER(c.c_void_p)]),
        "run": (c.c_int, [c.c_void_p, c.c_void_p, c.c_void_p]),
        "error": (c.c_char_p, [c.c_void_p]),
        "destroy": (None, [c.c_void_p]),
        "arena_bytes": (c.c_size_t, []),
        "input_bytes": (c.c_size_t, [c.c_int]),
        "output_bytes": (c.c_size_t, [c.c_int]),
    }
    api = {}
    for short, (result, args) in signatures.items():
        try:
            fn = getattr(lib, f"{name}_{short}")
        except AttributeError as exc:
            raise ArtifactError(f"{path or lib._name} has no function {name}_{short}: not a library hobbit exported "
                                f"under the name '{name}'") from exc
        fn.restype, fn.argtypes = result, args
        api[short] = fn
    return api


def _manifest_path(folder: Path, name: str | None) -> Path:
    if name is not None:
        return folder / f"{name}.json"
    names = exported_names(folder)
    if not names:
        raise ArtifactError(not_an_export(folder))
    if len(names) > 1:
        raise ArtifactError(f"{folder} holds {len(names)} exported libraries {names}: pass name= to pick one")
    return folder / f"{names[0]}.json"


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads(read_private(path, "artifact manifest"))
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path} is not the manifest of an exported library ({type(exc).__name__}: {exc})") \
            from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ArtifactError(f"{path} has manifest format {found!r}, this hobbit reads {MANIFEST_FORMAT}: "
                            "export the model again")
    return manifest


def _load_device(folder: Path, manifest: dict, path: Path, threads: int | None) -> GpuModel:
    """A GPU model's export folder (hobbit.runtime.gpu_export), set up on its GPU at once: as a
    library is refused on a CPU that lacks its features, a GPU model is refused (DeviceError)
    where no GPU, driver or cuda-python can run it, not at its first run."""
    if threads is not None:
        raise ConfigError(f"threads= is for a CPU library; {path} is a GPU model, whose parallelism is its "
                          f"kernels' grids: leave threads=None")
    model = GpuModel(**read_device_export(folder, manifest, path), report=LoadedReport(str(folder), manifest))
    model.recipe = Reload(str(folder), manifest["name"])
    model.open()
    return model


@dataclass(frozen=True)
class Reload:
    """How a loaded model is made again (what its pickle carries): hobbit.load of its folder."""

    path: str
    name: str

    def reduce(self) -> tuple:
        return load, (self.path, self.name)


def _check_cpu(built_for: dict, library: Path) -> None:
    """The host must be the triple the library was built for and have every feature it uses."""
    host = host_target()
    if built_for["triple"] != host.triple:
        raise ArtifactError(f"{library} was built for {built_for['triple']}, this host is {host.triple}")
    missing = sorted(_enabled(built_for["features"]) - _enabled(host.features))
    if missing:
        raise ArtifactError(f"{library} was built for CPU '{built_for['cpu']}' and uses CPU features this host "
                            f"('{host.cpu}') lacks: {', '.join(missing)}; export it on (or for) this machine")


def _enabled(features: str) -> set[str]:
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def _open_weights(weights: Path, size: int) -> int:
    """A descriptor of the weights file, private to this user and of the recorded size."""
    fd = open_private(weights, "weights file")
    actual = os.fstat(fd).st_size
    if actual != size:
        os.close(fd)
        raise ArtifactError(f"the weights file {weights} has {actual} bytes, the library needs {size}: "
                            f"damaged or from another export")
    return fd
