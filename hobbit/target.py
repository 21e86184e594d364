"""The target description: the single source for what a machine is.

Schedules read vector width, register count, cache sizes and core count from
here; codegen reads the triple, CPU name and feature string. It lives on the
ground floor beside errors because passes, schedules and codegen all read it;
llvmlite is imported only inside host_target(), which asks LLVM what the host
is, so importing the graph or the passes does not load LLVM. The LLVM
TargetMachine built from a Target is codegen's: hobbit/codegen/machine.py."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Target:
    triple: str
    cpu: str
    features: str
    vector_bits: int
    vector_registers: int
    l1_bytes: int
    l2_bytes: int
    cores: int

    def lanes(self, itemsize: int) -> int:
        """Elements of `itemsize` bytes in one vector register."""
        return max(1, self.vector_bits // (8 * itemsize))

    @property
    def key(self) -> str:
        return f"{self.triple}|{self.cpu}|{self.features}"


def _cache_size(index: int, default: int) -> int:
    path = f"/sys/devices/system/cpu/cpu0/cache/index{index}/size"
    try:
        text = open(path).read().strip()
    except OSError:
        return default
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
    return int(text.rstrip("KM")) * scale


@lru_cache(maxsize=None)
def host_target() -> Target:
    """The machine we run on: LLVM's host CPU name and features, caches from sysfs."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features()
    flat = features.flatten()
    if features.get("avx512f"):
        bits, regs = 512, 32
    elif features.get("avx2") or features.get("avx"):
        bits, regs = 256, 16
    else:
        bits, regs = 128, 16
    return Target(
        triple=llvm.get_process_triple(),
        cpu=llvm.get_host_cpu_name(),
        features=flat,
        vector_bits=bits,
        vector_registers=regs,
        l1_bytes=_cache_size(0, 32 * 1024),
        l2_bytes=_cache_size(2, 1024 * 1024),
        cores=len(os.sched_getaffinity(0)),
    )
