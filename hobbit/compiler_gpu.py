"""compile() for a GPU target: frontend -> the GPU pass pipeline -> memory plan with GPU
plans -> one module of kernels -> PTX (+ cubin) or an AMDGPU code object -> GpuModel.

The frontend, the graph passes and memory planning are the CPU path's; only the plans
(hobbit.plan.gpu), the kernels (hobbit.backend.gpu) and the finish differ. The host-flavour
module for GpuModel.emulate is built from the same graph and plan when first asked for."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from hobbit.backend.gpu.device_code import assemble_ptx, hsaco, ptx, ptxas_path
from hobbit.backend.gpu.module import build_gpu_module
from hobbit.backend.cpu.module import pack_weights
from hobbit.errors import ConfigError, MissingDependencyError
from hobbit.frontend.common.source import Source
from hobbit.graph.ir import Graph
from hobbit.passes import GPU_PRECISIONS, TENSOR_CORE_PASS, default_pipeline, run_pipeline
from hobbit.passes.tensor_cores import require_tensor_cores
from hobbit.plan.memory import MemoryPlan
from hobbit.passes.memory import plan_memory
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.jit import TensorSpec
from hobbit.runtime.progress import Progress
from hobbit.target import GpuTarget


@dataclass
class GpuReport:
    """What the compiler did for a GPU target, for `inspect` and `--emit` (GpuModel.report)."""

    graph: Graph
    plan: MemoryPlan
    target: GpuTarget
    llvm_ir: str  # the module of kernels as generated, before LLVM's optimisation
    seconds: dict[str, float] = field(default_factory=dict)


def _pipeline(precision: str, target: GpuTarget, passes: list[str] | None) -> list[str]:
    """The pass list for `precision` ("fp32", or "tf32"/"bf16" on NVIDIA: tensor cores),
    checked before anything is imported; an explicit list must then name the precision's
    pass (TENSOR_CORE_PASS)."""
    if precision not in GPU_PRECISIONS:
        raise ConfigError(f"precision= on a GPU target must be one of {', '.join(map(repr, GPU_PRECISIONS))}; "
                          f"got {precision!r}")
    if precision in TENSOR_CORE_PASS:
        require_tensor_cores(target, precision)
        needed = TENSOR_CORE_PASS[precision]
        if passes is not None and needed not in passes:
            raise ConfigError(f"precision={precision!r} with passes={list(passes)!r}: the list has no {needed!r} "
                              f"pass, so nothing would run on tensor cores; add it (last) or leave passes=None")
    return default_pipeline(precision, target) if passes is None else passes


def compile_gpu(source: Source, target: GpuTarget, precision: str, opt_level: int, passes: list[str] | None,
                input_shapes: dict[str, tuple[int, ...]] | None, input_values: dict[str, np.ndarray],
                show: Progress) -> GpuModel:
    pipeline = _pipeline(precision, target, passes)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    show.stage("import")
    graph = source.import_graph(input_shapes, input_values)
    times["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("passes")
    graph = run_pipeline(graph, pipeline, target)
    plan = plan_memory(graph, target, 1)
    weights = pack_weights(graph, plan)
    times["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("codegen")
    flavour = "nvptx" if target.vendor == "cuda" else "amdgpu"
    text, launches = build_gpu_module(graph, plan, target, flavour)
    times["codegen"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    show.stage("LLVM " + target.arch)
    cubin, resources = None, {}
    if target.vendor == "cuda":
        code: str | bytes = ptx(text, target, opt_level)
        try:
            ptxas_path()
        except MissingDependencyError:
            pass  # the driver assembles the PTX itself when the model is loaded
        else:
            cubin, resources = assemble_ptx(code, target)
    else:
        code = hsaco(text, target, opt_level)
    times["llvm"] = time.perf_counter() - t0
    report = GpuReport(graph, plan, target, text, times)
    inputs = [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs]
    outputs = [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype)) for name, v in zip(graph.output_names, graph.outputs)]

    def host_module() -> str:
        return build_gpu_module(graph, plan, target, "host")[0]

    show.finish(f"compiled for {target.vendor} {target.arch}")
    return GpuModel(target, inputs, outputs, launches, weights, plan.arena_bytes, code, cubin, resources,
                    host_module, report)
