"""LLVM IR text -> optimised module, assembly or object code for a target."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
from llvmlite import ir
from llvmlite.binding.newpassmanagers import NewPassManager

from hobbit.target import Target
from hobbit.backend.machine import target_machine
from hobbit.errors import CodegenError


def optimize(module: ir.Module | str, target: Target, opt_level: int = 3) -> llvm.ModuleRef:
    """Parse (a module or its IR text), verify and run the new pass manager's O<n> pipeline
    for the target CPU."""
    tm = target_machine(target)
    try:
        mod = llvm.parse_assembly(with_vector_length(str(module), target))
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
        pipeline = pb.getModulePassManager()
        try:
            pipeline.run(mod, pb)
        finally:
            free_pass_manager(pipeline)
    return mod


def free_pass_manager(pipeline: llvm.ModulePassManager) -> None:
    """Delete an llvmlite pass manager and the passes it holds. llvmlite's ModulePassManager
    never frees itself: in its method order ObjectRef's `_dispose`, which does nothing, comes
    before NewPassManager's, which deletes it; so every compile kept its O3 pipeline, with the
    tables its passes had grown on the module (GlobalDCE's, Reassociate's), about 0.2 MiB for
    a 3-layer CNN, for the life of the process. Detaching afterwards stops a later llvmlite
    that does free it from freeing it twice."""
    NewPassManager._dispose(pipeline)
    pipeline.detach()


# SVE's vector length is a multiple of 128 bits, at most 2048: vscale is at most 16.
_MAX_VSCALE = 16


def with_vector_length(text: str, target: Target) -> str:
    """On an SVE target, each function says the vector length it may assume at least
    (`vscale_range(min, 16)`): only then does LLVM's AArch64 back end lower fixed-width
    vectors wider than NEON's 128 bits (hobbit's 256-bit vectors on a Neoverse V1) to SVE
    instructions, rather than splitting each into NEON halves. The upper bound stays open, so
    the code is right on any longer vector length. llvmlite's IR builder has no vscale_range
    attribute, so it is added to each definition's line here."""
    if not target.sve_bits:
        return text
    attribute = f" vscale_range({target.sve_bits // 128},{_MAX_VSCALE})"
    return re.sub(r"^(define [^\n]*?)$", lambda m: m.group(1) + attribute, text, flags=re.MULTILINE)


def emit_assembly(mod: llvm.ModuleRef, target: Target) -> str:
    return target_machine(target).emit_assembly(mod)


def emit_object(mod: llvm.ModuleRef, target: Target) -> bytes:
    return target_machine(target).emit_object(mod)
