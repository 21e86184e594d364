"""hobbit.emit.transpose against numpy's transpose, and the strided loads and stores
(gathers, scatters) of KernelBuilder against numpy's strided views."""

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from hobbit.backend.machine import new_target_machine
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.transpose import columns, padded_rows, transposable
from hobbit.target import host_target

F32 = np.dtype(np.float32)


def _jit(build) -> tuple[object, object]:
    """f(src, dst) built by build(kb, src, dst); the engine must outlive the call."""
    module = ir.Module("t")
    module.triple = host_target().triple
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType()]), "f")
    kb = KernelBuilder(fn)
    build(kb, fn.args[0], fn.args[1])
    kb.finish()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), new_target_machine(host_target(), jit=True))
    engine.finalize_object()
    return engine, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("f"))


@pytest.mark.parametrize("width", [4, 8, 16])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 6, 8, 12, 16])
def test_columns_are_numpys_transpose(rows: int, width: int):
    """Every column of every row count the GEMM's MR can take, for each vector width: the
    first `rows` lanes of column c are rows[r][c] (the padding lanes are not looked at)."""
    if not transposable(rows, width):
        pytest.skip("more rows than lanes")
    p = padded_rows(rows)

    def build(kb, src, dst):
        vectors = [kb.vload(src, F32, r * width, width) for r in range(rows)]
        for c, column in enumerate(columns(kb.b, vectors, width)):
            kb.vstore(column, dst, F32, c * p)

    engine, f = _jit(build)
    src = np.random.default_rng(rows * width).standard_normal((rows, width)).astype(np.float32)
    dst = np.full((width, p), np.nan, np.float32)
    f(src.ctypes.data, dst.ctypes.data)
    np.testing.assert_array_equal(dst[:, :rows], src.T)


@pytest.mark.parametrize("live", [16, 11, 1])
def test_strided_store_and_load_follow_the_stride(live: int):
    """vstore_strided (a scatter) writes lane i at index + i*stride and nothing else, within
    its mask; vload_strided (a gather) reads the same places back, zeros outside the mask."""
    stride = 7

    def build(kb, src, dst):
        mask = None if live == 16 else kb.prefix_mask(16, live)
        v = kb.vload_strided(src, F32, 3, stride, 16, mask)
        kb.vstore_strided(v, dst, F32, 3, stride, mask)

    engine, f = _jit(build)
    src = np.arange(3 + 16 * stride, dtype=np.float32) + 1
    dst = np.zeros_like(src)
    f(src.ctypes.data, dst.ctypes.data)
    expected = np.zeros_like(src)
    expected[3:3 + live * stride:stride] = src[3:3 + live * stride:stride]
    np.testing.assert_array_equal(dst, expected)
