"""LLVM TargetMachines built from a Target.

A Target (hobbit/target.py) is a fact about a machine; the TargetMachine that
optimises and emits code for it is codegen's, so it is built here."""

from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm

from hobbit.target import Target


@lru_cache(maxsize=None)
def target_machine(target: Target) -> llvm.TargetMachine:
    """One LLVM TargetMachine per target for optimising and emitting code."""
    return new_target_machine(target)


def new_target_machine(target: Target, jit: bool = False) -> llvm.TargetMachine:
    """A TargetMachine of our own: an MCJIT engine takes ownership of the one it is given.

    `jit` picks the code model LLVM uses for JIT code (large on x86-64): MCJIT maps a module's
    code and its constants wherever the heap has room, and with the small model's 32-bit
    offsets between them a process that has grown past a few GB (TensorFlow loaded beside a
    dozen compiled models) failed to link a new model, aborting in RuntimeDyld. Libraries and
    objects keep the small PIC model, which their linker lays out within 2 GB."""
    llvm.initialize_all_targets()  # the host's and the cross targets' (AArch64), each once
    llvm.initialize_all_asmprinters()
    llvm_target = llvm.Target.from_triple(target.triple)
    return llvm_target.create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="pic", codemodel="jitdefault" if jit else "default"
    )
