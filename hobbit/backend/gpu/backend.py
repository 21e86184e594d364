"""The GPU backend on compile()'s path (hobbit.backend.base), one per flavour: "nvptx" for
NVIDIA (target "cuda") and "amdgpu" for AMD ("rocm"). Its pipeline is the target-independent
graph passes (plus the tensor-core pass for tf32/bf16 on NVIDIA), its planners the launches
of hobbit.plan.gpu, its table GPU, its module the kernels and their launch list (module.py),
and its finish the device code (device_code.py): PTX and, where ptxas is found, a cubin; or
an AMDGPU code object. The host-flavour module for emulation is built from the same graph
and plan when first asked for."""

from __future__ import annotations

from collections.abc import Callable

from hobbit.backend.base import Backend, DeviceCode, Module, Native
from hobbit.backend.gpu.device_code import assemble_ptx, link_hsaco, ptxas_path
from hobbit.backend.gpu.module import build_gpu_module
from hobbit.backend.gpu.table import GPU
from hobbit.backend.llvm import Optimized, PartCompiler, emit_assembly, emit_object
from hobbit.errors import ConfigError, MissingDependencyError
from hobbit.graph.ir import Graph
from hobbit.passes import GPU_PRECISIONS, TENSOR_CORE_PASS, default_pipeline
from hobbit.passes.tensor_cores import require_tensor_cores
from hobbit.plan.memory import MemoryPlan
from hobbit.plan.planners import gpu_kernel_plan
from hobbit.target import GpuTarget

FLAVOURS = {"cuda": "nvptx", "rocm": "amdgpu"}  # target vendor -> the module's flavour (hobbit.backend.gpu.simt)


class GpuBackend(Backend):
    precisions = GPU_PRECISIONS
    table = GPU
    planner = staticmethod(gpu_kernel_plan)
    keeps_ir = True  # `hobbit compile --emit llvm` and the AMDGPU assembly read the report's text

    def __init__(self, flavour: str):
        self.flavour = flavour
        self.name = f"gpu-{flavour}"

    def check_precision(self, precision: str, target: GpuTarget, passes: list[str] | None) -> str:
        """"fp32", or "tf32"/"bf16" on NVIDIA (tensor cores); an explicit list must then name
        the precision's pass (TENSOR_CORE_PASS)."""
        if precision not in GPU_PRECISIONS:
            raise ConfigError(f"precision= on a GPU target must be one of {', '.join(map(repr, GPU_PRECISIONS))}; "
                              f"got {precision!r}")
        if precision in TENSOR_CORE_PASS:
            require_tensor_cores(target, precision)
            needed = TENSOR_CORE_PASS[precision]
            if passes is not None and needed not in passes:
                raise ConfigError(f"precision={precision!r} with passes={list(passes)!r}: the list has no "
                                  f"{needed!r} pass, so nothing would run on tensor cores; add it (last) or leave "
                                  f"passes=None")
        return precision

    def pipeline(self, precision: str, target: GpuTarget, passes: list[str] | None) -> list[str]:
        return default_pipeline(precision, target) if passes is None else passes

    def build_module(self, graph: Graph, plan: MemoryPlan, target: GpuTarget, threads: int, profile: bool,
                     on_kernel: Callable[[int, int], None] | None, parts: PartCompiler) -> Module:
        text, launches = build_gpu_module(graph, plan, target, self.flavour)
        return Module(text, tuple(launches))

    def finish_stage(self, target: GpuTarget) -> str:
        return f"{'PTX' if self.flavour == 'nvptx' else 'code object'} for {target.arch}"

    def finish(self, optimized: Optimized, module: Module, graph: Graph, plan: MemoryPlan,
               target: GpuTarget) -> Native:
        def host_module() -> str:
            return build_gpu_module(graph, plan, target, "host")[0]
        if self.flavour == "amdgpu":
            return DeviceCode(link_hsaco(emit_object(optimized.module, target), target), module.launches,
                              host_module=host_module)
        code = emit_assembly(optimized.module, target)
        cubin, resources = None, {}
        try:
            ptxas_path()
        except MissingDependencyError:
            pass  # the driver assembles the PTX itself when the model is loaded
        else:
            cubin, resources = assemble_ptx(code, target)
        return DeviceCode(code, module.launches, cubin, resources, host_module)


def gpu_backend(target: GpuTarget) -> GpuBackend:
    """The backend of `target`'s vendor."""
    return GpuBackend(FLAVOURS[target.vendor])
