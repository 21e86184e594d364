"""AOT export: a compiled model -> a shared library with a C API, run without Python.

`export_library` writes, into one folder:
  lib<name>.so   the model's machine code, hobbit's thread runtime and the C API (capi.c)
  lib<name>.a    the same as one object in an archive, for static linking (link with -lm)
  <name>.h       the tensors and the API, documented
  <name>.weights the packed constants, mapped read-only by <name>_create
  <name>.json    the manifest hobbit.load reads: target CPU and features, sizes, checksums

The model's code is the very object MCJIT made for the in-process model (CompiledModel
keeps it), so JIT and AOT run the same instructions; for a CPU this host cannot run it is
the object LLVM emits for that target (ExportOnlyModel). The thread runtime is compiled by
LLVM from the same IR the JIT loads (hobbit.runtime.pool), for the model's target. The C
compiler for the target's architecture compiles capi.c and links: the system's (`cc`, or
$CC) for the host's, the cross toolchain `<arch>-linux-gnu-gcc` (with its objcopy and ar)
for another, e.g. Debian's gcc-aarch64-linux-gnu. The library needs only libc, libm and
libgcc_s.

The weights always go in their own file, never into the IR or the library: a constant in
the IR text costs seconds and gigabytes to parse for a 100 MB model, and one file format
for every size means one loader and one checksum path. <name>_create checks the file's
size and crc32 before the first run, so a damaged or mismatched file is an error, not
wrong answers (the check reads every byte once: 17 ms for SqueezeNet's 7.5 MB here, so a
100 MB model pays ~0.2 s per context).

Linking choices, each for a reason:
- a version script keeps only <name>_* global: hobbit_main and the runtime's symbols stay
  local, so two exported models (or one beside hobbit's JIT) can share a process;
- -z nodelete: the runtime's worker threads live in the library's code and its fork
  handler is registered without a DSO handle, so unmapping it on dlclose would leave
  both pointing at nothing;
- -z noexecstack: LLVM's objects carry no .note.GNU-stack, which ld reads as "needs an
  executable stack"."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from hobbit.codegen.llvm import emit_object, optimize
from hobbit.errors import CodegenError, ConfigError
from hobbit.runtime.export_c import LibraryFacts, model_config, public_header
from hobbit.runtime.pool import runtime_module
from hobbit.target import Target

MANIFEST_FORMAT = 1
# The thread runtime's optimisation level, as the JIT builds it (hobbit.runtime.pool.load_runtime).
RUNTIME_OPT_LEVEL = 2
# The C API's functions (hobbit/runtime/capi.c), each <name>_<function> in the library.
API_FUNCTIONS = ("create", "run", "error", "destroy", "arena_bytes", "input_bytes", "output_bytes")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class NativeModel:
    """What an export needs from a compiled model."""

    code: bytes  # the model's ELF object, as MCJIT made it
    target: Target
    weights: np.ndarray
    arena_bytes: int
    inputs: list  # TensorSpec
    outputs: list
    layout: list[tuple[str, int | None]] | None
    checks: list[tuple[int, str, str]]
    threads: int


@dataclass(frozen=True)
class ArtifactFiles:
    """The paths one export wrote."""

    library: Path
    archive: Path
    header: Path
    weights: Path
    manifest: Path


def artifact_files(directory: Path, name: str) -> ArtifactFiles:
    return ArtifactFiles(directory / f"lib{name}.so", directory / f"lib{name}.a", directory / f"{name}.h", directory / f"{name}.weights",
                         directory / f"{name}.json")


def library_name(directory: Path, name: str | None) -> str:
    """The C prefix of the library: `name`, or the folder's name made into a C identifier."""
    if name is None:
        name = re.sub(r"\W", "_", directory.resolve().name, flags=re.ASCII) or "model"
        return name if _IDENTIFIER.fullmatch(name) else f"_{name}"
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ConfigError(f"export name= must be a C identifier (letters, digits, '_', not starting with a "
                          f"digit): every function of the library is <name>_...; got {name!r}")
    return name


def export_library(model: NativeModel, directory: str | os.PathLike, name: str | None = None) -> ArtifactFiles:
    """Write the library, header, weights and manifest of `model` into `directory` (made if missing)."""
    folder = Path(directory)
    name = library_name(folder, name)
    folder.mkdir(parents=True, exist_ok=True)
    files = artifact_files(folder, name)
    blob = np.ascontiguousarray(model.weights).view(np.uint8).reshape(-1)
    facts = LibraryFacts(name, model.inputs, model.outputs, model.arena_bytes, blob.nbytes,
                         zlib.crc32(memoryview(blob)), model.threads, model.checks)
    with tempfile.TemporaryDirectory(prefix="hobbit-export-") as tmp:
        build = Path(tmp)
        (build / f"{name}.h").write_text(public_header(facts))
        (build / "hobbit_model.h").write_text(model_config(facts))
        (build / "model.o").write_bytes(model.code)
        (build / "runtime.o").write_bytes(emit_object(optimize(runtime_module(model.target), model.target,
                                                               RUNTIME_OPT_LEVEL), model.target))
        _link(build, name, model.target)
        blob.tofile(build / f"{name}.weights")
        manifest = _manifest(model, facts, (build / f"lib{name}.so").read_bytes())
        (build / f"{name}.json").write_text(json.dumps(manifest, indent=1) + "\n")
        for path in (files.header, files.weights, files.archive, files.library, files.manifest):
            shutil.move(build / path.name, path)  # the manifest last: a reader never sees it before the rest
    return files


def _link(build: Path, name: str, target: Target) -> None:
    """capi.c and the two objects -> lib<name>.so and lib<name>.a, only <name>_* global in either."""
    compiler, objcopy, ar = _toolchain(target)
    (build / "capi.c").write_text(resources.files("hobbit.runtime").joinpath("capi.c").read_text())
    _run([compiler, "-c", "-fPIC", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-DHOBBIT_PREFIX={name}", "-I", str(build),
          "-o", str(build / "capi.o"), str(build / "capi.c")], "compiling the C API")
    objects = [str(build / "capi.o"), str(build / "model.o"), str(build / "runtime.o")]
    (build / "exports.map").write_text(f"{{ global: {name}_*; local: *; }};\n")
    _run([compiler, "-shared", "-o", str(build / f"lib{name}.so"), *objects,
          f"-Wl,--version-script={build / 'exports.map'}", "-Wl,-z,nodelete", "-Wl,-z,noexecstack", "-lm"],
         f"linking lib{name}.so")
    # The archive holds one object whose only globals are the API, as the .so's version script does.
    _run([compiler, "-r", "-nostdlib", "-o", str(build / "all.o"), *objects], "joining the objects")
    api = [f"{name}_{fn}" for fn in API_FUNCTIONS]
    _run([objcopy, *[f"--keep-global-symbol={sym}" for sym in api], str(build / "all.o")],
         "hiding the internal symbols")
    _run([ar, "rcs", str(build / f"lib{name}.a"), str(build / "all.o")], f"archiving lib{name}.a")


def _toolchain(target: Target) -> tuple[str, str, str]:
    """The C compiler, objcopy and ar that make code for the target's architecture."""
    if target.arch == platform.machine():
        return (_tool(os.environ.get("CC", "cc"), "a C compiler ($CC, else cc)", "gcc"),
                _tool("objcopy", "binutils' objcopy", "binutils"), _tool("ar", "binutils' ar", "binutils"))
    prefix = f"{target.arch}-linux-gnu-"
    package = f"gcc-{target.arch}-linux-gnu"
    return tuple(_tool(prefix + tool, f"the {target.arch} cross toolchain", package)
                 for tool in ("gcc", "objcopy", "ar"))


def _tool(program: str, what: str, package: str) -> str:
    if shutil.which(program) is None:
        raise ConfigError(f"exporting a library needs {what}: '{program}' was not found; install {package} "
                          f"(e.g. apt-get install {package})")
    return program


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise CodegenError(f"{what} failed ({command[0]} exited with {done.returncode}):\n{done.stderr.strip()}")


def _manifest(model: NativeModel, facts: LibraryFacts, library: bytes) -> dict:
    return {
        "format": MANIFEST_FORMAT,
        "name": facts.name,
        "target": {"triple": model.target.triple, "cpu": model.target.cpu, "features": model.target.features},
        "threads": model.threads,
        "arena_bytes": model.arena_bytes,
        "library": {"file": f"lib{facts.name}.so", "sha256": hashlib.sha256(library).hexdigest()},
        "weights": {"file": f"{facts.name}.weights", "bytes": facts.weights_bytes, "crc32": facts.weights_crc32},
        "inputs": [_spec(s) for s in model.inputs],
        "outputs": [_spec(s) for s in model.outputs],
        "layout": None if model.layout is None else [list(item) for item in model.layout],
    }


def _spec(spec) -> list:
    return [spec.name, list(spec.shape), np.dtype(spec.dtype).str]
