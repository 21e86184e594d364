"""The target description: the single source for what a machine is.

Schedules read vector width, register count, cache sizes and core count from
here; codegen reads the triple, CPU name and feature string. It lives on the
ground floor beside errors because passes, schedules and codegen all read it;
llvmlite is imported only inside host_target(), which asks LLVM what the host
is, and by the check that LLVM knows a target's CPU and feature names
(hobbit.target_llvm), so importing the graph or the passes does not load LLVM. The LLVM
TargetMachine built from a Target is codegen's: hobbit/backend/machine.py.

A target is what compile(target=...) is given: "host" (this machine, as LLVM and
sysfs describe it), or a CPU this process may not be running on, named by a
triple, an LLVM CPU name and feature changes (`parse_target`). The CPUs hobbit
knows are in CPUS, each with the ISA features its code may use (so an artifact's
manifest lists what a machine must have to run it), its vector width and
register count, and typical cache sizes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from hobbit.errors import TargetError
from hobbit.target_llvm import unrecognized


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

    @property
    def arch(self) -> str:
        """The triple's architecture: x86_64, aarch64."""
        return self.triple.split("-", 1)[0]

    @property
    def enabled(self) -> frozenset[str]:
        """The features the code may use (the '+' entries of the feature string)."""
        return frozenset(f[1:] for f in self.features.split(",") if f.startswith("+"))

    @property
    def sve_bits(self) -> int:
        """The SVE vector length the code may assume at least, 0 when it uses no SVE for its
        fixed-width vectors (hobbit.backend.llvm tells LLVM through `vscale_range`)."""
        return self.vector_bits if self.arch == "aarch64" and "sve" in self.enabled and self.vector_bits > 128 else 0

    def runs_on(self, host: "Target") -> str | None:
        """None when `host` can run code built for this target, else why not (for the error)."""
        if self.arch != host.arch:
            return f"it is {self.arch} code and this host is {host.arch}"
        missing = sorted(self.enabled - host.enabled)
        if missing:
            return f"it uses CPU features this host ('{host.cpu}') lacks: {', '.join(missing)}"
        return None


@dataclass(frozen=True)
class KnownCPU:
    """What hobbit knows of a CPU model: the facts schedules and the load-time check need."""

    arch: str
    features: tuple[str, ...]
    vector_bits: int
    l1_bytes: int
    l2_bytes: int
    sve_bits: int = 0  # the SVE vector length of the CPU, 0 without SVE


# The x86-64 micro-architecture levels (the psABI's), in LLVM's feature names.
_X86_V2 = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf")
_X86_V3 = _X86_V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_X86_V4 = _X86_V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_ZEN4 = _X86_V4 + ("avx512vnni", "avx512bf16", "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq",
                   "avx512ifma", "gfni", "vaes", "vpclmulqdq")
_ARMV8_2 = ("neon", "fp-armv8", "crc", "lse", "rcpc", "dotprod", "fullfp16")
KIB, MIB = 1024, 1024 * 1024
CPUS: dict[str, KnownCPU] = {
    "x86-64": KnownCPU("x86_64", ("sse2",), 128, 32 * KIB, 256 * KIB),
    "x86-64-v2": KnownCPU("x86_64", _X86_V2, 128, 32 * KIB, 256 * KIB),
    "x86-64-v3": KnownCPU("x86_64", _X86_V3, 256, 32 * KIB, 256 * KIB),
    "x86-64-v4": KnownCPU("x86_64", _X86_V4, 512, 32 * KIB, 1 * MIB),
    "haswell": KnownCPU("x86_64", _X86_V3, 256, 32 * KIB, 256 * KIB),
    "skylake-avx512": KnownCPU("x86_64", _X86_V4, 512, 32 * KIB, 1 * MIB),
    "znver3": KnownCPU("x86_64", _X86_V3, 256, 32 * KIB, 512 * KIB),
    "znver4": KnownCPU("x86_64", _ZEN4, 512, 32 * KIB, 1 * MIB),
    "znver5": KnownCPU("x86_64", _ZEN4 + ("avxvnni",), 512, 48 * KIB, 1 * MIB),
    "generic": KnownCPU("aarch64", ("neon", "fp-armv8"), 128, 64 * KIB, 1 * MIB),
    "neoverse-n1": KnownCPU("aarch64", _ARMV8_2, 128, 64 * KIB, 1 * MIB),
    "neoverse-v1": KnownCPU("aarch64", _ARMV8_2 + ("sve", "bf16", "i8mm"), 256, 64 * KIB, 1 * MIB, sve_bits=256),
}
# A triple's architecture -> (the full triple LLVM is given, the CPU a bare triple means).
ARCHES = {"x86_64": ("x86_64-unknown-linux-gnu", "x86-64"), "aarch64": ("aarch64-unknown-linux-gnu", "generic")}
HOST = ("host", "cpu")  # "cpu" was compile()'s only target before targets were an argument


def _cache_size(index: int, default: int) -> int:
    path = f"/sys/devices/system/cpu/cpu0/cache/index{index}/size"
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
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


def cpu_target(triple: str, cpu: str | None = None, features: str = "") -> Target:
    """The Target for a CPU by triple, LLVM CPU name (default: the architecture's baseline)
    and feature changes ("+avx512f,-avx512bw"). Vector width and registers follow the
    features as LLVM will use them: AVX-512 means 512-bit vectors and 32 registers, AVX
    256 and 16; AArch64 has 32 registers, 128-bit NEON vectors, or the CPU's SVE length."""
    arch = triple.split("-", 1)[0]
    if arch not in ARCHES:
        raise TargetError(f"unknown target architecture {arch!r} in {triple!r}; hobbit generates code for "
                          f"{', '.join(ARCHES)}")
    cpu = cpu or ARCHES[arch][1]
    known = CPUS.get(cpu)
    if known is None or known.arch != arch:
        names = [name for name, c in CPUS.items() if c.arch == arch]
        raise TargetError(f"unknown {arch} CPU {cpu!r}; known: {', '.join(names)}")
    enabled = dict.fromkeys(known.features, True)
    for item in filter(None, (f.strip() for f in features.split(","))):
        if item[0] not in "+-" or len(item) < 2:
            raise TargetError(f"a target feature is '+name' or '-name' (LLVM's names, e.g. +avx512f); got {item!r}")
        enabled[item[1:]] = item[0] == "+"
    on = {name for name, value in enabled.items() if value}
    if arch == "x86_64":
        bits, regs = (512, 32) if "avx512f" in on else (256, 16) if on & {"avx", "avx2"} else (128, 16)
    else:
        bits, regs = (known.sve_bits if known.sve_bits and "sve" in on else 128), 32
    flat = ",".join(("+" if value else "-") + name for name, value in enabled.items())
    target = Target(_full_triple(triple), cpu, flat, bits, regs, known.l1_bytes, known.l2_bytes, cores=1)
    check_llvm_names(target)
    return target


def check_llvm_names(target: Target) -> None:
    """A CPU or feature name LLVM does not know for the triple is a TargetError naming it:
    LLVM itself only warns and builds code without it (hobbit.target_llvm)."""
    if target.arch not in ARCHES:
        raise TargetError(f"unknown target architecture {target.arch!r} in {target.triple!r}; hobbit generates "
                          f"code for {', '.join(ARCHES)}")
    cpus, features = unrecognized(target.triple, target.cpu, target.features)
    if cpus:
        raise TargetError(f"LLVM does not know the {target.arch} CPU {', '.join(map(repr, cpus))}; "
                          f"hobbit knows: {', '.join(name for name, c in CPUS.items() if c.arch == target.arch)}")
    if features:
        raise TargetError(f"LLVM does not know the {target.arch} CPU feature(s) {', '.join(map(repr, features))} "
                          f"for {target.triple}; features are LLVM's names, e.g. "
                          f"{'+avx512f' if target.arch == 'x86_64' else '+sve'}")


@dataclass(frozen=True)
class GpuTarget:
    """A GPU: what its schedules read (SMs or compute units, shared memory a block may hold,
    registers, warp width, threads per block) and what codegen reads (LLVM triple, arch).

    `vendor` is "cuda" (NVPTX, `arch` an sm_XX) or "rocm" (AMDGPU, `arch` a gfxXXX).
    `shared_bytes` is what a block may hold as *static* shared memory (48 KiB on NVIDIA:
    more needs dynamic shared memory and an opt-in attribute per kernel; a workgroup's
    64 KiB LDS on AMD)."""

    vendor: str
    arch: str
    sms: int
    shared_bytes: int
    registers_per_thread: int
    registers_per_sm: int
    warp: int
    max_block: int
    ptx_version: str = ""  # the PTX ISA the NVPTX back end writes (.version), "" for AMDGPU

    @property
    def triple(self) -> str:
        return "nvptx64-nvidia-cuda" if self.vendor == "cuda" else "amdgcn-amd-amdhsa"

    @property
    def cpu(self) -> str:
        return self.arch

    @property
    def features(self) -> str:
        return f"+{self.ptx_version}" if self.ptx_version else ""

    @property
    def key(self) -> str:
        return f"{self.triple}|{self.arch}"

    @property
    def sve_bits(self) -> int:
        return 0

    def runs_on(self, host: Target) -> str | None:
        return f"it is {self.vendor} GPU code ({self.arch}); run it on the GPU, not on the host CPU"


# GPUs by arch: one typical part each (H100/H200 for sm_90, A100 for sm_80, MI250X's GCD for
# gfx90a, MI300X for gfx942). Schedules scale with `sms`; a bigger or smaller part of the
# same arch runs the same code, with a grid that fills it less well.
GPUS: dict[str, GpuTarget] = {
    "sm_80": GpuTarget("cuda", "sm_80", 108, 48 * KIB, 255, 65536, 32, 1024, "ptx70"),
    "sm_90": GpuTarget("cuda", "sm_90", 132, 48 * KIB, 255, 65536, 32, 1024, "ptx78"),
    "gfx90a": GpuTarget("rocm", "gfx90a", 110, 64 * KIB, 512, 131072, 64, 1024),
    "gfx942": GpuTarget("rocm", "gfx942", 304, 64 * KIB, 512, 131072, 64, 1024),
}
GPU_DEFAULTS = {"cuda": "sm_90", "rocm": "gfx942"}


def gpu_target(spec: str) -> GpuTarget:
    """"cuda", "cuda:sm_80", "rocm", "rocm:gfx90a" -> the GpuTarget."""
    vendor, _, arch = spec.partition(":")
    arch = arch or GPU_DEFAULTS[vendor]
    known = GPUS.get(arch)
    if known is None or known.vendor != vendor:
        names = [name for name, g in GPUS.items() if g.vendor == vendor]
        raise TargetError(f"unknown {vendor} GPU arch {arch!r} in target {spec!r}; known: {', '.join(names)}")
    return known


def is_gpu(target: "Target | GpuTarget") -> bool:
    return isinstance(target, GpuTarget)


def parse_target(spec: "str | Target | GpuTarget | None") -> "Target | GpuTarget":
    """compile(target=...) -> a Target: None, "host" (or "cpu") for this machine; a Target as
    given; "CPU", "TRIPLE", "TRIPLE:CPU" or "TRIPLE:CPU:FEATURES" (e.g. "x86-64-v3",
    "aarch64-linux-gnu:neoverse-v1", "x86_64-linux-gnu:znver4:-avx512bf16"); or a GPU:
    "cuda[:sm_80|sm_90]", "rocm[:gfx90a|gfx942]" (a GpuTarget)."""
    if spec is None or spec in HOST:
        return host_target()
    if isinstance(spec, GpuTarget):
        return spec
    if isinstance(spec, Target):
        check_llvm_names(spec)
        return spec
    if isinstance(spec, str) and spec.strip().partition(":")[0] in GPU_DEFAULTS:
        return gpu_target(spec.strip())
    if not isinstance(spec, str) or not spec.strip():
        raise TargetError(f"target= is 'host', a CPU name, 'TRIPLE[:CPU[:FEATURES]]' or a hobbit Target; "
                          f"got {spec!r}")
    parts = spec.strip().split(":")
    if len(parts) > 3:
        raise TargetError(f"target {spec!r} has more than TRIPLE:CPU:FEATURES")
    known = CPUS.get(parts[0])
    if known is None and "-" in parts[0]:  # a triple: arch-[vendor-]os[-env]
        return cpu_target(parts[0], parts[1] if len(parts) > 1 and parts[1] else None, ":".join(parts[2:]))
    if known is None:
        raise TargetError(f"unknown target {spec!r}: give 'host', a CPU hobbit knows ({', '.join(CPUS)}) or "
                          f"'TRIPLE:CPU[:FEATURES]' (triples for {', '.join(ARCHES)})")
    if len(parts) > 2:
        raise TargetError(f"target {spec!r}: after a CPU name only features may follow ('CPU:+a,-b')")
    return cpu_target(ARCHES[known.arch][0], parts[0], parts[1] if len(parts) > 1 else "")


def _full_triple(triple: str) -> str:
    """'aarch64-linux-gnu' -> 'aarch64-unknown-linux-gnu', as LLVM spells the host's triple,
    so that one machine has one spelling in manifests and cache keys."""
    parts = triple.split("-")
    if len(parts) == 3 and parts[1] == "linux":
        parts.insert(1, "unknown")
    return "-".join(parts)
