"""The CPU backend on compile()'s path (hobbit.backend.base): fp32 and bf16 pipelines, the CPU
planners and kernel table, one module with the hobbit_main entry point (module.py), and a
finish that keeps the optimised module for the in-process JIT on a CPU this host can run, or
makes the ELF object for one it cannot (an export for that machine)."""

from __future__ import annotations

from collections.abc import Callable

from hobbit.backend.base import Backend, InProcess, Module, Native, ObjectCode
from hobbit.backend.cpu.module import build_module
from hobbit.backend.cpu.naive import NAIVE, NAIVE_KERNELS
from hobbit.backend.cpu.table import CPU
from hobbit.backend.llvm import Optimized, PartCompiler, compile_threads, emit_object
from hobbit.backend.module_parts import KernelHandOff
from hobbit.errors import ConfigError
from hobbit.graph.ir import Graph, Node
from hobbit.passes import NAIVE_PIPELINE, PRECISIONS, default_pipeline
from hobbit.passes.bf16 import require_bf16
from hobbit.passes.tensor_cores import require_tensor_cores
from hobbit.plan.memory import MemoryPlan
from hobbit.ops.registry import get_op
from hobbit.plan.planners import cpu_plan
from hobbit.target import Target, host_target


class CpuBackend(Backend):
    name = "cpu"
    precisions = PRECISIONS
    table = CPU
    planner = staticmethod(cpu_plan)
    team = True

    def check_precision(self, precision: str, target: Target, passes: list[str] | None) -> str:
        """"fp32" or "bf16" (on a target with AVX512-BF16); "tf32" is for NVIDIA GPUs (a clear
        error). An explicit pass list must name the "bf16" pass for bf16: without it nothing
        would run in bf16, and a model silently compiled in float32 is not what was asked for."""
        if precision == "tf32":
            require_tensor_cores(target, precision)
        if precision not in PRECISIONS:
            raise ConfigError(f"precision= must be one of {', '.join(map(repr, PRECISIONS))}; got {precision!r} "
                              f"(int8 comes from quantized models: see hobbit.quantize)")
        if precision == "bf16":
            require_bf16(target)
            if passes is not None and "bf16" not in passes:
                raise ConfigError(f"precision='bf16' with passes={list(passes)!r}: the list has no 'bf16' pass, so "
                                  f"nothing would run in bf16; add it (after 'fuse-depthwise') or leave passes=None")
        return precision

    def pipeline(self, precision: str, target: Target, passes: list[str] | None) -> list[str]:
        return default_pipeline(precision) if passes is None else passes

    def build_module(self, graph: Graph, plan: MemoryPlan, target: Target, threads: int, profile: bool,
                     on_kernel: Callable[[int, int], None] | None, parts: PartCompiler) -> Module:
        hand_off = KernelHandOff(parts)
        text = str(build_module(graph, plan, target, threads, profile, on_kernel=on_kernel, hand_off=hand_off,
                                table=self.table))
        return Module(text, whole_text=lambda: hand_off.whole_text(text))

    def compile_threads(self, target: Target) -> int:
        """Kernels are noinline functions that only the entry point, the team function and thunks
        call, so they compile alike in any part (hobbit.backend.module_parts)."""
        return compile_threads()

    def in_process(self, target: Target) -> bool:
        return target.runs_on(host_target()) is None

    def finish_stage(self, target: Target) -> str:
        return "JIT" if self.in_process(target) else "object code"

    def finish(self, optimized: Optimized, module: Module, graph: Graph, plan: MemoryPlan, target: Target) -> Native:
        why = target.runs_on(host_target())
        if why is None:
            return InProcess(optimized.code or optimized.module)
        return ObjectCode(emit_object(optimized.module, target), why)


class NaiveCpuBackend(CpuBackend):
    """schedule="naive": the CPU backend with convolutions, matrix products, pooling and
    reductions as plain loop nests (hobbit.backend.cpu.naive), which memory planning gives no
    plan, after a pipeline that leaves them as the model wrote them (NAIVE_PIPELINE). fp32 only:
    bf16 is a format of hobbit's GEMM driver, which this mode leaves out."""

    name = "cpu-naive"
    table = NAIVE

    def check_precision(self, precision: str, target: Target, passes: list[str] | None) -> str:
        if precision != "fp32":
            raise ConfigError(f"schedule='naive' computes in float32 (precision='fp32'); got precision={precision!r}")
        return super().check_precision(precision, target, passes)

    def pipeline(self, precision: str, target: Target, passes: list[str] | None) -> list[str]:
        return list(NAIVE_PIPELINE) if passes is None else passes

    @staticmethod
    def planner(node: Node, target: Target, threads: int, elementwise: bool = False) -> object:
        """The CPU's plan, except for the naive kernels, which decide nothing ahead."""
        return None if get_op(node.op).kernel in NAIVE_KERNELS else cpu_plan(node, target, threads, elementwise)


CPU_BACKEND = CpuBackend()
NAIVE_BACKEND = NaiveCpuBackend()
