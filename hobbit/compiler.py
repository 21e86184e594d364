"""compile(): frontend -> passes -> memory plan -> LLVM module -> JIT."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from hobbit.codegen.llvm import optimize
from hobbit.codegen.module import build_module, pack_weights
from hobbit.codegen.target import Target, host_target
from hobbit.frontend.onnx import import_onnx
from hobbit.graph.ir import Graph
from hobbit.passes import run_pipeline
from hobbit.passes.memory import MemoryPlan, plan_memory
from hobbit.runtime.jit import CompiledModel, TensorSpec

ModelSource = str | os.PathLike | bytes | onnx.ModelProto


@dataclass
class CompileReport:
    """What the compiler did, for `inspect` and `--emit`."""

    graph: Graph
    plan: MemoryPlan
    target: Target
    llvm_ir: str
    seconds: dict[str, float] = field(default_factory=dict)
    optimized: object = None


def lower_to_llvm(model: ModelSource, target: Target | None = None, passes: list[str] | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None,
                  opt_level: int = 3, threads: int | None = None, profile: bool = False) -> CompileReport:
    target = target or host_target()
    threads = threads or target.cores
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    graph = import_onnx(model, input_shapes)
    times["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph = run_pipeline(graph, passes)
    plan = plan_memory(graph)
    times["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    module = build_module(graph, plan, target, threads, profile)
    times["codegen"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    optimized = optimize(module, target, opt_level)
    times["llvm"] = time.perf_counter() - t0
    return CompileReport(graph, plan, target, str(module), times, optimized)


def compile(model: ModelSource, target: str = "cpu", threads: int | None = None, opt_level: int = 3,
            passes: list[str] | None = None,
            input_shapes: dict[str, tuple[int, ...]] | None = None, profile: bool = False) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) for this CPU and JIT it.

    `passes` replaces the default graph pass pipeline (see hobbit.passes);
    `input_shapes` binds symbolic input dims (otherwise bound to 1);
    `profile` builds in per-kernel timers, read with CompiledModel.profile()."""
    if target != "cpu":
        from hobbit.errors import HobbitError
        raise HobbitError(f"target {target!r} is not available yet; use target='cpu'")
    report = lower_to_llvm(model, None, passes, input_shapes, opt_level, threads, profile)
    t0 = time.perf_counter()
    weights = pack_weights(report.graph, report.plan)
    graph = report.graph
    model_obj = CompiledModel(
        report.optimized, report.target, weights, report.plan.arena_bytes,
        [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs],
        [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype)) for name, v in zip(graph.output_names, graph.outputs)],
        report)
    report.seconds["jit"] = time.perf_counter() - t0
    return model_obj
