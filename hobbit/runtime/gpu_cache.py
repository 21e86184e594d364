"""The compile cache's GPU entries: a GpuModel stored as its export folder under the cache key.

A repeated compile for a GPU target (same model, target and arch, precision, opt level,
passes, shapes, hobbit build, and device toolchain) loads the device code instead of running
LLVM and ptxas (or ld.lld) again: on this 2-core machine squeezenet1_1 for sm_90 took 2.9 s to
compile (1.7 s without ptxas) and 0.014 s to come back from the cache, resnet18 2.0 s (1.7 s)
and 0.09-0.23 s, most of that hashing the ModelProto for the key (0.07 s) and reading, crc32-
and sha256-checking its 47 MB of weights (0.1 s).

An entry is the folder GpuModel.export writes (hobbit.runtime.gpu_export: model.ptx,
model.cubin or model.hsaco, model.weights, model.json), read back by the same checked reader
as hobbit.load, plus the cache's own manifest.json: the sha256 of the export's manifest and
of the weights (the export checks them by crc32, the cache by sha256 as for CPU entries),
and ptxas's per-kernel resources, which the export does not carry. The CPU entries' rules
hold (hobbit.runtime.cache): written into a temporary folder, files 0600, and renamed into
place; a folder or file not private to this user is skipped with a warning and the model
compiled; a damaged entry is deleted with a warning and the model compiled; entries share
the CPU entries' size limit and least-recently-used eviction.

The host build of the kernels, which emulate() runs, is not stored: the caller's `planned`
makes the graph and plan again when emulate() first asks, and host_rebuild builds the host
module from them (0.2 s of import and passes plus 0.3-0.5 s for these models, small beside
emulate()'s own 25 s; storing it would cost 0.8-1 MB of IR text per entry and building it on
every miss). The key holds hobbit's sources, so the rebuild makes the cached kernels."""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from hobbit.backend.gpu.device_code import KernelResources, lld_path, ptxas_path
from hobbit.backend.gpu.module import build_gpu_module
from hobbit.errors import ArtifactError, CodegenError, MissingDependencyError
from hobbit.runtime.cache import (FORMAT, MANIFEST_FILE, _PRIVATE_FILE, _Untrusted, _read_manifest, _read_private,
                                  _require_private, _sha256, _touch, _warn_untrusted, cache_dir, write_entry)
from hobbit.runtime.gpu_export import export_device, read_device_export
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.loaded_report import CachedReport
from hobbit.runtime.trust import check_private_tree
from hobbit.graph.ir import Graph
from hobbit.plan.memory import MemoryPlan
from hobbit.target import GpuTarget

KIND = "gpu"
EXPORT_NAME = "model"  # the export's <name> inside an entry


def serves(target: object) -> bool:
    """Whether compile() keeps `target`'s models here: a GPU's (a CPU's are hobbit.runtime.cache's)."""
    return isinstance(target, GpuTarget)


def toolchain(target: GpuTarget) -> list:
    """What besides hobbit decides the device code, for the key: the ptxas (NVIDIA) or ld.lld
    (AMD) that would run, by path, size and modification time; for NVIDIA None where there is
    no ptxas (the model then has PTX and no cubin, so installing ptxas must be a miss)."""
    find = ptxas_path if target.vendor == "cuda" else lld_path
    try:
        path = find()
    except MissingDependencyError:
        return [target.vendor, None]
    try:
        st = os.stat(path)
    except OSError:
        return [target.vendor, path, None]
    return [target.vendor, path, st.st_size, st.st_mtime_ns]


def load(key: str, planned: Callable[[], tuple[Graph, MemoryPlan]] | None) -> GpuModel | None:
    """The GpuModel stored under `key`, or None on a miss (also for an untrusted entry, with a
    warning, or a damaged one, deleted with a warning). `planned` makes the graph after the
    passes and its plan again, for the host build of the kernels emulate() runs (host_rebuild;
    None: emulate() says it has none, as for a loaded export)."""
    t0 = time.perf_counter()
    root = cache_dir()
    entry = root / key
    if not entry.is_dir():
        return None
    try:
        _require_private(root, "compile cache folder")
        problem = check_private_tree(entry, "compile cache entry")
        if problem is not None:
            raise _Untrusted(problem)
        body = _read_manifest(entry / MANIFEST_FILE)
        if body.get("kind") != KIND:
            raise ValueError("it is not a GPU model's entry")
        export_path = entry / f"{EXPORT_NAME}.json"
        raw = _read_private(export_path)
        if _sha256(raw) != body["export_sha256"]:
            raise ValueError(f"{export_path.name} does not match the sha256 in the cache manifest")
        fields = read_device_export(entry, json.loads(raw), export_path)
        if _sha256(fields["weights"]) != body["weights_sha256"]:
            raise ValueError("the weights do not match the sha256 in the cache manifest")
        resources = {name: KernelResources(**r) for name, r in body["resources"].items()}
    except _Untrusted as exc:
        _warn_untrusted(str(exc))
        return None
    except (OSError, ValueError, KeyError, TypeError, ArtifactError) as exc:
        warnings.warn(f"hobbit: compile cache entry {entry} is damaged ({type(exc).__name__}: {exc}); deleted, "
                      f"compiling again", stacklevel=3)
        shutil.rmtree(entry, ignore_errors=True)
        return None
    report = CachedReport(str(entry), fields["target"], 1, fields["weights"], {"cache": time.perf_counter() - t0},
                          origin=f"the compile cache ({entry})")
    _touch(entry / MANIFEST_FILE)
    host_module = None if planned is None else host_rebuild(planned, fields["target"],
                                                            [launch.kernel for launch in fields["launches"]])
    return GpuModel(**fields, resources=resources, host_module=host_module, report=report)


def store(key: str, model: GpuModel) -> None:
    """Write `model` as the entry `key`, atomically; as for CPU entries a cache that cannot be
    written costs a warning, and one not private to this user is not written to."""
    def fill(root: Path, tmp: Path) -> dict:
        files = export_device(model, tmp, EXPORT_NAME)
        for path in files.written:
            os.chmod(path, _PRIVATE_FILE)  # the export's files follow the umask; an entry's are 0600
        return {"format": FORMAT, "kind": KIND, "export_sha256": _sha256(files.manifest.read_bytes()),
                "weights_sha256": _sha256(np.ascontiguousarray(model.weights).view(np.uint8).reshape(-1)),
                "resources": {name: asdict(r) for name, r in model.resources.items()}}
    write_entry(key, fill)


def host_rebuild(planned: Callable[[], tuple[Graph, MemoryPlan]], target: GpuTarget,
                 kernels: list[str]) -> Callable[[], str]:
    """A cache hit's `host_module`: the graph after the passes and its plan made again by
    `planned` (the compile's own import, passes and planner), and the host flavour of its
    kernels built from them, as the GPU backend's finish builds it. The code is the cached
    code's (the key holds hobbit's sources and every option), so the kernels have the
    cached launches' names (`kernels`); a CodegenError if not, rather than an emulator
    calling a kernel that is not there."""
    def host_module() -> str:
        graph, plan = planned()
        text, launches = build_gpu_module(graph, plan, target, "host")
        built = [launch.kernel for launch in launches]
        if built != kernels:
            raise CodegenError(f"the host build of a cached GPU model has kernels {built[:3]}... where the cache "
                               f"entry has {kernels[:3]}...: compile with cache=False to emulate it")
        return text
    return host_module
