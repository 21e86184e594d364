"""Kernels handed to LLVM while the rest of the module is still being emitted.

Why: LLVM's optimiser takes over half of a cold compile (ResNet-50 on a Zen 4: 5.5 s of O3 out
of 10.4 s) and ran on one core after Python had emitted the whole module (1.8 s). Its cost is
per function: optimising each kernel alone, in a module of its own, sums to the whole module's
time (5.41 s against 5.56 s). So finished kernels go, a few thousand instructions at a time,
to LLVM's threads (hobbit.backend.llvm.PartCompiler) while Python emits the next ones, and
so do the functions of the team walk (hobbit.backend.cpu.team: a few steps each) with the
per-node wrappers they call; what is left (the entry point, the team walk's top) is the last
part.

What moves: a kernel is a `noinline` function that only the entry point, the team function and
thunks call (hobbit.backend.cpu.module), so it compiles the same wherever it lives. A moved
kernel's part holds its definition, made hidden and external (visible to the other parts of one
model, never exported from a library), the module's declarations and its constants made
private; the module keeps a hidden declaration in its place. Kernels that call other functions
of the module (a control-flow kernel's subgraph) are never handed off.

A caller that wants the module's text as it would have been (`lower_to_llvm`, `--emit llvm`,
IR fingerprints) gets it from `whole_text`: each declaration put back as the definition it was."""

from __future__ import annotations

from llvmlite import ir

from hobbit.backend.llvm import PartCompiler

# A part is handed to LLVM once its kernels hold this many instructions. Smaller parts start
# LLVM's threads sooner and leave a shorter tail when emission ends: with ResNet-18's module
# down to 43,000 instructions, parts of 12,000 left one thread optimising the last part for
# 1 s while the other waited; parts of 5,000 took its compile from 4.1-4.5 s to 3.7-4.1 s
# (2 CPUs). Each part repeats the module's declarations and constant tables.
PART_INSTRUCTIONS = 5000


class KernelHandOff:
    """Finished kernels of one module, handed to `compiler` in parts (see the module docstring)."""

    def __init__(self, compiler: PartCompiler):
        self.compiler = compiler
        self._pending: list[ir.Function] = []
        self._size = 0
        self._definitions: dict[str, str] = {}  # a moved kernel's declaration -> its definition
        self._moved: set[str] = set()  # the names of the functions handed over (or about to be)

    def add(self, kernel: ir.Function) -> None:
        """`kernel` is finished; hand its part over once it is large enough."""
        if not self.compiler.parallel:
            return
        self._moved.add(kernel.name)
        self._pending.append(kernel)
        self._size += sum(len(block.instructions) for block in kernel.blocks)
        if self._size >= PART_INSTRUCTIONS:
            self.flush()

    def moved(self, function: ir.Function) -> bool:
        """Whether `function` was handed over (its definition lives in a part)."""
        return function.name in self._moved

    def flush(self) -> None:
        """Hand the pending kernels over as one part."""
        if not self._pending:
            return
        header = _header(self._pending[0].module)
        body = []
        for kernel in self._pending:
            linkage, kernel.linkage = kernel.linkage, "hidden"  # printed where the linkage goes: `define hidden`
            text = str(kernel)  # printing is a third of emitting: once per kernel
            body.append(text)
            kernel.blocks = []
            self._definitions[str(kernel)] = text.replace("define hidden ", f"define {linkage} ", 1)
        self.compiler.submit("\n".join(header + body) + "\n")
        self._pending, self._size = [], 0

    def whole_text(self, text: str) -> str:
        """The module `text` with every moved kernel's definition back in its place."""
        for declaration, definition in self._definitions.items():
            text = text.replace(declaration, definition, 1)
        return text


def _header(module: ir.Module) -> list[str]:
    """What a part of `module` needs besides its kernels: the target, every declaration, the
    constants, private to the part (a kernel reads only private constant tables), and the
    metadata so far (branch weights: `!prof !0`)."""
    lines = [f'target triple = "{module.triple}"', f'target datalayout = "{module.data_layout}"']
    for value in module.global_values:
        if isinstance(value, ir.Function) and value.is_declaration:
            lines.append(str(value))
        elif isinstance(value, ir.GlobalVariable) and value.global_constant and value.linkage in ("private", "internal"):
            lines.append(str(value))
    return lines + [str(node) for node in module.metadata]
