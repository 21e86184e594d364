"""The compile cache on disk: a repeated compile loads native code and weights instead of compiling.

An entry is keyed by a sha256 over the model (its Source's fingerprint: for ONNX a file's
bytes plus any external-data files, or a ModelProto field by field; bytes and ModelProtos
plus the external-data files they name in compile(external_data_dir=...)), the full target
description, the compile options, and hobbit's own version and source files plus the
llvmlite, numpy and onnx versions, so a changed compiler never reuses stale code. It holds the machine code
MCJIT produced (an ELF object) and a manifest with the arena size, the input/output
specs, the sha256 of the object code and the sha256 naming its packed weights blob. Blobs
are stored once by content in weights/<sha256>.bin, so the variants of a model compiled per
input signature share one file (one copy in memory too: hobbit.runtime.weights). Entries
are written to a temporary folder and renamed into place, so readers never see half an
entry; one that fails its hashes is deleted with a warning and the model recompiled.

Loading an entry maps machine code into the process, so the cache is only used when it is
private to this user (hobbit.runtime.trust): the folder is created with mode 0700 and its
files 0600, and a folder, entry or file owned by another user or writable by group/others
is skipped with a warning (once per process per path), never loaded; the model is then
compiled as with HOBBIT_CACHE=0. The hashes are sha256, not crc32, so a file changed on
purpose is caught as well as one damaged by accident: sha256 reads 1.6 GB/s here against
crc32's 4 GB/s, about 0.2 s more on the first load of VGG-16's 528 MB of weights in a process.

A GPU model's entry (hobbit.runtime.gpu_cache) is its export folder with a manifest.json of
this format beside it, under a key made here from the GPU's description; it shares the
folder, the trust rules and the eviction below.

The location is $HOBBIT_CACHE_DIR, else ~/.cache/hobbit. HOBBIT_CACHE=0 turns the
cache off unless compile(cache=True) asks for it; the folder is kept under
$HOBBIT_CACHE_MAX_BYTES (default 4 GiB) by deleting the least recently used entries."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import llvmlite
import numpy as np
import onnx

from hobbit.frontend.common.source import Source, feed
from hobbit.target import GpuTarget, Target
from hobbit.version import __version__
from hobbit.runtime import trust
from hobbit.runtime import weights as shared_weights
from hobbit.runtime.jit import CompiledModel, TensorSpec
from hobbit.runtime.build_id import source_hash
from hobbit.runtime.layout import Layout, from_json, to_json
from hobbit.runtime.loaded_report import CachedReport

FORMAT = 4
CODE_FILE = "code.o"
WEIGHTS_FILE = "weights.bin"  # the manifest's record of the weights file; the file is in WEIGHTS_DIR
WEIGHTS_DIR = "weights"
MANIFEST_FILE = "manifest.json"
DEFAULT_MAX_BYTES = 4 << 30
_STALE_TMP_SECONDS = 3600
# How a TensorProto's external_data entry {key: "location"} is encoded: a file without
# these bytes has no external data, so most models skip parsing for their key.
_LOCATION_MARKER = b"\x0a\x08location"
_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600
_WARNED: set[str] = set()  # paths already warned about as untrusted in this process


def enabled(cache: bool | None) -> bool:
    """compile(cache=...) -> whether to use the cache: an explicit bool wins, else HOBBIT_CACHE."""
    if cache is not None:
        return cache
    return os.environ.get("HOBBIT_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def cache_dir() -> Path:
    return Path(os.environ.get("HOBBIT_CACHE_DIR") or Path.home() / ".cache" / "hobbit")


# -- keys --------------------------------------------------------------------------------
def compile_key(source: Source, target: Target, options: dict[str, Any]) -> str | None:
    """The entry name for compiling `source` with these options, or None when the model
    cannot be read (the frontend then reports why)."""
    model = source.fingerprint()
    if model is None:
        return None
    h = hashlib.sha256()
    head = {"format": FORMAT, "hobbit": __version__, "sources": source_hash(),
            "llvmlite": llvmlite.__version__, "numpy": np.__version__, "onnx": onnx.__version__,
            "target": _target_fields(target), "options": options}
    feed(h, "head", json.dumps(head, sort_keys=True, default=str).encode())
    feed(h, "model", model.encode())
    return h.hexdigest()


def _target_fields(target: Target) -> list:
    """What of the target decides the code: a CPU's triple, CPU, features, vector width,
    registers, caches and cores; a GPU's (hobbit.target.GpuTarget, which has no caches or
    vector width) every field, its vendor and arch first."""
    if isinstance(target, GpuTarget):
        return ["gpu", *(getattr(target, f.name) for f in dataclasses.fields(target))]
    return [target.triple, target.cpu, target.features, target.vector_bits, target.vector_registers,
            target.l1_bytes, target.l2_bytes, target.cores]


# -- entries -----------------------------------------------------------------------------
class _Untrusted(Exception):
    """A cache path that is not private to this user; caught inside this module, never raised
    to callers (an untrusted cache is skipped with a warning, not an error)."""


def load(key: str, target: Target, threads: int) -> CompiledModel | None:
    """The cached model for `key` (code for `target` built for `threads`, both part of the
    key), or None on a miss. An entry whose folders or files are not
    private to this user is skipped with a warning and left alone for the user to inspect
    (the warning says how to fix it); a damaged one is deleted with a warning (and its
    weights file, when that is what failed its hash)."""
    t0 = time.perf_counter()
    root = cache_dir()
    entry = root / key
    if not entry.is_dir():
        return None
    try:
        _require_private(root, "compile cache folder")
        _require_private(entry, "compile cache entry")
        manifest = _read_manifest(entry / MANIFEST_FILE)
        code = _read_private(entry / CODE_FILE)
        if not _matches(code, manifest["files"][CODE_FILE]["size"], manifest["files"][CODE_FILE]["sha256"]):
            raise ValueError("the object code does not match the sha256 in its manifest")
        weights = _load_weights(root, str(manifest["weights"]), manifest["files"][WEIGHTS_FILE])
        inputs = [TensorSpec.from_json(s) for s in manifest["inputs"]]
        outputs = [TensorSpec.from_json(s) for s in manifest["outputs"]]
        layout = from_json(manifest["layout"])
        arena_bytes = int(manifest["arena_bytes"])
        extra = manifest.get("extra")
        if extra is not None and not isinstance(extra, dict):
            raise ValueError("its extra record is not an object")
    except _Untrusted as exc:
        _warn_untrusted(str(exc))
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"hobbit: compile cache entry {entry} is damaged ({type(exc).__name__}: {exc}); deleted, compiling again",
                      stacklevel=3)
        shutil.rmtree(entry, ignore_errors=True)
        return None
    report = CachedReport(str(entry), target, threads, weights, {"cache": time.perf_counter() - t0}, extra=extra,
                          origin=f"the compile cache ({entry})")
    t0 = time.perf_counter()
    model = CompiledModel(code, target, weights, arena_bytes, inputs, outputs, report, layout=layout)
    report.seconds["jit"] = time.perf_counter() - t0
    _touch(entry / MANIFEST_FILE)
    return model


def _load_weights(root: Path, name: str, record: dict) -> np.ndarray:
    """The blob named by its sha256: the array a live variant already holds (hashed when it
    was made or loaded), else the file mapped and hashed (a damaged file is deleted, ValueError)."""
    live = shared_weights.lookup(name)
    if live is not None and live.nbytes == record["size"]:
        return live
    path = _weights_path(root, name)
    _require_private(path.parent, "compile cache weights folder")
    weights = _map_weights(path, record["size"])
    if not _matches(weights, record["size"], name):
        del weights
        path.unlink(missing_ok=True)
        raise ValueError(f"weights file {path} does not match its sha256")
    return shared_weights.share(weights, name)


def _weights_path(root: Path, name: str) -> Path:
    if len(name) != 64 or not all(c in "0123456789abcdef" for c in name):
        raise ValueError(f"bad weights name {name!r}")
    return root / WEIGHTS_DIR / f"{name}.bin"


def _read_manifest(path: Path) -> dict:
    """The manifest's body, checked against its own sha256 (ValueError if damaged)."""
    doc = json.loads(_read_private(path))
    body = doc["body"]
    if doc["sha256"] != _sha256(_canonical(body)) or body["format"] != FORMAT:
        raise ValueError("the manifest does not match its sha256")
    return body


def _read_private(path: Path) -> bytes:
    """The file's bytes, checked private on the open file itself (fstat), so the file checked
    is the file read even if the path is swapped in between."""
    with open(path, "rb") as f:
        _require_private_stat(os.fstat(f.fileno()), path)
        return f.read()


def _map_weights(path: Path, size: int) -> np.ndarray:
    """The weights blob, mapped copy-on-write: page-aligned (so 64-byte aligned), read lazily,
    and private, so nothing done to the array reaches the file. Weights files are only ever
    replaced by rename, never rewritten in place, so the mapping stays valid."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        _require_private_stat(st, path)
        if st.st_size != size:
            raise ValueError(f"weights file {path} has {st.st_size} bytes, its manifest says {size}")
        if size == 0:
            return np.zeros(0, dtype=np.uint8)
        return np.memmap(f, dtype=np.uint8, mode="c", shape=(size,))


def _require_private(path: Path, what: str) -> None:
    problem = trust.check_private(path, what)
    if problem is not None:
        raise _Untrusted(problem)


def _require_private_stat(st: os.stat_result, path: Path) -> None:
    problem = trust.check_stat(st, path, "compile cache file")
    if problem is not None:
        raise _Untrusted(problem)


def _warn_untrusted(problem: str) -> None:
    """One warning per process per path: a compile per input signature would repeat it."""
    if problem in _WARNED:
        return
    _WARNED.add(problem)
    warnings.warn(f"hobbit: not using the compile cache: {problem}", stacklevel=4)


def _matches(data, size: int, sha256: str) -> bool:
    return len(memoryview(data)) == size and _sha256(data) == sha256


def _sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True).encode()


def _touch(path: Path) -> None:
    """Mark an entry recently used, for eviction."""
    try:
        os.utime(path)
    except OSError:
        pass


def write_entry(key: str, fill: Callable[[Path, Path], dict]) -> None:
    """Write entry `key` atomically, CPU or GPU: fill(root, folder) writes the entry's files in
    a private temporary folder and returns its manifest's body, which is written beside them
    before the folder is renamed into place. A cache that cannot be written costs a warning,
    and one not private to this user is not written to at all."""
    root = cache_dir()
    try:
        root.mkdir(mode=_PRIVATE_DIR, parents=True, exist_ok=True)
        _require_private(root, "compile cache folder")
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
    except _Untrusted as exc:
        _warn_untrusted(str(exc))
        return
    except OSError as exc:
        warnings.warn(f"hobbit: cannot write the compile cache in {root}: {exc}", stacklevel=4)
        return
    try:
        body = fill(root, tmp)
        manifest = {"body": body, "sha256": _sha256(_canonical(body))}
        _write_private(tmp / MANIFEST_FILE, json.dumps(manifest).encode())
        try:
            os.rename(tmp, root / key)
        except OSError:
            pass  # another process stored the same entry first
    except OSError as exc:
        warnings.warn(f"hobbit: cannot write the compile cache in {root}: {exc}", stacklevel=4)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _evict(root, keep=key)


def store(key: str, code: bytes, weights: np.ndarray, arena_bytes: int,
          inputs: list[TensorSpec], outputs: list[TensorSpec], layout: Layout, extra: dict | None = None,
          weights_name: str | None = None) -> None:
    """Write an entry atomically; a cache that cannot be written only costs a warning, and one
    that is not private to this user (hobbit.runtime.trust) is not written to at all.

    The folder is created 0700 and every file 0600 whatever the umask, so a umask that lets
    the group write (0002) does not make the next load refuse hobbit's own entries. The
    weights go to weights/<sha256>.bin, written only if no entry stored those bytes before,
    so variants of one model (one per input signature) share one file. `extra`: JSON the
    compiler needs back with the code (a module with run-time dims: its extents), in
    CachedReport.extra after a load. `weights_name`: the weights' digest where the caller
    already has it (hashing VGG-16's 553 MB blob takes 0.4 s, and the finish hashed it first)."""
    def fill(root: Path, tmp: Path) -> dict:
        _write_private(tmp / CODE_FILE, code)
        blob = np.ascontiguousarray(weights).view(np.uint8).reshape(-1)
        name = weights_name or shared_weights.digest(blob)
        _store_weights(root, tmp, name, blob)
        body = {"format": FORMAT, "arena_bytes": int(arena_bytes), "weights": name,
                "inputs": [s.to_json() for s in inputs], "outputs": [s.to_json() for s in outputs],
                "layout": to_json(layout),
                "files": {CODE_FILE: {"size": len(code), "sha256": _sha256(code)},
                          WEIGHTS_FILE: {"size": int(blob.size)}}}
        if extra is not None:
            body["extra"] = extra
        return body
    write_entry(key, fill)


def _store_weights(root: Path, tmp: Path, name: str, blob: np.ndarray) -> None:
    """weights/<name>.bin, unless a private file of the right size is there (its hash is
    checked on load); one that is not private is replaced."""
    path = _weights_path(root, name)
    if path.exists() and path.stat().st_size == blob.size and trust.check_private(path, "compile cache weights file") is None:
        return
    path.parent.mkdir(mode=_PRIVATE_DIR, exist_ok=True)
    staged = tmp / WEIGHTS_FILE
    _write_private(staged, memoryview(blob))
    os.replace(staged, path)


def _write_private(path: Path, data: bytes | memoryview) -> None:
    """A new file readable and writable only by this user (os.open's mode, less the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE)
    with open(fd, "wb") as f:
        f.write(data)


def _evict(root: Path, keep: str) -> None:
    """Delete least recently used entries beyond HOBBIT_CACHE_MAX_BYTES, weights files no entry
    names any more, and leftovers of writers that died more than an hour ago. A weights file
    counts once however many entries share it, and goes with the last of them."""
    limit = int(os.environ.get("HOBBIT_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
    now = time.time()
    entries = []
    try:
        for child in root.iterdir():
            if child.name.startswith(".tmp-"):
                if now - child.stat().st_mtime > _STALE_TMP_SECONDS:
                    shutil.rmtree(child, ignore_errors=True)
                continue
            if child.is_dir() and child.name != WEIGHTS_DIR:
                size = sum(f.stat().st_size for f in child.iterdir())
                used = (child / MANIFEST_FILE).stat().st_mtime if (child / MANIFEST_FILE).exists() else 0.0
                entries.append((now if child.name == keep else used, size, child, _weights_name(child)))
        blobs = {p.stem: p for p in (root / WEIGHTS_DIR).iterdir()} if (root / WEIGHTS_DIR).is_dir() else {}
        sizes = {name: p.stat().st_size for name, p in blobs.items()}
    except OSError:
        return
    users: dict[str, int] = {}
    for *_, name in entries:
        users[name] = users.get(name, 0) + 1
    for name, path in blobs.items():
        if name not in users and now - path.stat().st_mtime > _STALE_TMP_SECONDS:
            path.unlink(missing_ok=True)  # a fresh one may belong to an entry being written
            sizes.pop(name)
    total = sum(size for _, size, _, _ in entries) + sum(sizes.values())
    for _, size, child, name in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        if child.name == keep:
            continue
        shutil.rmtree(child, ignore_errors=True)
        total -= size
        users[name] -= 1
        if users[name] == 0 and name in blobs:
            blobs[name].unlink(missing_ok=True)
            total -= sizes.pop(name, 0)


def _weights_name(entry: Path) -> str:
    """The weights an entry names ('' when its manifest cannot be read)."""
    try:
        return str(json.loads((entry / MANIFEST_FILE).read_bytes())["body"]["weights"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
