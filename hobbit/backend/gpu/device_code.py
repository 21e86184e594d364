"""Finishing a GPU module (hobbit.backend.gpu.backend, after LLVM's NVPTX or AMDGPU back end
made PTX or an object): ptxas assembles the PTX to a cubin (with its register and spill
counts), ld.lld links the AMDGPU object into a code object (.hsaco). The tools come from
packages, found at run time: ptxas from pip's nvidia-cuda-nvcc (or a CUDA toolkit on PATH),
ld.lld from Debian's lld (ld.lld-22, or ld.lld on PATH)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hobbit.errors import CodegenError, MissingDependencyError
from hobbit.target import GpuTarget


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel: registers per thread, spill traffic, static shared
    memory. Spills are local-memory stores and loads a register shortage forced."""

    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int


def find_tool(names: list[str], pip_globs: list[str], what: str, extra: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    import sys
    for pattern in pip_globs:
        for path in sorted(glob.glob(os.path.join(sys.prefix, pattern))):
            if os.access(path, os.X_OK):
                return path
    raise MissingDependencyError(f"{what} was not found (looked for {', '.join(names)} on PATH and in this "
                                 f"environment's packages): {extra}")


def ptxas_path() -> str:
    return find_tool(["ptxas"], ["lib/python*/site-packages/nvidia/cu*/bin/ptxas",
                                 "lib/python*/site-packages/nvidia/cuda_nvcc/bin/ptxas"],
                     "ptxas", "pip install nvidia-cuda-nvcc (or hobbit[cuda])")


def assemble_ptx(ptx_text: str, target: GpuTarget) -> tuple[bytes, dict[str, KernelResources]]:
    """PTX -> cubin for target.arch with ptxas, and each kernel's resources from its -v report."""
    with tempfile.TemporaryDirectory(prefix="hobbit-ptx-") as tmp:
        source, cubin = Path(tmp, "model.ptx"), Path(tmp, "model.cubin")
        source.write_text(ptx_text)
        done = subprocess.run([ptxas_path(), f"-arch={target.arch}", "-O3", "-v", str(source), "-o", str(cubin)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CodegenError(f"ptxas rejected the generated PTX for {target.arch}:\n{done.stderr.strip()[:4000]}")
        return cubin.read_bytes(), parse_ptxas_report(done.stderr)


def parse_ptxas_report(text: str) -> dict[str, KernelResources]:
    """ptxas -v's lines, per kernel: 'Compiling entry function 'NAME'', then 'N bytes spill
    stores, M bytes spill loads' and 'Used R registers, ... S bytes smem'."""
    kernels: dict[str, KernelResources] = {}
    name, spills = None, (0, 0)
    for line in text.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            name, spills = entry.group(1), (0, 0)
            continue
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if spill:
            spills = (int(spill.group(1)), int(spill.group(2)))
            continue
        used = re.search(r"Used (\d+) registers", line)
        if used and name is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            kernels[name] = KernelResources(int(used.group(1)), spills[0], spills[1],
                                            int(smem.group(1)) if smem else 0)
    return kernels


def lld_path() -> str:
    return find_tool(["ld.lld-22", "ld.lld"], [], "ld.lld", "apt-get install lld-22 (Debian) to link AMDGPU code objects")


def link_hsaco(obj: bytes, target: GpuTarget) -> bytes:
    """LLVM's AMDGPU object for target.arch, linked by ld.lld into a code object."""
    with tempfile.TemporaryDirectory(prefix="hobbit-hsaco-") as tmp:
        source, linked = Path(tmp, "model.o"), Path(tmp, "model.hsaco")
        source.write_bytes(obj)
        done = subprocess.run([lld_path(), "-shared", "--no-undefined", str(source), "-o", str(linked)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CodegenError(f"ld.lld could not link the AMDGPU object for {target.arch}:\n{done.stderr.strip()}")
        return linked.read_bytes()


def kernel_descriptors(code_object: bytes) -> list[str]:
    """The kernels a code object describes: its `<kernel>.kd` symbols (the kernel descriptor
    the HSA runtime reads a launch from), from the ELF64 symbol tables (.symtab, .dynsym)."""
    return [name[:-3] for name in elf_symbols(code_object) if name.endswith(".kd")]


def elf_symbols(data: bytes) -> list[str]:
    """The names in a little-endian ELF64 file's symbol tables (SHT_SYMTAB 2, SHT_DYNSYM 11):
    section headers at e_shoff, each 64 bytes; a symbol table's sh_link is its string table."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CodegenError("not a little-endian ELF64 code object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in (2, 11):
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            name_at, = struct.unpack_from("<I", data, at)
            end = data.index(b"\0", strtab + name_at)
            if name_at:
                names.add(data[strtab + name_at: end].decode())
    return sorted(names)
