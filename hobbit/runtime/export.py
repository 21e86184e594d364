"""AOT export: a compiled model -> a shared library with a C API, run without Python.

`export_library` writes, into one folder:
  lib<name>.so   the model's machine code, hobbit's thread runtime and the C API (capi.c)
  lib<name>.a    the same as one object in an archive, for static linking (link with -lm)
  <name>.h       the tensors and the API, documented
  <name>.weights the packed constants, mapped read-only by <name>_create (or inside the library)
  <name>.json    the manifest hobbit.load reads: target CPU and features, sizes, checksums,
                 and for a model with run-time dims its "dynamic" section (RunTimeDims)

The model's code is the very object MCJIT made for the in-process model (CompiledModel
keeps it), so JIT and AOT run the same instructions; for a CPU this host cannot run it is
the object LLVM emits for that target (ExportOnlyModel). The thread runtime is compiled by
LLVM from the same IR the JIT loads (hobbit.runtime.pool), for the model's target. The C
compiler for the target's architecture compiles capi.c and links: the system's (`cc`, or
$CC) for the host's, the cross toolchain `<arch>-linux-gnu-gcc` (with its objcopy and ar)
for another, e.g. Debian's gcc-aarch64-linux-gnu. The library needs only libc, libm and
libgcc_s.

A model with run-time dims (hobbit.runtime.dynamic) exports the module compiled at its
bound: its last input is the dims vector, the library checks each value against its bounds
before it runs (capi.c), and the manifest and header describe the symbols, their bounds and
every tensor's shape as extents of them (hobbit.runtime.export_c.RunTimeDims), so that
hobbit.load runs it again as a DynamicModel and a C programmer can call it.

The weights never go into the IR: a constant in the IR text costs seconds and gigabytes
to parse for a 100 MB model. Up to EMBED_LIMIT they are assembled into the library itself
(`.incbin` of the packed blob, 64-byte aligned, read-only): one file to ship and nothing to
keep in step. Above it they go into <name>.weights beside the library, mapped read-only:
a static link would otherwise copy hundreds of MB into every executable, and the file can
be replaced, checked or paged without touching the code. <name>_create checks the
weights' crc32 (and a file's size) before the first run, so damaged or mismatched weights
are an error, not wrong answers (the check reads every byte once: 17 ms for SqueezeNet's
7.5 MB here, so a 100 MB model pays ~0.2 s per context). `weights="embed"` or `"file"`
chooses either way for any size.

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

from hobbit.backend.llvm import emit_object, optimize
from hobbit.errors import CodegenError, ConfigError
from hobbit.runtime.export_c import LibraryFacts, RunTimeDims, model_config, public_header
from hobbit.runtime.layout import Layout, to_json
from hobbit.runtime.pool import runtime_module
from hobbit.target import Target

MANIFEST_FORMAT = 2
# Weights up to this size go inside the library (weights="auto"): SqueezeNet (5 MB) and
# MobileNetV2 (14 MB) ship as one file; ResNet-18's 47 MB and up stay beside it, where a
# static link does not copy them into each executable. At this size the per-context crc32
# check costs ~40 ms.
EMBED_LIMIT = 16 * 1024 * 1024
WEIGHTS_CHOICES = ("auto", "embed", "file")
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
    layout: Layout | None
    checks: list[tuple[int, str, str]]
    threads: int
    dynamic: RunTimeDims | None = None  # run-time dims: the dims vector is the last of `inputs`


@dataclass(frozen=True)
class ArtifactFiles:
    """The paths one export wrote (`weights` is None when they are inside the library)."""

    library: Path
    archive: Path
    header: Path
    weights: Path | None
    manifest: Path

    @property
    def written(self) -> list[Path]:
        return [p for p in (self.library, self.archive, self.header, self.weights, self.manifest) if p is not None]


def artifact_files(directory: Path, name: str, embedded: bool = False) -> ArtifactFiles:
    return ArtifactFiles(directory / f"lib{name}.so", directory / f"lib{name}.a", directory / f"{name}.h",
                         None if embedded else directory / f"{name}.weights", directory / f"{name}.json")


def library_name(directory: Path, name: str | None) -> str:
    """The C prefix of the library: `name`, or the folder's name made into a C identifier."""
    if name is None:
        name = re.sub(r"\W", "_", directory.resolve().name, flags=re.ASCII) or "model"
        return name if _IDENTIFIER.fullmatch(name) else f"_{name}"
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ConfigError(f"export name= must be a C identifier (letters, digits, '_', not starting with a "
                          f"digit): every function of the library is <name>_...; got {name!r}")
    return name


def export_library(model: NativeModel, directory: str | os.PathLike, name: str | None = None,
                   weights: str = "auto") -> ArtifactFiles:
    """Write the library, header, weights and manifest of `model` into `directory` (made if
    missing). `weights`: "auto" (inside the library up to EMBED_LIMIT, else a file), "embed"
    or "file"."""
    if weights not in WEIGHTS_CHOICES:
        raise ConfigError(f"export weights= is one of {', '.join(WEIGHTS_CHOICES)}; got {weights!r}")
    folder = Path(directory)
    name = library_name(folder, name)
    blob = np.ascontiguousarray(model.weights).view(np.uint8).reshape(-1)
    embedded = weights == "embed" or (weights == "auto" and blob.nbytes <= EMBED_LIMIT)
    folder.mkdir(parents=True, exist_ok=True)
    files = artifact_files(folder, name, embedded)
    facts = LibraryFacts(name, model.inputs, model.outputs, model.arena_bytes, blob.nbytes,
                         zlib.crc32(memoryview(blob)), model.threads, model.checks, embedded, model.dynamic)
    with tempfile.TemporaryDirectory(prefix="hobbit-export-") as tmp:
        build = Path(tmp)
        (build / f"{name}.h").write_text(public_header(facts))
        (build / "hobbit_model.h").write_text(model_config(facts))
        (build / "model.o").write_bytes(model.code)
        (build / "runtime.o").write_bytes(emit_object(optimize(runtime_module(model.target), model.target,
                                                               RUNTIME_OPT_LEVEL), model.target))
        blob.tofile(build / ("weights.bin" if embedded else f"{name}.weights"))
        _link(build, name, model.target, embedded)
        manifest = _manifest(model, facts, (build / f"lib{name}.so").read_bytes())
        (build / f"{name}.json").write_text(json.dumps(manifest, indent=1) + "\n")
        stale = folder / f"{name}.weights"
        if embedded and stale.exists():
            stale.unlink()  # an earlier export's file: it would only mislead
        for path in files.written:  # the manifest last: a reader never sees it before the rest
            shutil.move(build / path.name, path)
    return files


# The embedded weights: the packed blob as read-only data, aligned as the arena is (kernels
# use aligned vector loads on constants too).
_WEIGHTS_ASM = """\t.section .rodata.hobbit_weights,"a"
\t.balign 64
\t.globl hobbit_weights_data
hobbit_weights_data:
\t.incbin "{path}"
\t.section .note.GNU-stack,"",%progbits
"""


def _link(build: Path, name: str, target: Target, embedded: bool) -> None:
    """capi.c and the objects -> lib<name>.so and lib<name>.a, only <name>_* global in either."""
    compiler, objcopy, ar = _toolchain(target)
    (build / "capi.c").write_text(resources.files("hobbit.runtime").joinpath("capi.c").read_text())
    _run([compiler, "-c", "-fPIC", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-DHOBBIT_PREFIX={name}", "-I", str(build),
          "-o", str(build / "capi.o"), str(build / "capi.c")], "compiling the C API")
    objects = [str(build / "capi.o"), str(build / "model.o"), str(build / "runtime.o")]
    if embedded:
        (build / "weights.S").write_text(_WEIGHTS_ASM.format(path=build / "weights.bin"))
        _run([compiler, "-c", "-o", str(build / "weights.o"), str(build / "weights.S")], "assembling the weights")
        objects.append(str(build / "weights.o"))
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
        "weights": {"file": None if facts.embedded else f"{facts.name}.weights", "bytes": facts.weights_bytes,
                    "crc32": facts.weights_crc32},
        "inputs": [s.to_json() for s in model.inputs],
        "outputs": [s.to_json() for s in model.outputs],
        "layout": None if model.layout is None else to_json(model.layout),
        "dynamic": None if model.dynamic is None else model.dynamic.to_json(),
    }
