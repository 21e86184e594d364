"""precision="tf32": Conv and MatMul on tensor cores (mma.sync.m16n8k8, hobbit/gpu/mma.py).

The reference is onnxruntime on operands rounded to TF32 here, in numpy (to nearest, ties
away from zero, as cvt.rna.tf32.f32): a product of two TF32 values is exact in float32,
so the kernel and the reference differ only in the order of the float32 sums (rtol = atol
= 1e-4, as the float32 GEMM tests). Against unrounded float32 the error is TF32's, about
2**-11 of each product, which the last test bounds on a whole network."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit import zoo
from hobbit.errors import ConfigError
from hobbit.plan.gpu_gemm import GemmDims, best_tile
from hobbit.plan.gpu_mma import TILES, mma_tiles
from hobbit.target import gpu_target
from tests.gpu.gpu_cases import compiled_for
from tests.gpu.test_gemm import conv_case
from tests.helpers import make_model, rand, run_ort

TOL = {"rtol": 1e-4, "atol": 1e-4}
CUDA = ("cuda:sm_80", "cuda:sm_90")


def tf32(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, rounded).view(np.float32)


def rounded_model(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """The model with initializers `names` rounded to TF32 (the GEMM operands; biases stay)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.name in names:
            init.CopyFrom(numpy_helper.from_array(tf32(numpy_helper.to_array(init)), init.name))
    return out


def assert_tf32_matches(model: onnx.ModelProto, feeds: dict[str, np.ndarray], operands: set[str]) -> None:
    """Compiled with precision="tf32" for sm_80 and sm_90 (ptxas: no spills) with at least
    one tensor-core kernel; the emulated result against onnxruntime on TF32 operands."""
    expected = run_ort(rounded_model(model, operands), {k: tf32(v) if k in operands else v for k, v in feeds.items()})
    for spec in CUDA:
        gm = compiled_for(model, spec, "tf32")
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in gm.device_code
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


@pytest.mark.parametrize("name", MATMULS)
def test_matmul_on_tensor_cores(name):
    a_shape, b_shape = MATMULS[name]
    model, feeds = matmul_case(a_shape, b_shape, "Relu" if name == "ragged" else None)
    assert_tf32_matches(model, feeds, {"a", "b"})


TF32_CONVS = {
    "3x3_pad1_relu": dict(x_shape=(2, 16, 12, 12), w_shape=(48, 16, 3, 3), pads=(1, 1, 1, 1), epilogue=("Relu",)),
    "7x7_stride2_pad3": dict(x_shape=(1, 3, 40, 40), w_shape=(64, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    "groups2_dilation2": dict(x_shape=(1, 64, 10, 10), w_shape=(64, 32, 3, 3), group=2, dilations=(2, 2),
                              pads=(2, 2, 2, 2)),
    "residual_1x1": dict(x_shape=(2, 40, 9, 9), w_shape=(72, 40, 1, 1), residual=True, epilogue=("Relu",)),
}


@pytest.mark.parametrize("name", TF32_CONVS)
def test_conv_on_tensor_cores(name):
    model, feeds = conv_case(**TF32_CONVS[name])
    assert_tf32_matches(model, feeds, {"x", "w"})


def test_rounding_is_to_nearest_ties_away():
    """y = x @ I: the output is x as the tensor cores see it."""
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)  # TF32's unit in the last place at 1
    x = rand(32, 32)
    x[0, :6] = [one + ulp / 2, -(one + ulp / 2), one + ulp / 4, one + 3 * ulp / 4, 1e-30, -0.0]
    model = make_model([helper.make_node("MatMul", ["x", "i"], ["y"])], {"x": x}, ["y"],
                       {"i": np.eye(32, dtype=np.float32)})
    got = compiled_for(model, "cuda:sm_90", "tf32").emulate({"x": x})[0]
    np.testing.assert_array_equal(got[0, :4], [one + ulp, -(one + ulp), one, one + ulp])
    np.testing.assert_array_equal(got, tf32(x))


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


def test_a_pass_list_without_the_tf32_pass_is_refused():
    model, _ = matmul_case((64, 32), (32, 64))
    with pytest.raises(ConfigError, match="no 'tf32' pass"):
        hobbit.compile(model, target="cuda", precision="tf32", passes=["fuse"], cache=False)


def test_squeezenet_in_tf32_stays_near_float32():
    """A whole network: its logits within TF32's error of onnxruntime's float32 ones
    (measured: max |diff| / max |logit| = 5.5e-4, float32 on the same kernels: 1.5e-7)."""
    model = zoo.build("squeezenet1_1")
    x = rand(1, 3, 224, 224, seed=11)
    expected = run_ort(model, {"input": x})[0]
    gm = compiled_for(model, "cuda:sm_80", "tf32")
    assert gm.device_code.count("mma.sync") > 0
    got = gm.emulate({"input": x})[0]
    assert np.abs(got - expected).max() <= 5e-3 * np.abs(expected).max()


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
