"""LLVM IR text -> optimised module, assembly or object code for a target."""

from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from hobbit.target import Target
from hobbit.codegen.machine import target_machine
from hobbit.errors import CodegenError


def optimize(module: ir.Module | str, target: Target, opt_level: int = 3) -> llvm.ModuleRef:
    """Parse (a module or its IR text), verify and run the new pass manager's O<n> pipeline
    for the target CPU."""
    tm = target_machine(target)
    try:
        mod = llvm.parse_assembly(str(module))
        mod.verify()
    except RuntimeError as exc:
        raise CodegenError(f"generated LLVM IR is invalid: {exc}") from exc
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def emit_assembly(mod: llvm.ModuleRef, target: Target) -> str:
    return target_machine(target).emit_assembly(mod)


def emit_object(mod: llvm.ModuleRef, target: Target) -> bytes:
    return target_machine(target).emit_object(mod)
