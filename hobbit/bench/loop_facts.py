"""What LLVM and Polly made of a kernel's loops, read from the optimised IR: the evidence behind
BENCHMARKS.md's answer to issue 31 (did Polly tile? did the result vectorise? did it pack?).

Read from the kernels' functions only (hobbit names them after their nodes, `Op[node]`: the
entry point and the thread team's functions are left out):
- polly_loops: the loop counters Polly's code generator made (`polly.indvar` phis). A plain
  nest it only re-emitted keeps its depth; a tiled one has a tile loop and a point loop per
  tiled dim, so a 3-deep GEMM tiled in all three dims has 6 or more;
- vector_lanes: the widest float or integer vector an arithmetic instruction works on (1: scalar
  code);
- packed: whether Polly's matrix-multiplication optimisation copied operands into packed arrays
  (it names them Packed_A and Packed_B), as BLAS libraries and hobbit's GEMM driver do."""

from __future__ import annotations

import re
from dataclasses import dataclass

_KERNEL = re.compile(r'^define [^@]*@"?[A-Za-z0-9_]+\[', re.MULTILINE)
_POLLY_COUNTER = re.compile(r"%polly\.indvar[0-9]* = phi")
_VECTOR_ARITHMETIC = re.compile(
    r"= (?:fadd|fmul|fsub|add|mul|sub)(?: [a-z]+)* <(\d+) x |call [^@]*<(\d+) x [a-z0-9]+> @llvm\.(?:fma|fmuladd)")


@dataclass(frozen=True)
class LoopFacts:
    polly_loops: int
    vector_lanes: int
    packed: bool

    def describe(self) -> str:
        """"6 Polly loops, 8 lanes, packed" (for a table cell)."""
        tiled = f"{self.polly_loops} Polly loops" if self.polly_loops else "no Polly loops"
        lanes = "scalar" if self.vector_lanes == 1 else f"{self.vector_lanes} lanes"
        return f"{tiled}, {lanes}{', packed' if self.packed else ''}"


def kernel_text(module_text: str) -> str:
    """The definitions of the module's kernels (functions named `Op[node]`), joined."""
    starts = [m.start() for m in _KERNEL.finditer(module_text)]
    bodies = []
    for start in starts:
        end = module_text.find("\n}\n", start)
        bodies.append(module_text[start: len(module_text) if end < 0 else end + 3])
    return "".join(bodies)


def loop_facts(module_text: str) -> LoopFacts:
    """The facts of the kernels in an optimised module's text."""
    text = kernel_text(module_text)
    lanes = [int(a or b) for a, b in _VECTOR_ARITHMETIC.findall(text)]
    return LoopFacts(len(_POLLY_COUNTER.findall(text)), max(lanes, default=1), "Packed_" in text)
