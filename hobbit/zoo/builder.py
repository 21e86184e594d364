"""NetBuilder: write a CNN layer by layer as ONNX nodes, with deterministic weights.

Each layer method emits the ONNX node(s) torchvision's exporter would (names
like `/layer1/layer1.0/conv1/Conv`, initializers like `layer1.0.conv1.weight`)
and, at the same time, runs the layer in numpy on one fixed random image. That
eager forward is what makes the random weights meaningful: every
BatchNormalization gets running mean/var measured on its actual input, so it
normalises to roughly zero mean / unit variance, and the logits of the finished
model have a useful scale instead of collapsing to 0 or blowing up."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INPUT_SHAPE = (1, 3, 224, 224)


@dataclass
class Tensor:
    """An ONNX value name and its activation on the calibration image."""

    name: str
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


def _pool_out(size: int, k: int, s: int, pad_total: int, ceil_mode: bool) -> int:
    span = size + pad_total - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_total // 2:
        out -= 1  # the last window must start inside the input or the leading pad
    return out


def _conv_np(x: np.ndarray, w: np.ndarray, stride: int, pad: int, group: int) -> np.ndarray:
    """Grouped 2-D convolution of a (1, C, H, W) tensor as batched matmuls."""
    _, c, _, _ = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]  # C, OH, OW, kh, kw
    oh, ow = win.shape[1], win.shape[2]
    cols = win.reshape(group, cg, oh * ow, kh * kw).transpose(0, 2, 1, 3).reshape(group, oh * ow, cg * kh * kw)
    wg = w.reshape(group, oc // group, cg * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wg)  # group, OH*OW, OC/group
    return out.transpose(0, 2, 1).reshape(1, oc, oh, ow).astype(np.float32)


def _maxpool_np(x: np.ndarray, k: int, s: int, pad: int, ceil_mode: bool) -> np.ndarray:
    _, c, h, w = x.shape
    oh, ow = _pool_out(h, k, s, 2 * pad, ceil_mode), _pool_out(w, k, s, 2 * pad, ceil_mode)
    extra_h = max(0, (oh - 1) * s + k - (h + 2 * pad))
    extra_w = max(0, (ow - 1) * s + k - (w + 2 * pad))
    xp = np.pad(x[0], ((0, 0), (pad, pad + extra_h), (pad, pad + extra_w)), constant_values=-np.inf)
    win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::s, ::s][:, :oh, :ow]
    return win.max(axis=(3, 4))[None]


class NetBuilder:
    """Accumulates nodes and initializers; `finish()` returns the ModelProto."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        image = self.rng.standard_normal(INPUT_SHAPE, dtype=np.float32)
        self.input = Tensor("input", image)

    # -- plumbing ------------------------------------------------------------------
    def _param(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def _node(self, op: str, scope: str, inputs: list[str], data: np.ndarray, **attrs) -> Tensor:
        name = f"{scope}/{op}"
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return Tensor(out, data.astype(np.float32, copy=False))

    def _normal(self, shape: tuple[int, ...], std: float) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    # -- layers --------------------------------------------------------------------
    def conv(self, x: Tensor, scope: str, param: str, out_ch: int, k: int, stride: int = 1, pad: int = 0,
             group: int = 1, bias: bool = False, gain: float = 2.0) -> Tensor:
        """Conv with Kaiming-normal weights: std = sqrt(gain / fan_in); gain 2 suits a following ReLU."""
        in_ch = x.shape[1]
        fan_in = in_ch // group * k * k
        w = self._normal((out_ch, in_ch // group, k, k), np.sqrt(gain / fan_in))
        inputs = [x.name, self._param(f"{param}.weight", w)]
        data = _conv_np(x.data, w, stride, pad, group)
        if bias:
            b = self._normal((out_ch,), 0.01)
            inputs.append(self._param(f"{param}.bias", b))
            data = data + b.reshape(1, -1, 1, 1)
        return self._node("Conv", scope, inputs, data, dilations=[1, 1], group=group, kernel_shape=[k, k],
                          pads=[pad] * 4, strides=[stride, stride])

    def batchnorm(self, x: Tensor, scope: str, param: str) -> Tensor:
        """BatchNorm whose running statistics are those of its input on the calibration image."""
        c = x.shape[1]
        mean = x.data.mean(axis=(0, 2, 3), dtype=np.float64).astype(np.float32)
        var = x.data.var(axis=(0, 2, 3), dtype=np.float64).astype(np.float32)
        gamma = self.rng.uniform(0.8, 1.2, c).astype(np.float32)
        beta = self._normal((c,), 0.1)
        inputs = [x.name, self._param(f"{param}.weight", gamma), self._param(f"{param}.bias", beta),
                  self._param(f"{param}.running_mean", mean), self._param(f"{param}.running_var", var)]
        shape = (1, c, 1, 1)
        data = (x.data - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * gamma.reshape(shape) \
            + beta.reshape(shape)
        return self._node("BatchNormalization", scope, inputs, data, epsilon=1e-5, momentum=0.9)

    def relu(self, x: Tensor, scope: str) -> Tensor:
        return self._node("Relu", scope, [x.name], np.maximum(x.data, 0))

    def relu6(self, x: Tensor, scope: str) -> Tensor:
        """ReLU6 as opset-11+ Clip with min/max given as (constant) inputs, as torch exports it."""
        lo = self._const(f"{scope}/Constant", 0.0)
        hi = self._const(f"{scope}/Constant_1", 6.0)
        return self._node("Clip", scope, [x.name, lo, hi], np.clip(x.data, 0, 6))

    def _const(self, scope: str, value: float) -> str:
        out = f"{scope}_output_0"
        tensor = numpy_helper.from_array(np.array(value, dtype=np.float32), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=scope, value=tensor))
        return out

    def add(self, a: Tensor, b: Tensor, scope: str) -> Tensor:
        return self._node("Add", scope, [a.name, b.name], a.data + b.data)

    def maxpool(self, x: Tensor, scope: str, k: int, stride: int, pad: int = 0, ceil_mode: bool = False) -> Tensor:
        return self._node("MaxPool", scope, [x.name], _maxpool_np(x.data, k, stride, pad, ceil_mode),
                          ceil_mode=int(ceil_mode), dilations=[1, 1], kernel_shape=[k, k], pads=[pad] * 4,
                          strides=[stride, stride])

    def global_avgpool(self, x: Tensor, scope: str) -> Tensor:
        return self._node("GlobalAveragePool", scope, [x.name], x.data.mean(axis=(2, 3), keepdims=True))

    def identity_avgpool(self, x: Tensor, scope: str) -> Tensor:
        """AdaptiveAvgPool2d to the input's own size: torch exports AveragePool with a 1x1 window."""
        return self._node("AveragePool", scope, [x.name], x.data, ceil_mode=0, kernel_shape=[1, 1],
                          pads=[0, 0, 0, 0], strides=[1, 1])

    def concat(self, xs: list[Tensor], scope: str) -> Tensor:
        return self._node("Concat", scope, [x.name for x in xs], np.concatenate([x.data for x in xs], axis=1),
                          axis=1)

    def flatten(self, x: Tensor, scope: str) -> Tensor:
        return self._node("Flatten", scope, [x.name], x.data.reshape(x.shape[0], -1), axis=1)

    def gemm(self, x: Tensor, scope: str, param: str, out_features: int, gain: float = 1.0) -> Tensor:
        """Linear layer as Gemm(transB=1) with weight (out, in), std = sqrt(gain / in)."""
        in_features = x.shape[1]
        w = self._normal((out_features, in_features), np.sqrt(gain / in_features))
        b = self._normal((out_features,), 0.01)
        inputs = [x.name, self._param(f"{param}.weight", w), self._param(f"{param}.bias", b)]
        return self._node("Gemm", scope, inputs, x.data @ w.T + b, alpha=1.0, beta=1.0, transB=1)

    # -- result ----------------------------------------------------------------------
    def finish(self, logits: Tensor) -> onnx.ModelProto:
        """Rename the last value to "output" and wrap everything in an opset-17 model."""
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, INPUT_SHAPE)],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, logits.shape)],
            self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="hobbit.zoo")
        model.ir_version = 8
        return model
