"""Code for CPUs other than the host: the schedules follow the target's width and registers.

Each target's assembly of one model with a 3x3 conv (GEMM), a depthwise conv and a
pointwise conv is checked for the instructions its vector unit has and for none it lacks:
AVX2 with 16 ymm registers and no AVX-512 (no zmm, no ymm16-31, no mask registers);
AArch64 NEON (128-bit v registers, no SVE); AArch64 SVE at 256 bits (z registers,
predicates). Every stage --emit writes re-parses with llvmlite."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import pytest
from onnx import helper

from hobbit.cli.main import main
from hobbit.backend.llvm import emit_assembly
from hobbit.compiler import lower_to_llvm
from hobbit.target import parse_target
from tests.helpers import make_model, rand

X86_V3 = "x86-64-v3"
NEON = "aarch64-linux-gnu:neoverse-n1"
SVE = "aarch64-linux-gnu:neoverse-v1"


def _model():
    x = rand(1, 24, 20, 20)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv3x3"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "D"], ["d"], pads=[1, 1, 1, 1], group=32, strides=[2, 2], name="dw"),
             helper.make_node("Conv", ["d", "P"], ["y"], name="project")]
    inits = {"W": rand(32, 24, 3, 3, seed=1) * 0.2, "B": rand(32, seed=2), "D": rand(32, 1, 3, 3, seed=3),
             "P": rand(20, 32, 1, 1, seed=4)}
    return make_model(nodes, {"x": x}, ["y"], inits)


@pytest.fixture(scope="module")
def assembly():
    model = _model()
    found = {}
    for spec in (X86_V3, NEON, SVE):
        target = parse_target(spec)
        found[spec] = emit_assembly(lower_to_llvm(model, target, threads=2).optimized, target)
    return found


def test_avx2_code_uses_16_ymm_registers_and_no_avx512(assembly):
    asm = assembly[X86_V3]
    assert re.search(r"vfmadd\d+ps\s[^\n]*%ymm", asm)
    assert "zmm" not in asm
    assert not re.search(r"%[xy]mm(1[6-9]|2\d|3[01])\b", asm), "registers 16-31 exist only with AVX-512"
    assert not re.search(r"%k[1-7]\b", asm), "mask registers exist only with AVX-512"


def test_neon_code_uses_128_bit_vectors_and_no_sve(assembly):
    asm = assembly[NEON]
    assert re.search(r"\bfmla\s+v\d+\.4s", asm)
    assert not re.search(r"\bz\d+\.", asm) and "ptrue" not in asm


def test_sve_code_uses_scalable_registers_for_the_wide_vectors(assembly):
    asm = assembly[SVE]
    assert re.search(r"\bfmla\s+z\d+\.s", asm)
    assert re.search(r"\bptrue\s+p\d+\.s, vl8\b", asm), "256-bit vectors are SVE with an 8-lane predicate"


def test_the_ir_follows_the_targets_width():
    """The schedules' multiply-adds are the target's vectors: 8 floats for AVX2 and 256-bit
    SVE, 4 for NEON (wider values exist only as loads joined for a shuffle)."""
    model = _model()
    for spec, lanes in ((X86_V3, 8), (NEON, 4), (SVE, 8)):
        text = lower_to_llvm(model, spec, threads=1, opt_level=0).llvm_ir
        assert set(re.findall(r"llvm\.fma\.v(\d+)f32", text)) == {str(lanes)}, spec


@pytest.mark.parametrize("spec", ["host", X86_V3, NEON, SVE])
def test_every_emitted_stage_reparses(spec, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    stages = {}
    for emit in ("llvm", "bc", "asm", "obj"):
        out = tmp_path / f"m.{emit}"
        assert main(["compile", str(path), "--target", spec, "--emit", emit, "-o", str(out)]) == 0
        stages[emit] = out.read_bytes()
    llvm.parse_assembly(stages["llvm"].decode()).verify()
    llvm.parse_bitcode(stages["bc"]).verify()
    assert stages["obj"][:4] == b"\x7fELF"
    machine = int.from_bytes(stages["obj"][18:20], "little")
    assert machine == (183 if spec in (NEON, SVE) else 62)  # EM_AARCH64, EM_X86_64
    assert b"hobbit_main" in stages["asm"]
