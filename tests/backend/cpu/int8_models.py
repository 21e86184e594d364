"""Builders for the int8 parity tests: tiny quantized ONNX models, in the QLinear form and
in the QDQ form onnxruntime's quantize_static writes (DequantizeLinear -> op ->
QuantizeLinear, weights and int32 biases as constants), quantized inputs that hit the
zero point and both ends of the range, and the "within one quantization step" comparison
against onnxruntime (the issue's bar for running other tools' quantized models).

Why one step and not bit-exact: onnxruntime requantizes with a float multiplier
x_scale * w_scale / y_scale, an emulation in float divides by y_scale, and a fixed-point
requantizer rounds its multiplier to 31 bits; each can move a value lying within a few
ulps of a rounding tie to the other side. Those values are rare, so besides the bound of
1 at most MAX_DIFFERING of the elements may differ at all. Measured: on hobbit's float
emulation of int8 every per-op case was bit-exact except the 56x56x64 QDQ convolution (6
of 200,704 outputs, 0.003%, one step apart); on the int8 kernels every case is bit-exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

import hobbit
from tests.helpers import make_model, run_ort

OPSET = 17  # what the zoo models carry and quantize_static keeps; per-axis DequantizeLinear needs >= 13
MAX_DIFFERING = 0.02


@dataclass(frozen=True)
class Quant:
    """An activation's quantization: integer type, scale, zero point."""
    dtype: type
    scale: float
    zero: int

    @property
    def low(self) -> int:
        return int(np.iinfo(self.dtype).min)

    @property
    def high(self) -> int:
        return int(np.iinfo(self.dtype).max)

    def params(self, prefix: str) -> dict[str, np.ndarray]:
        """Scale and zero point as the initializers `{prefix}_scale` and `{prefix}_zero`."""
        return {f"{prefix}_scale": np.array(self.scale, np.float32), f"{prefix}_zero": np.array(self.zero, self.dtype)}


def quantized(shape: tuple[int, ...], q: Quant, seed: int) -> np.ndarray:
    """Uniform integers over q's whole range with some elements pinned to the zero point and to
    both ends, so the zero-point correction and the range limits are always exercised."""
    flat = np.random.default_rng(seed).integers(q.low, q.high, size=shape, endpoint=True).reshape(-1)
    flat[::7], flat[3::11], flat[5::13] = q.zero, q.low, q.high
    return flat.reshape(shape).astype(q.dtype)


def int8_weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Symmetric int8 weights in [-127, 127], as quantize_static makes them (it never uses -128)."""
    return np.random.default_rng(seed).integers(-127, 127, size=shape, endpoint=True).astype(np.int8)


def weight_scales(channels: int, per_channel: bool, base: float = 0.01) -> np.ndarray:
    """Per-channel scales spread over a factor of 4 (so a kernel that applies one channel's scale
    to another is caught), or one scale."""
    if not per_channel:
        return np.array(base, np.float32)
    return (base * (0.5 + 1.5 * (np.arange(channels) % 5) / 4)).astype(np.float32)


def output_scale(x: np.ndarray, x_q: Quant, w: np.ndarray, w_scale: np.ndarray, taps: int,
                 spread: float = 1.0) -> float:
    """A y scale for which 255 steps span about six standard deviations of the real output of
    `taps` products of (x - zero) and w, divided by `spread` (saturation tests pass ~20)."""
    centred = x.astype(np.float64) - x_q.zero
    rms = np.sqrt(taps * np.mean(centred ** 2) * np.mean(w.astype(np.float64) ** 2))
    return float(x_q.scale * np.mean(w_scale) * rms * 6 / 255 / spread)


def bias_values(channels: int, x_q: Quant, w_scale: np.ndarray, y_q: Quant, seed: int) -> np.ndarray:
    """int32 biases (scale x_scale * w_scale, zero point 0) worth up to ~30 output steps."""
    steps = np.random.default_rng(seed).uniform(-30, 30, channels)
    return np.rint(steps * y_q.scale / (x_q.scale * np.broadcast_to(w_scale, (channels,)))).astype(np.int32)


def qlinear_conv(x: np.ndarray, x_q: Quant, w: np.ndarray, w_scale: np.ndarray, y_q: Quant,
                 bias: np.ndarray | None = None, **attrs) -> onnx.ModelProto:
    """x -> QLinearConv(w) -> y, with x a graph input of x's shape and type."""
    inits = {**x_q.params("x"), "w": w, "w_scale": w_scale,
             "w_zero": np.zeros(w_scale.shape, w.dtype), **y_q.params("y")}
    names = ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"]
    if bias is not None:
        inits["bias"] = bias
        names.append("bias")
    return make_model([helper.make_node("QLinearConv", names, ["y"], **attrs)], {"x": x}, ["y"], inits, OPSET)


def dequantized_weights(w: np.ndarray, w_scale: np.ndarray, bias: np.ndarray | None, x_q: Quant,
                        axis: int) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray], list[str]]:
    """DequantizeLinear nodes for constant int8 weights (per-axis along `axis` when w_scale is 1-D)
    and an int32 bias of scale x_scale * w_scale, as quantize_static writes them; returns the nodes,
    their initializers and the names of the float weight (and bias)."""
    nodes = [helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["w_f"], axis=axis)]
    inits = {"w": w, "w_scale": w_scale, "w_zero": np.zeros(w_scale.shape, np.int8)}
    if bias is None:
        return nodes, inits, ["w_f"]
    b_scale = (np.float32(x_q.scale) * w_scale).astype(np.float32)
    nodes.append(helper.make_node("DequantizeLinear", ["bias", "bias_scale", "bias_zero"], ["bias_f"], axis=0))
    inits.update(bias=bias, bias_scale=b_scale, bias_zero=np.zeros(b_scale.shape, np.int32))
    return nodes, inits, ["w_f", "bias_f"]


def qdq(op_nodes: list[onnx.NodeProto], x: np.ndarray, x_q: Quant, y_q: Quant, last: str,
        inits: dict[str, np.ndarray], relu: bool = False) -> onnx.ModelProto:
    """x -> DequantizeLinear -> `op_nodes` (reading "x_f", writing `last`) -> [Relu] ->
    QuantizeLinear -> y."""
    tail = last
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["x_f"])] + op_nodes
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["relu"]))
        tail = "relu"
    nodes.append(helper.make_node("QuantizeLinear", [tail, "y_scale", "y_zero"], ["y"]))
    return make_model(nodes, {"x": x}, ["y"], {**inits, **x_q.params("x"), **y_q.params("y")}, OPSET)


def qdq_conv(x: np.ndarray, x_q: Quant, w: np.ndarray, w_scale: np.ndarray, y_q: Quant,
             bias: np.ndarray | None = None, relu: bool = False, **attrs) -> onnx.ModelProto:
    """DequantizeLinear(x) -> Conv(DequantizeLinear(w), DequantizeLinear(bias)) -> [Relu] -> QuantizeLinear."""
    nodes, inits, names = dequantized_weights(w, w_scale, bias, x_q, axis=0)
    conv = helper.make_node("Conv", ["x_f"] + names, ["conv"], **attrs)
    return qdq(nodes + [conv], x, x_q, y_q, "conv", inits, relu)


def run_both(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(hobbit's outputs, onnxruntime's outputs); onnxruntime runs with its default graph
    optimizations, which fuse QDQ groups into its int8 kernels (its real int8 path)."""
    return hobbit.compile(model).run(feeds), run_ort(model, feeds)


def assert_within_one_step(got: np.ndarray, want: np.ndarray, what: str,
                           max_differing: float = MAX_DIFFERING) -> float:
    """|got - want| <= 1 everywhere in integer units and at most `max_differing` of the elements
    differ; returns the fraction that differ."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    worst = np.unravel_index(int(diff.argmax()), diff.shape)
    assert diff.max() <= 1, (f"{what}: off by {diff.max()} steps at {worst} "
                             f"(hobbit {got[worst]}, onnxruntime {want[worst]})")
    fraction = np.count_nonzero(diff) / diff.size
    assert fraction <= max_differing, f"{what}: {fraction:.2%} of elements differ by one step"
    return fraction


def assert_float_within_one_step(got: np.ndarray, want: np.ndarray, scale: float, what: str,
                                 max_differing: float = MAX_DIFFERING) -> float:
    """A DequantizeLinear output: within one step of `scale` (plus float32 rounding of the product)
    everywhere, and at most `max_differing` of the elements a step apart; returns that fraction."""
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape, (what, got.dtype, got.shape)
    rounding = 4 * np.finfo(np.float32).eps * np.abs(want)
    bound = scale * (1 + 1e-6) + rounding
    worst = np.unravel_index(int(np.argmax(np.abs(got - want) - bound)), got.shape)
    assert np.all(np.abs(got - want) <= bound), (f"{what}: {got[worst]} vs onnxruntime {want[worst]} at {worst}, "
                                                 f"more than one step ({scale})")
    fraction = np.mean(np.abs(got - want) > scale / 2 + rounding)
    assert fraction <= max_differing, f"{what}: {fraction:.2%} of elements differ by one step"
    return float(fraction)


def assert_informative(want: np.ndarray, q: Quant, what: str, inside: float = 0.25) -> None:
    """The reference output must not be (almost) all saturated, else a comparison proves little."""
    fraction = np.mean((want > q.low) & (want < q.high))
    assert fraction >= inside, f"{what}: only {fraction:.0%} of onnxruntime's output is inside ({q.low}, {q.high})"
