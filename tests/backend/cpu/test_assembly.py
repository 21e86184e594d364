"""The emitted code is vectorised for the host: convolution uses packed FMAs on
the widest vector registers the target has (zmm with AVX-512, ymm with AVX2)."""

from __future__ import annotations

import re

from onnx import helper

from hobbit.backend.llvm import emit_assembly
from hobbit.emit.naming import kernel_name
from hobbit.compiler import lower_to_llvm
from tests.helpers import make_model, rand


def _conv_model():
    x = rand(1, 8, 14, 14)  # 8 channels: the direct (im2col + GEMM) path
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="stage1/conv"),
             helper.make_node("Relu", ["c"], ["y"], name="stage1/relu")]
    return make_model(nodes, {"x": x}, ["y"], {"W": rand(32, 8, 3, 3), "B": rand(32)})


def test_conv_assembly_has_packed_fmas_on_widest_registers():
    report = lower_to_llvm(_conv_model())
    asm = emit_assembly(report.optimized, report.target)
    reg = "zmm" if report.target.vector_bits == 512 else "ymm"
    fmas = re.findall(rf"vfmadd\d+ps\s+[^\n]*%{reg}", asm)
    assert len(fmas) >= 8, f"expected packed FMAs on {reg}, found {len(fmas)}"


def test_generated_functions_are_named_after_graph_nodes():
    report = lower_to_llvm(_conv_model())
    conv = report.graph.nodes[0]
    assert kernel_name(conv) == "Conv+Relu[stage1/conv]"
    assert '@"Conv+Relu[stage1/conv]"' in report.llvm_ir
    assert "define i32 @\"hobbit_main\"" in report.llvm_ir
