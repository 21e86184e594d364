"""The CPU kernel table covers every op definition, and a backend's table inherits
what it does not override."""

from __future__ import annotations

import pytest

from hobbit.errors import CodegenError
from hobbit.backend.cpu.table import CPU
from hobbit.emit.table import KernelTable
from hobbit.ops.registry import _REGISTRY


def test_every_op_with_a_kernel_has_a_cpu_entry():
    missing = sorted(op.name for op in _REGISTRY.values() if op.kernel is not None and op.kernel not in CPU.names())
    assert missing == []


def test_every_elementwise_op_has_a_scalar_expression():
    elementwise = [op for op in _REGISTRY.values() if op.kind == "elementwise"]
    assert len(elementwise) > 50
    assert sorted(op.name for op in elementwise if CPU.lookup(op.kernel).scalar is None) == []


def test_folded_only_ops_name_no_kernel_and_the_table_has_none_without_an_op():
    assert _REGISTRY["Shape"].kernel is None and _REGISTRY["NonZero"].kernel is None
    assert CPU.names() <= {op.kernel for op in _REGISTRY.values()}


def test_a_child_table_overrides_one_kernel_and_inherits_the_rest():
    def relu(k) -> None:
        raise AssertionError("not called")

    gpu = KernelTable("gpu", parent=CPU)
    gpu.register("Relu", lower=relu, scalar=None)
    assert gpu.lookup("Relu").lower is relu
    assert CPU.lookup("Relu").lower is not relu
    assert gpu.lookup("Conv") is CPU.lookup("Conv")
    assert "Relu" in gpu.names() and "Conv" in gpu.names()


def test_a_missing_kernel_names_the_backend_and_the_kernel():
    gpu = KernelTable("gpu", parent=KernelTable("base"))
    with pytest.raises(CodegenError, match=r"backend gpu has no kernel 'Conv'"):
        gpu.lookup("Conv")


def test_a_kernel_registers_once_per_table():
    table = KernelTable("t")
    table.register("Relu", lower=lambda k: None)
    with pytest.raises(ValueError, match="twice"):
        table.register("Relu", lower=lambda k: None)


def test_the_kernel_decorator_registers_the_function_it_returns():
    table = KernelTable("t")

    @table.kernel("Copy", scalar=abs)
    def copy(k) -> None:
        raise AssertionError("not called")

    assert table.lookup("Copy").lower is copy and table.lookup("Copy").scalar is abs
    with pytest.raises(ValueError, match="twice"):
        table.kernel("Copy")(copy)
