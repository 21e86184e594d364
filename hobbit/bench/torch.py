"""An ONNX model run by PyTorch eager, op by op: the GPU benchmark's baseline.

The GPU bench compares hobbit with PyTorch eager (cuDNN) on the same architecture with the
same weights. torchvision's models would carry other weights, and an ONNX-to-torch
converter is one more dependency, so this interprets the ONNX graph directly with
torch.nn.functional: each node one eager call, as a torchvision module's forward makes
(BatchNormalization too: eager PyTorch in eval mode does not fold it into the Conv).
It covers what the zoo's CNNs use plus the common element-wise ops; anything else is an
UnsupportedModelError naming the node."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hobbit.errors import MissingDependencyError, UnsupportedItem, UnsupportedModelError, import_optional


def import_torch() -> Any:
    return import_optional("torch", lambda exc: MissingDependencyError(
        f"the GPU benchmark's baseline is PyTorch, which is not installed: pip install torch ({exc})"))


def _pads(node: onnx.NodeProto, attrs: dict, spatial: int) -> list[int]:
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise UnsupportedModelError([UnsupportedItem(node.op_type, "", 0, node.name,
                                                     "auto_pad SAME_* is not interpreted by the torch baseline")])
    return list(attrs.get("pads", [0] * (2 * spatial)))


def _padded(torch: Any, x: Any, pads: list[int], value: float) -> tuple[Any, list[int]]:
    """Symmetric pads go to the torch op; others are applied here first (torch takes one pad per side pair)."""
    half = len(pads) // 2
    begin, end = pads[:half], pads[half:]
    if begin == end:
        return x, begin
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return torch.nn.functional.pad(x, flat, value=value), [0] * half


class TorchGraph:
    """`TorchGraph(model, device)(x, ...)`: the model's outputs as torch tensors, in graph-output order."""

    def __init__(self, model: onnx.ModelProto, device: str = "cpu"):
        torch = self.torch = import_torch()
        self.device = device
        host = {t.name: np.array(numpy_helper.to_array(t)) for t in model.graph.initializer}
        self.constants = {name: torch.from_numpy(array).to(device) for name, array in host.items()}
        initialized = set(self.constants)
        self.input_names = [v.name for v in model.graph.input if v.name not in initialized]
        self.output_names = [v.name for v in model.graph.output]
        self.nodes = []
        missing = []
        for node in model.graph.node:
            if node.op_type not in _OPS:
                missing.append(UnsupportedItem(node.op_type, node.domain, 0, node.name,
                                               "not interpreted by the torch baseline (hobbit.bench.torch)"))
                continue
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "Constant":
                host[node.output[0]] = np.array(numpy_helper.to_array(attrs["value"]))
                self.constants[node.output[0]] = torch.from_numpy(host[node.output[0]]).to(device)
                continue
            fixed = {}
            for i in _HOST_INPUTS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i]:
                    if node.input[i] not in host:
                        missing.append(UnsupportedItem(node.op_type, node.domain, 0, node.name,
                                                       f"input {i} must be a constant for the torch baseline"))
                    fixed[i] = host.get(node.input[i])
            self.nodes.append((node, _OPS[node.op_type], attrs, fixed))
        if missing:
            raise UnsupportedModelError(missing)

    def __call__(self, *inputs: Any) -> list[Any]:
        values = dict(self.constants)
        values.update(zip(self.input_names, inputs))
        torch = self.torch
        for node, op, attrs, fixed in self.nodes:
            args = [fixed[i] if i in fixed else values[name] if name else None for i, name in enumerate(node.input)]
            values[node.output[0]] = op(torch, node, attrs, *args)
        return [values[name] for name in self.output_names]


def _conv(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any, w: Any, b: Any = None) -> Any:
    spatial = w.dim() - 2
    x, padding = _padded(torch, x, _pads(node, attrs, spatial), 0.0)
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[spatial]
    return conv(x, w, b, stride=attrs.get("strides", [1] * spatial), padding=padding,
                dilation=attrs.get("dilations", [1] * spatial), groups=attrs.get("group", 1))


def _max_pool(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any) -> Any:
    kernel = attrs["kernel_shape"]
    x, padding = _padded(torch, x, _pads(node, attrs, len(kernel)), float("-inf"))
    return torch.nn.functional.max_pool2d(x, kernel, attrs.get("strides", [1] * len(kernel)), padding,
                                          attrs.get("dilations", [1] * len(kernel)), bool(attrs.get("ceil_mode", 0)))


def _average_pool(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any) -> Any:
    kernel = attrs["kernel_shape"]
    pads = _pads(node, attrs, len(kernel))
    include = bool(attrs.get("count_include_pad", 0))
    if pads[:len(kernel)] != pads[len(kernel):] and not include:
        raise UnsupportedModelError([UnsupportedItem(node.op_type, "", 0, node.name, "asymmetric pads that are "
                                                     "not counted are not interpreted by the torch baseline")])
    x, padding = _padded(torch, x, pads, 0.0)
    return torch.nn.functional.avg_pool2d(x, kernel, attrs.get("strides", [1] * len(kernel)), padding,
                                          bool(attrs.get("ceil_mode", 0)), include)


def _clip(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any, low: Any = None, high: Any = None) -> Any:
    low = attrs.get("min") if low is None else float(low)
    high = attrs.get("max") if high is None else float(high)
    return torch.clamp(x, low, high)


def _gemm(torch: Any, node: onnx.NodeProto, attrs: dict, a: Any, b: Any, c: Any = None) -> Any:
    a = a.t() if attrs.get("transA", 0) else a
    b = b.t() if attrs.get("transB", 0) else b
    y = torch.matmul(a, b) * attrs.get("alpha", 1.0)
    return y if c is None else y + c * attrs.get("beta", 1.0)


def _reshape(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any, shape: Any) -> Any:
    dims = [int(d) for d in shape.tolist()]
    dims = [x.shape[i] if d == 0 and not attrs.get("allowzero", 0) else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _flatten(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any) -> Any:
    axis = attrs.get("axis", 1) % max(x.dim(), 1)
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


def _reduce_mean(torch: Any, node: onnx.NodeProto, attrs: dict, x: Any, axes: Any = None) -> Any:
    axes = attrs.get("axes") if axes is None else [int(a) for a in axes.tolist()]
    return x.mean(dim=list(axes) if axes else list(range(x.dim())), keepdim=bool(attrs.get("keepdims", 1)))


def _binary(name: str) -> Callable:
    return lambda torch, node, attrs, a, b: getattr(torch, name)(a, b)


def _unary(name: str) -> Callable:
    return lambda torch, node, attrs, x: getattr(torch, name)(x)


# Inputs that are shapes, axes or bounds: read on the host once (numpy), not from device
# tensors at every call, which would synchronise the GPU each time.
_HOST_INPUTS = {"Clip": (1, 2), "Reshape": (1,), "ReduceMean": (1,)}

_OPS: dict[str, Callable | None] = {
    "Conv": _conv,
    "BatchNormalization": lambda torch, node, attrs, x, scale, bias, mean, var: torch.nn.functional.batch_norm(
        x, mean, var, scale, bias, training=False, eps=attrs.get("epsilon", 1e-5)),
    "Relu": _unary("relu"), "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"), "Exp": _unary("exp"),
    "Abs": _unary("abs"), "Neg": _unary("neg"), "Sqrt": _unary("sqrt"), "Erf": _unary("erf"),
    "Add": _binary("add"), "Sub": _binary("sub"), "Mul": _binary("mul"), "Div": _binary("div"),
    "Clip": _clip,
    "MaxPool": _max_pool,
    "AveragePool": _average_pool,
    "GlobalAveragePool": lambda torch, node, attrs, x: x.mean(dim=list(range(2, x.dim())), keepdim=True),
    "ReduceMean": _reduce_mean,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Gemm": _gemm,
    "MatMul": lambda torch, node, attrs, a, b: torch.matmul(a, b),
    "Concat": lambda torch, node, attrs, *xs: torch.cat(xs, dim=attrs["axis"]),
    "Softmax": lambda torch, node, attrs, x: torch.softmax(x, dim=attrs.get("axis", -1)),
    "Dropout": lambda torch, node, attrs, x, *_: x,
    "Identity": lambda torch, node, attrs, x: x,
    "Constant": None,  # folded into the constants when the graph is read
}
