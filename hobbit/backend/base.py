"""Backend: what one kind of device brings to compile()'s one path (DESIGN.md, layer 7).

hobbit.compile runs every model the same way: import -> graph passes -> plans -> one LLVM
module -> LLVM's optimiser -> finish. What differs between a CPU and a GPU is gathered in
one object per backend (hobbit/backend/cpu/backend.py, hobbit/backend/gpu/backend.py):

- the precisions it has, and the graph pass pipeline of each (hobbit.passes);
- whether its code runs on a team of host threads (a CPU's) or not (a GPU's parallelism
  is its grids');
- its planners: the frozen plan of each kernel (hobbit.plan, hobbit.plan.gpu), which
  memory planning reserves scratch for and the emitters read;
- its kernel table (hobbit.emit.table.KernelTable) and module builder;
- its finish: what becomes of the optimised module. A CPU this process can run keeps it for
  the in-process JIT (InProcess; the runtime maps it with MCJIT and may keep the object in
  the compile cache), a CPU it cannot run gets an ELF object (ObjectCode, for an export), a
  GPU gets its device code (DeviceCode: PTX and a cubin, or an AMDGPU code object).

The finish stops at native code: turning it into the model a user holds (CompiledModel,
ExportOnlyModel, GpuModel) is the runtime's, a floor above (hobbit.runtime.finish)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hobbit.emit.table import KernelTable
from hobbit.graph.ir import Graph
from hobbit.passes.memory import plan_memory
from hobbit.plan.memory import MemoryPlan
from hobbit.plan.planners import KernelPlanner

if TYPE_CHECKING:
    from hobbit.backend.llvm import Optimized, PartCompiler


@dataclass(frozen=True)
class Module:
    """What a backend's module builder made: the IR text handed to LLVM, and for a GPU the
    launches that run its kernels (hobbit.backend.gpu.module.Launch), in order. Where kernels
    went to LLVM while the module was built (hobbit.backend.module_parts), `text` declares them
    and `whole_text()` gives the module as one."""

    text: str
    launches: tuple = ()
    whole_text: Callable[[], str] | None = None


@dataclass(frozen=True)
class InProcess:
    """CPU code this process runs, for the runtime's JIT: its ELF object, or the optimised
    module for MCJIT to compile (hobbit.backend.llvm.Optimized)."""

    optimized: Any  # bytes or an llvmlite ModuleRef


@dataclass(frozen=True)
class ObjectCode:
    """CPU code for a machine this process cannot run: the ELF object LLVM made for it."""

    code: bytes
    why: str  # why it cannot run here (Target.runs_on)


@dataclass(frozen=True)
class DeviceCode:
    """A GPU model's native code: PTX text and, where ptxas was found, its cubin (with each
    kernel's registers and spills); or an AMDGPU code object (.hsaco)."""

    code: str | bytes
    launches: tuple
    cubin: bytes | None = None
    resources: dict = field(default_factory=dict)  # kernel -> KernelResources, from ptxas
    host_module: Callable[[], str] | None = None  # builds the host-flavour IR, for emulation


Native = InProcess | ObjectCode | DeviceCode


class Backend:
    """One device's part of the compile path; see the module docstring. A subclass sets
    `name`, `precisions`, `table` and `planner` and writes the methods marked so."""

    name: str
    precisions: tuple[str, ...]
    table: KernelTable
    planner: KernelPlanner
    team = False  # whether its code runs on a team of host threads (compile()'s threads= applies)
    keeps_ir = False  # whether compile() keeps the module's text on the report

    def check_precision(self, precision: str, target: Any, passes: list[str] | None) -> str:
        """`precision` when this backend has it on `target` and `passes` can run it, else a
        ConfigError or TargetError saying why (checked before anything is imported)."""
        raise NotImplementedError

    def pipeline(self, precision: str, target: Any, passes: list[str] | None) -> list[str]:
        """The graph passes to run: `passes` as given, or this backend's default at `precision`."""
        raise NotImplementedError

    def plan(self, graph: Graph, target: Any, threads: int) -> MemoryPlan:
        """Memory planning with this backend's kernel plans."""
        return plan_memory(graph, target, threads, self.planner)

    def build_module(self, graph: Graph, plan: MemoryPlan, target: Any, threads: int, profile: bool,
                     on_kernel: Callable[[int, int], None] | None, parts: PartCompiler) -> Module:
        """The module; `parts` may take finished pieces of it to LLVM's threads on the way."""
        raise NotImplementedError

    def compile_threads(self, target: Any) -> int:
        """How many threads optimise this backend's module (hobbit.backend.llvm.PartCompiler):
        one, unless its module is made of kernels that compile alike wherever they live."""
        return 1

    def in_process(self, target: Any) -> bool:
        """Whether finish() keeps the code for this process's JIT (the compile cache applies)."""
        return False

    def finish_stage(self, target: Any) -> str:
        """The name of the finish on the progress line."""
        raise NotImplementedError

    def finish(self, optimized: Optimized, module: Module, graph: Graph, plan: MemoryPlan, target: Any) -> Native:
        """The native code of the optimised module (`module` is what it was built from)."""
        raise NotImplementedError
