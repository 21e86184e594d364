"""precision="tf32" and "bf16": Conv and MatMul on tensor cores (mma.sync m16n8k8 .tf32 and
m16n8k16 .bf16, hobbit/backend/gpu/mma.py).

The reference is onnxruntime on operands rounded to the format here, in numpy (TF32: to
nearest, ties away from zero, as cvt.rna.tf32.f32; bf16: ties to even): a product of two
such values is exact in float32, so the kernel and the reference differ only in the order
of the float32 sums (rtol = atol = 1e-4, as the float32 GEMM tests). Against unrounded
float32 the error is the format's, about 2**-11 (TF32) or 2**-8 (bf16) of each product,
which the network test bounds."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit import zoo
from hobbit.errors import ConfigError
from hobbit.plan.gpu.gemm import GemmDims, best_tile
from hobbit.plan.gpu.mma import FORMATS, TILES, mma_tiles
from hobbit.target import gpu_target
from tests.backend.gpu.gpu_cases import compiled_for
from tests.backend.gpu.test_gemm import conv_case
from tests.helpers import make_model, rand, run_ort

TOL = {"rtol": 1e-4, "atol": 1e-4}
CUDA = ("cuda:sm_80", "cuda:sm_90")
INSTRUCTION = {"tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
               "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}


def tf32(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, rounded).view(np.float32)


def bf16(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, rounded).view(np.float32)


ROUND = {"tf32": tf32, "bf16": bf16}


def rounded_model(model: onnx.ModelProto, names: set[str], fmt: str) -> onnx.ModelProto:
    """The model with initializers `names` rounded to `fmt` (the GEMM operands; biases stay)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.name in names:
            init.CopyFrom(numpy_helper.from_array(ROUND[fmt](numpy_helper.to_array(init)), init.name))
    return out


def assert_mma_matches(model: onnx.ModelProto, feeds: dict[str, np.ndarray], operands: set[str], fmt: str) -> None:
    """Compiled with precision=fmt for sm_80 and sm_90 (ptxas: no spills) with at least one
    tensor-core kernel; the emulated result against onnxruntime on operands in `fmt`."""
    round_ = ROUND[fmt]
    expected = run_ort(rounded_model(model, operands, fmt),
                       {k: round_(v) if k in operands else v for k, v in feeds.items()})
    for spec in CUDA:
        gm = compiled_for(model, spec, fmt)
        assert INSTRUCTION[fmt] in gm.device_code
        got = gm.emulate(feeds)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, **TOL, err_msg=spec)


def matmul_case(a_shape, b_shape, epilogue: str | None = None):
    feeds = {"a": rand(*a_shape)}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y" if epilogue is None else "t"])]
    if epilogue is not None:
        nodes.append(helper.make_node(epilogue, ["t"], ["y"]))
    return make_model(nodes, feeds, ["y"], {"b": rand(*b_shape, seed=1)}), feeds


MATMULS = {
    "whole_tiles": ((64, 32), (32, 64)),
    "ragged": ((100, 37), (37, 70)),
    "large": ((256, 48), (48, 384)),
    "batched_broadcast": ((3, 48, 33), (33, 80)),
}


@pytest.mark.parametrize("fmt", ["tf32", "bf16"])
@pytest.mark.parametrize("name", MATMULS)
def test_matmul_on_tensor_cores(name, fmt):
    a_shape, b_shape = MATMULS[name]
    model, feeds = matmul_case(a_shape, b_shape, "Relu" if name == "ragged" else None)
    assert_mma_matches(model, feeds, {"a", "b"}, fmt)


MMA_CONVS = {
    "3x3_pad1_relu": dict(x_shape=(2, 16, 12, 12), w_shape=(48, 16, 3, 3), pads=(1, 1, 1, 1), epilogue=("Relu",)),
    "7x7_stride2_pad3": dict(x_shape=(1, 3, 40, 40), w_shape=(64, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    "groups2_dilation2": dict(x_shape=(1, 64, 10, 10), w_shape=(64, 32, 3, 3), group=2, dilations=(2, 2),
                              pads=(2, 2, 2, 2)),
    "residual_1x1": dict(x_shape=(2, 40, 9, 9), w_shape=(72, 40, 1, 1), residual=True, epilogue=("Relu",)),
}


@pytest.mark.parametrize("fmt", ["tf32", "bf16"])
@pytest.mark.parametrize("name", MMA_CONVS)
def test_conv_on_tensor_cores(name, fmt):
    model, feeds = conv_case(**MMA_CONVS[name])
    assert_mma_matches(model, feeds, {"x", "w"}, fmt)


@pytest.mark.parametrize("fmt, bits, ties", [("tf32", 10, "away"), ("bf16", 7, "even")])
def test_rounding_to_nearest(fmt, bits, ties):
    """y = x @ I: the output is x as the tensor cores see it. A tie between 1 and 1 + ulp
    goes away from zero in TF32 (cvt.rna), to the even 1 in bf16; 1 + 3 ulp / 2 goes up in both."""
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -bits)  # the unit in the last place at 1
    x = rand(32, 32)
    x[0, :7] = [one + ulp / 2, -(one + ulp / 2), one + ulp / 4, one + 3 * ulp / 4, one + 3 * ulp / 2, 1e-30, -0.0]
    model = make_model([helper.make_node("MatMul", ["x", "i"], ["y"])], {"x": x}, ["y"],
                       {"i": np.eye(32, dtype=np.float32)})
    got = compiled_for(model, "cuda:sm_90", fmt).emulate({"x": x})[0]
    tie = one + ulp if ties == "away" else one
    np.testing.assert_array_equal(got[0, :5], [tie, -tie, one, one + ulp, one + 2 * ulp])
    np.testing.assert_array_equal(got, ROUND[fmt](x))


def test_small_gemms_stay_simt():
    """A batch-1 classifier (M = 1 row) would be 15/16 padding on an m16 tile."""
    model, feeds = matmul_case((1, 512), (512, 1000))
    gm = compiled_for(model, "cuda:sm_90", "tf32")
    assert "mma.sync" not in gm.device_code
    np.testing.assert_allclose(gm.emulate(feeds)[0], run_ort(model, feeds)[0], **TOL)


@pytest.mark.parametrize("target", ["rocm:gfx942", "host"])
def test_tf32_needs_nvidia_tensor_cores(target):
    model, _ = matmul_case((64, 32), (32, 64))
    with pytest.raises(ConfigError, match="tf32.*NVIDIA"):
        hobbit.compile(model, target=target, precision="tf32", cache=False)
    if target != "host":  # bf16 on a CPU is the CPU's own bf16 mode (hobbit.passes.bf16)
        with pytest.raises(ConfigError, match="bf16.*NVIDIA"):
            hobbit.compile(model, target=target, precision="bf16", cache=False)


@pytest.mark.parametrize("fmt, name", [("tf32", "tf32"), ("bf16", "gpu-bf16")])
def test_a_pass_list_without_the_tensor_core_pass_is_refused(fmt, name):
    model, _ = matmul_case((64, 32), (32, 64))
    with pytest.raises(ConfigError, match=f"no '{name}' pass"):
        hobbit.compile(model, target="cuda", precision=fmt, passes=["fuse"], cache=False)


@pytest.mark.parametrize("fmt, bound", [("tf32", 5e-3), ("bf16", 3e-2)])
def test_squeezenet_on_tensor_cores_stays_near_float32(fmt, bound):
    """A whole network: its logits within the format's error of onnxruntime's float32 ones
    (measured, max |diff| / max |logit|: TF32 5.5e-4, bf16 5.5e-3; float32 on the same
    kernels 1.5e-7)."""
    model = zoo.build("squeezenet1_1")
    x = rand(1, 3, 224, 224, seed=11)
    expected = run_ort(model, {"input": x})[0]
    gm = compiled_for(model, "cuda:sm_80", fmt)
    assert INSTRUCTION[fmt] in gm.device_code
    got = gm.emulate({"input": x})[0]
    assert np.abs(got - expected).max() <= bound * np.abs(expected).max()


@pytest.mark.parametrize("dims, tile", [
    (GemmDims(256, 8 * 56 * 56, 576, 1), (128, 128, 256)),  # big: the largest tile fills the SMs
    (GemmDims(64, 112 * 112, 147, 1), (64, 64, 128)),  # ResNet's stem at batch 1: 64 x 128 gives 98 blocks
    (GemmDims(512, 49, 4608, 1), (32, 32, 128)),  # 7x7 layer at batch 1: the most blocks (32 of 132)
])
def test_tensor_core_tile_rule(dims, tile) -> None:
    target = gpu_target("cuda:sm_90")
    t = best_tile(mma_tiles(dims.m, dims.n, target), dims, target)
    assert (t.bm, t.bn, t.threads) == tile


def test_every_tensor_core_tile_fits_its_kernel() -> None:
    """Whole warps of whole mma tiles; B's staging gives each thread one column (threads
    a multiple of BN); the registers asked for (blocks_per_sm) hold the accumulators twice."""
    for t in TILES:
        assert t.warp_m % 16 == 0 and t.warp_n % 8 == 0 and t.threads % t.bn == 0 and t.bk % 8 == 0
        assert 65536 // (t.threads * t.blocks_per_sm) >= 2 * t.accumulators


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_operand_element_is_in_exactly_one_fragment(fmt) -> None:
    """The layout the emulation gathers through: each (row, k) of A's 16 x K and each k of
    B's column is held by one lane's one fragment element."""
    f = FORMATS[fmt]
    held_a = sorted((dr + g, f.step * t + dk) for g in range(8) for t in range(4) for dr, dk in f.a)
    held_b = sorted(f.step * t + dk for t in range(4) for dk in f.b)
    assert held_a == sorted((r, k) for r in range(16) for k in range(f.k)) and held_b == list(range(f.k))
    assert all(f.source(f.a, k, dr) for dr in (0, 8) for k in range(f.k))
