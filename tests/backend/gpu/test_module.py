"""The GPU module: unsupported ops reported at compile time, kernel names, launches,
block sizes in the IR, and the barrier discipline the host emulation checks."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir
from onnx import helper

import hobbit
from hobbit.backend.gpu.launch import Launch
from hobbit.backend.gpu.module import ptx_name, with_block_size
from hobbit.backend.llvm import optimize
from hobbit.errors import CodegenError, UnsupportedModelError
from hobbit.backend.gpu.racecheck import RaceChecker
from hobbit.backend.gpu.simt import Simt
from hobbit.emit.builder import PTR, KernelBuilder
from hobbit.plan.memory import Place
from hobbit.target import host_target
from tests.helpers import make_model, rand


def test_an_op_without_a_gpu_kernel_is_reported_with_its_node() -> None:
    x = rand(2, 10)
    model = make_model([helper.make_node("Relu", ["x"], ["r"], name="act"),
                        helper.make_node("TopK", ["r", "k"], ["v", "i"], name="pick", axis=1)],
                       {"x": x}, ["v", "i"], {"k": np.array([3], np.int64)})
    for target in ("cuda", "rocm"):
        with pytest.raises(UnsupportedModelError) as info:
            hobbit.compile(model, target=target, cache=False)
        assert "TopK" in str(info.value) and "'pick'" in str(info.value) and "GPU kernel" in str(info.value)
        assert "act" not in str(info.value)


def test_kernel_names_are_the_nodes_in_symbols_ptx_accepts() -> None:
    assert ptx_name("Conv+Relu[layer1.0/conv]") == "Conv_Relu_layer1_0_conv_"
    assert ptx_name("1x") == "_1x"
    model = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="gate/act.1")], {"x": rand(3)}, ["y"])
    gm = hobbit.compile(model, target="cuda", cache=False)
    assert [launch.kernel for launch in gm.launches] == ["Sigmoid_gate_act_1_"]
    assert ".entry Sigmoid_gate_act_1_" in gm.device_code


def test_launch_round_trips_through_json() -> None:
    launch = Launch("k", "node", "Relu", (4, 1, 1), 256, 1024, (Place("input", 0), Place("arena", 128, 64)))
    assert Launch.from_json(launch.to_json()) == launch


def test_each_kernel_declares_its_block_size() -> None:
    text = 'define ptx_kernel void @"a"(ptr %"x")\n{\n}\ndefine internal void @"b"()\n'
    launch = Launch("a", "n", "Relu", (1, 1, 1), 128, 0, ())
    assert with_block_size(text, [launch], "nvptx").splitlines()[0].endswith('"nvvm.maxntid"="128"')
    assert '"amdgpu-flat-work-group-size"="1,128"' in with_block_size(text, [launch], "amdgpu")
    assert with_block_size(text, [launch], "host") == text


def test_a_value_carried_across_a_barrier_outside_memory_is_rejected_on_the_host() -> None:
    """The emulation's guarantee: a kernel that keeps a phase's value in a register past a
    barrier (undefined on a GPU: the other threads' phase may not have run) fails to build."""
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name="k")
    kb = KernelBuilder(fn)
    simt = Simt(kb, "host", 4, [kb.i64(0)] * 3, RaceChecker(module))
    with simt.phase() as tid:
        value = kb.b.add(tid, kb.i64(1))
    with simt.phase() as tid:
        kb.store(value, fn.args[0], np.int64, tid)
    kb.finish()
    with pytest.raises(CodegenError, match="dominate"):
        optimize(str(module), host_target())
