"""The TargetMachines codegen builds: JIT code must not assume its constants lie within 2 GB."""

from __future__ import annotations

import llvmlite.binding as llvm

from hobbit.backend.machine import new_target_machine
from hobbit.target import host_target

# A function whose vector constant LLVM puts in a constant pool beside the code.
_CONSTANT_POOL = """
define <8 x float> @scale(<8 x float> %x) {
  %y = fmul <8 x float> %x, <float 1.0, float 2.0, float 3.0, float 4.0, float 5.0, float 6.0, float 7.0, float 8.0>
  ret <8 x float> %y
}
"""


def _assembly(jit: bool) -> str:
    return new_target_machine(host_target(), jit=jit).emit_assembly(llvm.parse_assembly(_CONSTANT_POOL))


def test_jit_code_reaches_its_constants_with_64_bit_addresses() -> None:
    """MCJIT maps code and constant pools wherever the heap has room; 32-bit RIP-relative
    offsets between them aborted the process in RuntimeDyld once it had grown past a few GB."""
    jit, library = _assembly(jit=True), _assembly(jit=False)
    assert "movabsq\t$.LCPI0_0@GOTOFF" in jit and ".LCPI0_0(%rip)" not in jit
    assert ".LCPI0_0(%rip)" in library and "movabs" not in library  # a linked library keeps the small PIC model
