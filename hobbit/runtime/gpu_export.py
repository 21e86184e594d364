"""A GPU model's export folder: written by GpuModel.export, read back by hobbit.load.

The folder has the shape of a CPU export (hobbit.runtime.export), with the device code in
place of the library:
  <name>.ptx     the PTX (cuda), which the driver compiles for any newer device
  <name>.cubin   ptxas's machine code for the target's arch (cuda, where ptxas was found)
  <name>.hsaco   the AMDGPU code object (rocm), in place of both
  <name>.weights the packed constants, copied to the device once
  <name>.json    the manifest: target vendor and arch, arena, checksums, tensors, launches

Reading it back follows the CPU's trust rules (hobbit.runtime.load): the folder and every
file in it private to this user (hobbit.runtime.trust); every manifest field checked
(hobbit.runtime.manifest.check_device_manifest); each file opened once and checked and used
through that descriptor (hobbit.runtime.verified): the device code's sha256 must be the
manifest's (it is native code the driver loads), the weights' size and crc32 too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hobbit.backend.gpu.launch import Launch
from hobbit.errors import ArtifactError, ConfigError
from hobbit.runtime.allocation import aligned_empty
from hobbit.runtime.export import MANIFEST_FORMAT, WEIGHTS_CHOICES, library_name
from hobbit.runtime.jit import TensorSpec
from hobbit.runtime.layout import from_json, to_json
from hobbit.runtime.manifest import check_device_manifest
from hobbit.runtime.verified import open_private
from hobbit.target import GPUS

CODE_SUFFIX = {"cuda": ".ptx", "rocm": ".hsaco"}


@dataclass(frozen=True)
class DeviceFiles:
    """The paths one GPU export wrote (`cubin` is None where there is none)."""

    code: Path
    cubin: Path | None
    weights: Path
    manifest: Path

    @property
    def written(self) -> list[Path]:
        return [p for p in (self.code, self.cubin, self.weights, self.manifest) if p is not None]


def device_files(directory: Path, name: str, vendor: str, cubin: bool) -> DeviceFiles:
    return DeviceFiles(directory / f"{name}{CODE_SUFFIX[vendor]}", directory / f"{name}.cubin" if cubin else None,
                       directory / f"{name}.weights", directory / f"{name}.json")


def export_device(model: Any, directory: str | os.PathLike, name: str | None = None,
                  weights: str = "auto") -> DeviceFiles:
    """Write `model`'s (a GpuModel's) device code, weights and manifest into `directory` (made
    if missing); the manifest last, so a reader never sees it before the rest."""
    if weights not in WEIGHTS_CHOICES:
        raise ConfigError(f"export weights= is one of {', '.join(WEIGHTS_CHOICES)}; got {weights!r}")
    if weights == "embed":
        raise ConfigError("a GPU model's weights go beside its device code (<name>.weights), which cannot hold "
                          "them: export it with weights='auto' or 'file'")
    folder = Path(directory)
    name = library_name(folder, name)
    target = model.target
    code = model.device_code.encode() if isinstance(model.device_code, str) else bytes(model.device_code)
    blob = np.ascontiguousarray(model.weights).view(np.uint8).reshape(-1)
    folder.mkdir(parents=True, exist_ok=True)
    files = device_files(folder, name, target.vendor, model.cubin is not None)
    manifest = {
        "format": MANIFEST_FORMAT,
        "name": name,
        "target": {"vendor": target.vendor, "arch": target.arch},
        "arena_bytes": int(model.arena_bytes),
        "device_code": {"file": files.code.name, "sha256": hashlib.sha256(code).hexdigest()},
        "cubin": None if model.cubin is None else {"file": files.cubin.name,
                                                   "sha256": hashlib.sha256(model.cubin).hexdigest()},
        "weights": {"file": files.weights.name, "bytes": int(blob.nbytes), "crc32": zlib.crc32(memoryview(blob))},
        "inputs": [s.to_json() for s in model.inputs],
        "outputs": [s.to_json() for s in model.outputs],
        "layout": None if model.layout is None else to_json(model.layout),
        "launches": [launch.to_json() for launch in model.launches],
    }
    with tempfile.TemporaryDirectory(prefix="hobbit-export-") as tmp:
        build = Path(tmp)
        (build / files.code.name).write_bytes(code)
        if model.cubin is not None:
            (build / files.cubin.name).write_bytes(model.cubin)
        blob.tofile(build / files.weights.name)
        (build / files.manifest.name).write_text(json.dumps(manifest, indent=1) + "\n")
        stale = folder / f"{name}.cubin"
        if model.cubin is None and stale.exists():
            stale.unlink()  # an earlier export's cubin: it would only mislead
        for path in files.written:
            shutil.move(build / path.name, path)
    return files


def is_device_manifest(manifest: Any) -> bool:
    """Whether a manifest is a GPU model's (it has a launch list) rather than a library's."""
    return isinstance(manifest, dict) and "launches" in manifest


def read_device_export(folder: Path, manifest: dict, path: Path) -> dict[str, Any]:
    """The model exported into `folder` under the manifest `manifest` (read from `path`), as the
    fields of the hobbit.runtime.gpu_model.GpuModel it was (which imports this module), every
    part checked: target, inputs, outputs, launches, weights, arena_bytes, device_code, cubin
    and layout."""
    manifest = check_device_manifest(manifest, path)
    name, vendor = manifest["name"], manifest["target"]["vendor"]
    target = GPUS.get(manifest["target"]["arch"])
    if target is None or target.vendor != vendor:
        raise ArtifactError(f"{path} is for {vendor} {manifest['target']['arch']}, a GPU this hobbit does not know "
                            f"(it knows {', '.join(GPUS)}): export it again with this hobbit")
    files = device_files(folder, name, vendor, manifest["cubin"] is not None)
    code = _read_checked(files.code, manifest["device_code"]["sha256"], "device code")
    cubin = None if files.cubin is None else _read_checked(files.cubin, manifest["cubin"]["sha256"], "cubin")
    weights = _read_weights(files.weights, manifest["weights"]["bytes"], manifest["weights"]["crc32"])
    if vendor == "cuda":
        try:
            code = code.decode("ascii")
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"{files.code} is not PTX text: damaged; export the model again") from exc
    layout = manifest["layout"]
    return {"target": target, "inputs": [TensorSpec.from_json(s) for s in manifest["inputs"]],
            "outputs": [TensorSpec.from_json(s) for s in manifest["outputs"]],
            "launches": [Launch.from_json(launch) for launch in manifest["launches"]], "weights": weights,
            "arena_bytes": int(manifest["arena_bytes"]), "device_code": code, "cubin": cubin,
            "layout": None if layout is None else from_json(layout)}


def _read_checked(path: Path, sha256: str, what: str) -> bytes:
    """The bytes of a private file, read once through one descriptor, whose sha256 is `sha256`."""
    with os.fdopen(open_private(path, what), "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactError(f"{path} is not the {what} that was exported (its sha256 differs from the manifest's): "
                            f"damaged or replaced; export it again")
    return data


def _read_weights(path: Path, size: int, crc32: int) -> np.ndarray:
    """The weights file's bytes, private, of the recorded size and crc32, 64-byte aligned."""
    with os.fdopen(open_private(path, "weights file"), "rb") as f:
        actual = os.fstat(f.fileno()).st_size
        if actual != size:
            raise ArtifactError(f"the weights file {path} has {actual} bytes, the model needs {size}: damaged or "
                                f"from another export")
        blob = aligned_empty(size)
        if size and f.readinto(memoryview(blob)) != size:
            raise ArtifactError(f"the weights file {path} could not be read whole")
    if zlib.crc32(memoryview(blob)) != crc32:
        raise ArtifactError(f"the weights file {path} does not have the exported weights' crc32: damaged or from "
                            f"another export")
    blob.flags.writeable = False
    return blob
