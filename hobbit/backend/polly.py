"""loops="polly": LLVM's optimiser with Polly, its polyhedral loop optimiser, run by `opt-22`.

llvmlite has no Polly and cannot load LLVM's pass plugins, but Debian's llvm-22 links Polly
into its tools, and its textual IR is llvmlite's (LLVM 22 both). So a module, or each of its
parts (hobbit.backend.module_parts), goes as text through `opt-22 -O<n> -polly` for the
target's triple, CPU and features, and the result is parsed back and carries on as usual: the
JIT, an exported library, code for another CPU.

Where Polly runs is a choice, both measured in BENCHMARKS.md:
  "polly"        right before the loop vectoriser, after LLVM's inliner and function
                 simplification (Polly's default: -polly-position=before-vectorizer, the
                 cl::init of RegisterPasses.cpp in LLVM 22's Polly): on loops LLVM has already
                 rotated, hoisted from and promoted to registers;
  "polly-early"  before LLVM's standard pipeline (-polly-position=early): on the nests as
                 emitted, once Polly's own canonicalisation has made them SSA.
"llvm" (the default) is llvmlite's own O<n> pipeline, without Polly.

Polly's output is not taken on trust for alignment: its DeLICM pass, which maps a value kept in
a register across a loop onto an array element, gives the vector stores it makes the alignment of
the register's old stack slot (32 bytes for an <8 x float>), whatever the array's addresses are.
On ReduceMax over a middle axis that was `store <8 x float> ..., align 32` at 4-byte-aligned
addresses of the output, and a segfault whenever numpy's output buffer was not 32-byte aligned
(4 crashes in 9 runs). So every load and store of opt-22's output is given the alignment of its
element type (natural_alignment): never wrong, and as fast on x86-64 and AArch64, whose vector
loads and stores take any address.

Polly models loop nests whose bounds and subscripts are affine in the counters; hobbit's
tiled microkernels are mostly not such nests and pass through unchanged, so Polly pays off
on the plain nests of schedule="naive" (hobbit.backend.cpu.naive), if anywhere."""

from __future__ import annotations

import re
import shutil
import subprocess

from hobbit.errors import CodegenError, ConfigError, MissingDependencyError
from hobbit.target import Target

OPT = "opt-22"

# Bytes of each scalar type a load or store can move; a vector moves its element's alignment.
_ELEMENT_BYTES = {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8,
                  "ptr": 8}
_ACCESS = re.compile(r"((?:= load|store) (?:volatile )?(?:<\d+ x (?P<element>[a-z0-9]+)>|(?P<scalar>[a-z0-9]+))"
                     r"[^\n]*?, align )(?P<align>\d+)")

# The loop optimisers compile(loops=...) takes, and the opt flags each adds to -O<n>.
LOOPS: dict[str, tuple[str, ...]] = {
    "llvm": (),
    "polly": ("-polly", "-polly-position=before-vectorizer"),
    "polly-early": ("-polly", "-polly-position=early"),
}


def check_loops(loops: str) -> str:
    """`loops` when it names a loop optimiser (LOOPS), else a ConfigError listing them."""
    if loops not in LOOPS:
        raise ConfigError(f"loops= must be one of {', '.join(map(repr, LOOPS))}; got {loops!r}")
    return loops


def opt_tool() -> str:
    """The path of opt-22, or a MissingDependencyError saying how to install it."""
    path = shutil.which(OPT)
    if path is None:
        raise MissingDependencyError(
            f"loops='polly' runs LLVM's Polly through {OPT}, which was not found on PATH (llvmlite has no Polly): "
            f"install Debian's LLVM 22 tools (apt-get install llvm-22; apt.llvm.org has them for other "
            f"distributions), or compile with loops='llvm'")
    return path


def polly_optimize(text: str, target: Target, opt_level: int, loops: str) -> str:
    """The module `text` (carrying the TargetMachine's data layout, which hobbit.backend.llvm
    sets before printing it, so opt's cost models see the machine llvmlite will generate code
    for) optimised by opt-22 at O<opt_level> with `loops`' Polly flags, for the target's triple,
    CPU and features, as IR text."""
    command = [opt_tool(), f"-O{opt_level}", *LOOPS[loops], f"-mtriple={target.triple}", f"-mcpu={target.cpu}",
               f"-mattr={target.features}", "-S", "-o", "-", "-"]
    done = subprocess.run(command, input=text, capture_output=True, text=True)
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()
        raise CodegenError(f"{OPT} failed with loops={loops!r} (exit status {done.returncode}): "
                           + " | ".join(detail[-5:]))
    return natural_alignment(done.stdout)


def natural_alignment(text: str) -> str:
    """`text` with every load's and store's alignment lowered to its element type's (never
    raised): see the module docstring for the Polly pass that claimed more than was true."""
    def lowered(match: re.Match) -> str:
        size = _ELEMENT_BYTES.get(match["element"] or match["scalar"])
        if size is None or int(match["align"]) <= size:
            return match.group(0)
        return f"{match.group(1)}{size}"
    return _ACCESS.sub(lowered, text)
