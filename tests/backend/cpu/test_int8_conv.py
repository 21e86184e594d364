"""int8 convolution against onnxruntime: QLinearConv and the QDQ form quantize_static writes
(DequantizeLinear(x) -> Conv(DequantizeLinear(w), DequantizeLinear(bias)) -> [Relu] ->
QuantizeLinear) over kernel sizes, strides, pads, dilation, groups and depthwise, odd
channel counts, spatial sizes from 1x1 to 56x56, batch 2, per-tensor and per-channel weight
scales, U8S8 and S8S8, asymmetric zero points, saturation at both ends, rounding ties, and
extreme weights whose exact int32 accumulators are known by arithmetic.

Tolerance: the issue's "within one quantization step" (int8_models.assert_within_one_step);
the extreme-weight cases are exact (their real outputs sit far from rounding ties)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
from hobbit.target import host_target
from tests.helpers import make_model, run_ort
from tests.backend.cpu.int8_models import (OPSET, Quant, assert_informative, assert_within_one_step, bias_values,
                                     int8_weights, output_scale, qdq_conv, qlinear_conv, quantized, run_both,
                                     weight_scales)

FORMS = ["qlinear", "qdq"]


@dataclass(frozen=True)
class Geometry:
    batch: int
    channels: int
    size: int
    out: int
    kernel: int
    stride: int = 1
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: int = 1
    group: int = 1

    def __str__(self) -> str:
        return (f"n{self.batch}c{self.channels}s{self.size}m{self.out}k{self.kernel}st{self.stride}"
                f"p{''.join(map(str, self.pads))}d{self.dilation}g{self.group}")

    @property
    def attrs(self) -> dict:
        return {"kernel_shape": [self.kernel] * 2, "strides": [self.stride] * 2, "pads": list(self.pads),
                "dilations": [self.dilation] * 2, "group": self.group}

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out, self.channels // self.group, self.kernel, self.kernel)


def _p(k: int) -> tuple[int, int, int, int]:
    return (k // 2,) * 4


GEOMETRIES = [
    Geometry(1, 16, 14, 16, 1),
    Geometry(1, 8, 14, 16, 3, pads=_p(3)),
    Geometry(1, 16, 14, 8, 3, stride=2, pads=_p(3)),
    Geometry(1, 5, 7, 7, 5, pads=_p(5)),
    Geometry(1, 3, 14, 16, 7, stride=2, pads=_p(7)),  # a ResNet stem on 3 channels
    Geometry(1, 5, 9, 5, 3, pads=(0, 1, 1, 2)),  # asymmetric pads (begin h, begin w, end h, end w)
    Geometry(1, 17, 7, 17, 3),  # no pads, 17 channels: neither a multiple of 4 nor of 16
    Geometry(1, 8, 14, 8, 3, pads=_p(5), dilation=2),
    Geometry(1, 8, 9, 6, 3, pads=_p(3), group=2),
    Geometry(1, 17, 9, 17, 3, pads=_p(3), group=17),  # depthwise, odd channels
    Geometry(1, 16, 14, 32, 3, stride=2, pads=_p(3), group=16),  # depthwise, channel multiplier 2
    Geometry(1, 32, 14, 32, 5, stride=2, pads=_p(5), group=32),
    Geometry(1, 24, 20, 24, 3, pads=_p(3), group=24),  # depthwise rows of a vector and a ragged rest
    Geometry(1, 16, 23, 16, 3, stride=2, pads=(0, 1, 1, 2), group=16),  # depthwise, asymmetric pads
    Geometry(1, 8, 21, 8, 3, pads=_p(5), dilation=2, group=8),  # depthwise, dilated
    Geometry(1, 8, 33, 8, 7, stride=2, pads=_p(7), group=8),  # depthwise 7x7: two windows a kernel row
    Geometry(1, 4, 30, 4, 3, stride=2, pads=(12,) * 4, dilation=12, group=4),  # a window past 64 bytes: tap by tap
    Geometry(1, 64, 1, 32, 1),  # 1x1 spatial, as after a global pool
    Geometry(1, 5, 1, 3, 3, pads=_p(3)),  # 3x3 on a 1x1 image: only the centre tap is inside
    Geometry(1, 64, 56, 64, 3, pads=_p(3)),  # a ResNet stage-1 convolution
    Geometry(2, 5, 9, 17, 3, stride=2, pads=_p(3)),
    Geometry(2, 16, 14, 32, 1, stride=2),  # a ResNet downsample shortcut
]

U8 = np.uint8
S8 = np.int8


def _case(form: str, g: Geometry, x_dtype=U8, x_zero: int = 37, y_zero: int = 128, per_channel: bool = True,
          with_bias: bool = True, relu: bool = False, spread: float = 1.0,
          seed: int = 0) -> tuple[onnx.ModelProto, np.ndarray, Quant]:
    """The model and input of one case; y's scale spreads the real output over ~six deviations."""
    x_q = Quant(x_dtype, 0.02, x_zero)
    x = quantized((g.batch, g.channels, g.size, g.size), x_q, seed)
    w = int8_weights(g.weight_shape, seed + 1)
    w_scale = weight_scales(g.out, per_channel)
    taps = g.channels // g.group * g.kernel ** 2
    y_q = Quant(x_dtype, output_scale(x, x_q, w, w_scale, taps, spread), y_zero)
    bias = bias_values(g.out, x_q, w_scale, y_q, seed + 2) if with_bias else None
    if form == "qlinear":
        model = qlinear_conv(x, x_q, w, w_scale, y_q, bias, **g.attrs)
    else:
        model = qdq_conv(x, x_q, w, w_scale, y_q, bias, relu, **g.attrs)
    return model, x, y_q


def _check(form: str, g: Geometry, **kw) -> np.ndarray:
    model, x, y_q = _case(form, g, **kw)
    (got,), (want,) = run_both(model, {"x": x})
    what = f"{form} {g} {kw}"
    assert want.shape[:2] == (g.batch, g.out)
    assert_informative(want, y_q, what)
    assert_within_one_step(got, want, what)
    return want


@pytest.mark.parametrize("g", GEOMETRIES, ids=str)
@pytest.mark.parametrize("form", FORMS)
def test_geometry(form, g):
    _check(form, g)


SMALL = Geometry(1, 5, 7, 7, 3, pads=_p(3))
QUANTIZATIONS = [  # (x dtype, x zero point, y zero point, per-channel weight scales, bias, Relu before Q)
    (U8, 0, 128, True, True, False),
    (U8, 128, 128, True, True, False),
    (U8, 37, 0, True, True, False),
    (U8, 255, 200, True, True, False),
    (U8, 37, 200, False, True, False),
    (U8, 128, 0, False, False, False),
    (U8, 37, 128, True, False, False),
    (U8, 37, 0, True, True, True),  # Relu with y's zero point at 0: onnxruntime folds the Relu into Q
    (U8, 128, 200, True, True, True),  # Relu that Q's clamp does not imply
    (S8, 0, 0, True, True, False),  # S8S8: int8 activations
    (S8, -128, 0, True, True, False),
    (S8, 37, 100, False, True, False),
    (S8, -91, -100, True, False, False),
    (S8, 0, -128, True, True, True),
    (S8, 0, 0, False, True, True),
]


@pytest.mark.parametrize("form,x_dtype,x_zero,y_zero,per_channel,with_bias,relu",
                         [(form, *q) for form in FORMS for q in QUANTIZATIONS if form == "qdq" or not q[-1]],
                         ids=lambda v: getattr(v, "__name__", str(v)))  # QLinearConv has no Relu
def test_quantization(form, x_dtype, x_zero, y_zero, per_channel, with_bias, relu):
    for g in (SMALL, Geometry(1, 16, 7, 32, 3, stride=2, pads=_p(3), group=16)):
        _check(form, g, x_dtype=x_dtype, x_zero=x_zero, y_zero=y_zero, per_channel=per_channel,
               with_bias=with_bias, relu=relu)


@pytest.mark.parametrize("x_dtype,y_zero", [(U8, 128), (S8, 0)], ids=["u8", "s8"])
@pytest.mark.parametrize("g", [SMALL, Geometry(1, 16, 7, 16, 3, pads=_p(3), group=16)], ids=str)
@pytest.mark.parametrize("form", FORMS)
def test_saturation_at_both_ends(form, g, x_dtype, y_zero):
    """y's scale 20x too small: a large part of the output saturates at each end."""
    model, x, y_q = _case(form, g, x_dtype=x_dtype, y_zero=y_zero, spread=20)
    (got,), (want,) = run_both(model, {"x": x})
    assert np.mean(want == y_q.low) > 0.2 and np.mean(want == y_q.high) > 0.2
    assert_within_one_step(got, want, f"{form} {g} saturated")


@pytest.mark.parametrize("x_dtype,x_zero,y_zero", [(U8, 128, 128), (S8, 0, 0)], ids=["u8", "s8"])
@pytest.mark.parametrize("form", FORMS)
def test_rounding_ties_round_half_to_even(form, x_dtype, x_zero, y_zero):
    """Power-of-two scales make x_scale * w_scale / y_scale exactly 1/2, so every odd accumulator is
    a tie; round-half-to-even (ONNX QuantizeLinear) and round-half-away differ on half of the ties,
    far above the 2% the step bound lets differ."""
    x_q, y_q = Quant(x_dtype, 2.0 ** -4, x_zero), Quant(x_dtype, 2.0 ** -6, y_zero)
    gen = np.random.default_rng(5)
    x = (x_zero + gen.integers(-8, 8, (1, 6, 8, 8), endpoint=True)).astype(x_dtype)
    w = gen.integers(-7, 7, (8, 6, 1, 1), endpoint=True).astype(np.int8)
    w_scale = np.array(2.0 ** -3, np.float32)
    bias = gen.integers(-9, 9, 8, endpoint=True).astype(np.int32)
    model = (qlinear_conv(x, x_q, w, w_scale, y_q, bias) if form == "qlinear"
             else qdq_conv(x, x_q, w, w_scale, y_q, bias))
    acc = np.einsum("nchw,mc->nmhw", x.astype(np.int64) - x_zero, w[:, :, 0, 0].astype(np.int64)) + bias[:, None, None]
    assert np.mean(acc % 2 == 1) > 0.4
    exact = np.clip(np.rint(acc / 2) + y_zero, y_q.low, y_q.high).astype(x_dtype)  # numpy rounds half to even
    (got,), (want,) = run_both(model, {"x": x})
    np.testing.assert_array_equal(want, exact)  # the reference does round half to even
    assert_within_one_step(got, want, f"{form} ties")


EXTREMES = [  # (x dtype, x value, x zero point): x - zero point is +-255 (u8) or +-128 / 255 (s8)
    (U8, 255, 0), (U8, 0, 255), (S8, -128, 0), (S8, 127, -128),
]
EXTREME_WEIGHTS = np.array([127, -128, -127, 127], np.int8)  # one constant per output channel
CHANNELS = 512  # K = 512 x 3 x 3 = 4608 products per interior output


def _extreme_case(x_dtype, x_value: int, x_zero: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All-equal x against all-equal weights per channel, 3x3 pad 1 on 4x4: corners sum 4 taps,
    edges 6, the interior 9, so each accumulator is taps * 512 * (x - zero) * w exactly."""
    x = np.full((1, CHANNELS, 4, 4), x_value, x_dtype)
    w = np.broadcast_to(EXTREME_WEIGHTS[:, None, None, None], (4, CHANNELS, 3, 3)).copy()
    taps = np.full((4, 4), 9)
    taps[[0, -1], :] -= 3
    taps[:, [0, -1]] -= 3
    taps[[0, 0, -1, -1], [0, -1, 0, -1]] = 4
    acc = taps[None, None] * CHANNELS * (x_value - x_zero) * EXTREME_WEIGHTS.astype(np.int64)[None, :, None, None]
    return x, w, acc


@pytest.mark.parametrize("x_dtype,x_value,x_zero", EXTREMES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_extreme_weights_accumulate_exactly(x_dtype, x_value, x_zero):
    """ConvInteger returns the int32 accumulators themselves: equal to the arithmetic (|acc| up to
    9 * 512 * 255 * 128 = 150,405,120, beyond int16 and beyond a saturating vpmaddubsw pair)."""
    x, w, acc = _extreme_case(x_dtype, x_value, x_zero)
    inits = {"w": w, "x_zero": np.array(x_zero, x_dtype)}
    model = make_model([helper.make_node("ConvInteger", ["x", "w", "x_zero"], ["y"], pads=[1, 1, 1, 1])],
                       {"x": x}, ["y"], inits, OPSET)
    want, = run_ort(model, {"x": x})
    np.testing.assert_array_equal(want, acc)
    got, = hobbit.compile(model).run({"x": x})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, acc)


@pytest.mark.parametrize("x_dtype,x_value,x_zero", EXTREMES, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("form", FORMS)
def test_extreme_weights_requantize_exactly(form, x_dtype, x_value, x_zero):
    """The same accumulators requantized: per-channel weight scales 0.001 * 127 / |w| put every
    channel's interior 100 steps from y's zero point, edges 66.7 and corners 44.4 steps, far from
    rounding ties, so the exact result is known and hobbit must equal it."""
    x, w, acc = _extreme_case(x_dtype, x_value, x_zero)
    x_q = Quant(x_dtype, 0.02, x_zero)
    w_scale = (0.001 * 127 / np.abs(EXTREME_WEIGHTS.astype(np.float64))).astype(np.float32)
    interior = 9 * CHANNELS * abs(x_value - x_zero) * 127 * x_q.scale * 0.001
    y_q = Quant(x_dtype, interior / 100, 128 if x_dtype == U8 else 0)
    model = (qlinear_conv(x, x_q, w, w_scale, y_q, pads=[1, 1, 1, 1]) if form == "qlinear"
             else qdq_conv(x, x_q, w, w_scale, y_q, pads=[1, 1, 1, 1]))
    steps = acc * (x_q.scale * w_scale.astype(np.float64)[None, :, None, None]) / np.float64(np.float32(y_q.scale))
    assert np.min(np.abs(steps - np.floor(steps) - 0.5)) > 0.05
    exact = (np.rint(steps) + y_q.zero).astype(x_dtype)
    (got,), (want,) = run_both(model, {"x": x})
    np.testing.assert_array_equal(want, exact)
    np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize("form", FORMS)
def test_one_output_channel_with_a_per_tensor_weight_scale(form):
    """A scalar weight scale of a conv with one output channel is per tensor (its size is
    also the channel count: the per-channel check must not index its shape)."""
    _check(form, Geometry(1, 8, 7, 1, 3, pads=_p(3)), per_channel=False)


@pytest.mark.parametrize("g", [Geometry(1, 24, 7, 70, 3, pads=_p(3)),  # 70 channels: a ragged last panel of MR
                               Geometry(1, 40, 14, 70, 1, stride=2),  # a 1x1 stride-2 shortcut onto 7x7
                               Geometry(1, 16, 7, 22, 3, pads=_p(3), group=2)],  # panels per group
                         ids=str)
def test_whole_image_split_and_weight_panels(g):
    """A 7x7 output on two threads shares one im2col and splits the output channels
    (hobbit.plan.int8.split_of); the weights are in panels of MR channels, the last one
    padded. Both thread counts and onnxruntime agree, and the stored panels unpack to the
    filters (the reference reads them)."""
    from hobbit.ops.qlinear import unpacked_weights
    from hobbit.plan.int8 import int8_conv_plan
    from hobbit.target import host_target

    model, x, y_q = _case("qdq", g)
    one, two = hobbit.compile(model, threads=1, cache=False), hobbit.compile(model, threads=2, cache=False)
    (node,) = [n for n in two.report.graph.nodes if n.op == "QConv"]
    assert node.attrs["weight_panel"] == int8_conv_plan(node, host_target(), 2).gemm.mr
    if g.group == 1:
        assert int8_conv_plan(node, host_target(), 2).split == "image"
    w = unpacked_weights(node.inputs[1].const, node.attrs)
    assert w.shape == g.weight_shape
    np.testing.assert_array_equal(w, int8_weights(g.weight_shape, 1))
    got1, got2 = one.run({"x": x})[0], two.run({"x": x})[0]
    np.testing.assert_array_equal(got1, got2)
    assert_within_one_step(got2, run_ort(model, {"x": x})[0], str(g))


DEPTHWISE = Geometry(1, 16, 23, 16, 3, stride=2, pads=(0, 1, 1, 2), group=16)


@pytest.mark.parametrize("target, windows", [("znver4", True), ("x86_64-linux-gnu:znver4:-avx512vbmi", False)])
def test_depthwise_windows_where_the_target_permutes_bytes(target, windows):
    """A depthwise QConv sums each kernel row with vpdpbusd over permuted byte windows on a
    target with AVX512-VBMI (hobbit.backend.cpu.int8_depthwise), tap by tap on one without it
    (VNNI without VBMI, as on Cascade Lake) or where a window's bytes span more than one
    64-byte load;
    both agree with onnxruntime, and the stored kernel rows unpack to the filters."""
    from hobbit.backend.cpu.int8_depthwise import windowed
    from hobbit.ops.qlinear import unpacked_weights
    from hobbit.plan.int8 import int8_conv_plan
    from hobbit.target import parse_target

    model, x, _ = _case("qdq", DEPTHWISE)
    spec = parse_target(target)
    compiled = hobbit.compile(model, target=target, cache=False)
    (node,) = [n for n in compiled.report.graph.nodes if n.op == "QConv"]
    assert windowed(int8_conv_plan(node, spec, 1), spec) is windows
    np.testing.assert_array_equal(unpacked_weights(node.inputs[1].const, node.attrs),
                                  int8_weights(DEPTHWISE.weight_shape, 1))
    far = _case("qdq", Geometry(1, 4, 30, 4, 3, stride=2, pads=(12,) * 4, dilation=12, group=4))[0]
    (far_node,) = [n for n in hobbit.compile(far, target="znver4", cache=False).report.graph.nodes if n.op == "QConv"]
    assert not windowed(int8_conv_plan(far_node, parse_target("znver4"), 1), parse_target("znver4"))
    if not set(spec.enabled) <= set(host_target().enabled):
        pytest.skip(f"this host cannot run code for {target}")
    assert_within_one_step(compiled.run({"x": x})[0], run_ort(model, {"x": x})[0], f"{DEPTHWISE} on {target}")
