"""LLVM IR text -> optimised module, assembly or object code for a target.

A model's module is optimised and compiled on several threads: its kernels are handed over in
parts while the rest is still being emitted (hobbit.backend.module_parts), each part parsed,
verified, optimised and compiled in an LLVMContext and TargetMachine of its own, then joined
(PartCompiler.finish). llvmlite serialises every call into LLVM behind one process-wide
lock (its ffi module's _LLVMLock), so two threads would only take turns. An LLVMContext is
LLVM's unit of thread safety: modules in different contexts, each with its own TargetMachine
and pass builder, share no mutable state. So the long calls of a part (parse, verify, the pass
pipeline, code generation) go to llvmlite's C functions directly; ctypes releases the GIL for
them. Short calls (creating and freeing objects) keep the lock.

Measured (ResNet-50's O3, Zen 4, 2 cores, otherwise idle): 5.5 s on one thread, 2.9 s in two
parts on two threads."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir
from llvmlite.binding import ffi
from llvmlite.binding.context import ContextRef, GlobalContextRef
from llvmlite.binding.module import ModuleRef
from llvmlite.binding.newpassmanagers import NewPassManager

from hobbit.target import Target
from hobbit.backend.machine import new_target_machine, target_machine
from hobbit.backend.polly import polly_optimize
from hobbit.errors import CodegenError

# At most this many threads: more would wait on the parts Python has not emitted yet.
MAX_THREADS = 8


def _direct(name: str, context: ContextRef | None) -> Callable:
    """llvmlite's C function `name`, for a module in `context` (None: a part's private one):
    without its process-wide lock for a private context (see the module docstring), with it for
    the global one, which other threads' compiles share; the locked one too where this llvmlite
    keeps no unlocked function."""
    function = getattr(ffi.lib, name)
    return function if isinstance(context, GlobalContextRef) else getattr(function, "_cfn", function)


def compile_threads() -> int:
    """The threads a compile's LLVM work uses: the CPUs this process may run on, at most MAX_THREADS."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_THREADS))


@dataclass
class Optimized:
    """A module after LLVM's optimiser, and (where asked and a linker is installed) the machine
    code this process's JIT loads for it, made on the compile's threads."""

    module: llvm.ModuleRef
    code: bytes | None = None


class PartCompiler:
    """LLVM's optimiser for one module that arrives in parts: `submit` starts a part on a
    thread of its own while the caller emits the next (hobbit.backend.module_parts), `finish`
    optimises the rest of the module on the calling thread and waits for the parts. With one
    thread, or nothing submitted, the module is one part, optimised on the calling thread.

    While the caller emits, `threads` parts may run beside it: one more busy thread than CPUs.
    Holding one thread back for the caller until `finish` measured the same (ResNet-50 7.7-8.0 s
    against 7.7 s, MobileNetV2 5.1-5.4 s against 5.0 s, 2 CPUs): Python's emission slows by a
    third, but no CPU waits at the end."""

    def __init__(self, target: Target, opt_level: int, threads: int, jit_code: bool = False, loops: str = "llvm"):
        self.target = target
        self.opt_level = opt_level
        self.loops = loops  # the loop optimiser (hobbit.backend.polly.LOOPS)
        self.parallel = threads > 1
        self.jit_code = jit_code and self.parallel and shutil.which("ld") is not None
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="hobbit-llvm") if self.parallel else None
        self._parts: list[Future] = []

    def submit(self, text: str) -> None:
        self._parts.append(self._pool.submit(self._part, with_vector_length(text, self.target), llvm.create_context()))

    def _part(self, text: str, context: ContextRef) -> tuple[llvm.ModuleRef, bytes | None]:
        """A part optimised and, with `jit_code`, compiled on the same thread right away: with
        the objects made once every part was optimised, one thread sat idle while the other
        optimised the last part (ResNet-18 on 2 CPUs: 1 s of a 4.6 s compile)."""
        module = _optimize(text, self.target, self.opt_level, context, self.loops)
        return module, _emit_object(module, self.target) if self.jit_code else None

    def finish(self, text: str) -> Optimized:
        """The module's remaining `text` (declaring what was submitted) and the submitted parts,
        optimised and joined into one module (in the global context, as MCJIT, the exports and a
        GPU's link take it); with `jit_code` (and a linker), also this process's machine code
        for it (Optimized.code: without a linker, MCJIT compiles the joined module on one thread)."""
        try:
            text = with_vector_length(text, self.target)
            if not self._parts:
                return Optimized(_optimize(text, self.target, self.opt_level, llvm.get_global_context(), self.loops))
            first = self._part(text, llvm.create_context())
            try:
                parts = [first] + [part.result() for part in self._parts]
                joined = llvm.parse_bitcode(first[0].as_bitcode())
                for part, _ in parts[1:]:
                    joined.link_in(llvm.parse_bitcode(part.as_bitcode()))
                return Optimized(joined, _linked([code for _, code in parts]) if self.jit_code else None)
            finally:
                first[0].close()  # as close() does for the submitted parts, after an error too
        finally:
            self.close()

    def close(self) -> None:
        """Wait for the threads (after an error too: a thread must not outlive its compile), and
        free the parts now: a part's module and its context left to the cycle collector (a
        traceback keeps them) may be freed context first, and disposing the module then crashed."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for part in self._parts:
            if not part.cancelled() and part.exception() is None:
                part.result()[0].close()
        self._parts = []


def _linked(objects: list[bytes]) -> bytes:
    """The parts' ELF objects joined into one by the system linker (`ld -r`).

    Why one object: MCJIT cannot load the parts' objects side by side. Its x86-64 code is
    position-independent with the large code model (hobbit.backend.machine), which reaches
    constants through GOT-relative relocations, and RuntimeDyld resolves every object's
    R_X86_64_GOTOFF64 against the first object's GOT: the second object's kernels read
    wrong constants (measured: SqueezeNet's Winograd, pooling and stem kernels). `ld -r`
    keeps those as relocations of one object, which RuntimeDyld gives one GOT. Static
    relocations would avoid the GOT but put text relocations in every exported library,
    which is built from this same object."""
    linker = shutil.which("ld")
    with tempfile.TemporaryDirectory(prefix="hobbit-parts-") as tmp:
        paths = [os.path.join(tmp, f"part{i}.o") for i in range(len(objects))]
        for path, data in zip(paths, objects):
            with open(path, "wb") as f:
                f.write(data)
        joined = os.path.join(tmp, "model.o")
        done = subprocess.run([linker, "-r", "-o", joined, *paths], capture_output=True, text=True)
        if done.returncode != 0:
            raise CodegenError(f"the linker could not join the model's objects ({linker} -r): {done.stderr.strip()}")
        with open(joined, "rb") as f:
            return f.read()


def optimize(module: ir.Module | str, target: Target, opt_level: int = 3, loops: str = "llvm") -> llvm.ModuleRef:
    """Parse (a module or its IR text), verify and run the new pass manager's O<n> pipeline
    for the target CPU (with `loops`' Polly: hobbit.backend.polly), on this thread."""
    return PartCompiler(target, opt_level, 1, loops=loops).finish(str(module)).module


def _optimize(text: str, target: Target, opt_level: int, context: ContextRef, loops: str = "llvm") -> llvm.ModuleRef:
    """One part in `context` (the global one when the module is one part, as MCJIT and the
    GPU's link expect of a whole module). With Polly (`loops`, hobbit.backend.polly) the part
    is verified, then optimised by opt-22 and parsed back."""
    machine = new_target_machine(target)
    module = _parse(text, context)
    module.triple = target.triple
    module.data_layout = str(machine.target_data)
    if opt_level > 0 and loops != "llvm":
        optimized = polly_optimize(str(module), target, opt_level, loops)
        module.close()
        return _parse(optimized, context)
    if opt_level > 0:
        options = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        options.loop_vectorization = True
        options.slp_vectorization = True
        builder = llvm.create_pass_builder(machine, options)
        pipeline = builder.getModulePassManager()
        try:
            _direct("LLVMPY_RunNewModulePassManager", context)(pipeline, module, builder)
        finally:
            free_pass_manager(pipeline)
    return module


def _emit_object(part: llvm.ModuleRef, target: Target) -> bytes:
    """The machine code of `part` (a module in a context of its own) for this process's JIT
    (its code model), on this thread."""
    with ffi.OutputString() as error:
        buffer = _direct("LLVMPY_TargetMachineEmitToMemory", None)(new_target_machine(target, jit=True), part, 1, error)
        if not buffer:
            raise CodegenError(f"LLVM could not generate code for {target.triple}: {error}")
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buffer), ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def _parse(text: str, context: ContextRef) -> llvm.ModuleRef:
    data = text.encode()
    with ffi.OutputString() as error:
        module = ModuleRef(_direct("LLVMPY_ParseAssembly", context)(context, ctypes.c_char_p(data), error), context)
        if error:
            module.close()
            raise CodegenError(f"generated LLVM IR is invalid: {error}")
    with ffi.OutputString() as error:
        if _direct("LLVMPY_VerifyModule", context)(module, error):
            raise CodegenError(f"generated LLVM IR is invalid: {error}")
    return module


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
