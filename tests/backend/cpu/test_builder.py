"""KernelBuilder details that generated code relies on."""

import ctypes

import numpy as np
from llvmlite import ir

from hobbit.backend.machine import new_target_machine
from hobbit.emit.builder import KernelBuilder
from hobbit.target import host_target
import llvmlite.binding as llvm


def test_a_one_lane_masked_byte_store_writes_one_byte():
    """LLVM 22 lowers a one-lane masked store of a truncated <16 x i8> to a 4-byte store;
    vstore must write only the lane (it clobbered the next channel's first 3 outputs)."""
    module = ir.Module("store")
    module.triple = host_target().triple
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType()]), "f")
    kb = KernelBuilder(fn)
    wide = kb.vload(fn.args[0], np.dtype(np.int32), 0, 16)
    narrow = kb.b.trunc(wide, ir.VectorType(ir.IntType(8), 16))
    kb.vstore(narrow, fn.args[1], np.dtype(np.uint8), 0, kb.prefix_mask(16, 1))
    kb.finish()
    parsed = llvm.parse_assembly(str(module))
    # An MCJIT engine owns (and frees) the TargetMachine it is given: never the cached one.
    engine = llvm.create_mcjit_compiler(parsed, new_target_machine(host_target(), jit=True))
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("f"))
    src, dst = np.arange(1, 17, dtype=np.int32), np.full(16, 99, np.uint8)
    f(src.ctypes.data, dst.ctypes.data)
    assert dst.tolist() == [1] + [99] * 15
