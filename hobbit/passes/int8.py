"""The int8 pass: the QDQ patterns of a quantized model become integer kernels.

A QDQ model (onnxruntime's quantize_static, hobbit.quantize, or QLinearConv as the ONNX
frontend expands it) says "this Conv runs on quantized values" by wrapping a float Conv:

    DequantizeLinear(x_q) -> Conv(., DequantizeLinear(w_q), DequantizeLinear(b_q)) [-> Relu] -> QuantizeLinear

Run as written, every such Conv would dequantize its input to float32, convolve in float and
quantize again. This pass replaces the chain by one QConv (hobbit/ops/qlinear.py): int8
weights, int32 accumulation, the requantization in the kernel's epilogue, uint8/int8
activations in and out, so nothing between two quantized kernels is float. In the same
way DequantizeLinear -> Add <- DequantizeLinear [-> Relu] -> QuantizeLinear becomes one
QAdd (fused into the QConv that produces one operand), a Relu or Clip before the
QuantizeLinear becomes the kernel's clamp in the integer domain (quantization is monotone,
so clamping commutes with it), and an order-preserving op between a DequantizeLinear and a
QuantizeLinear of the same scale and zero point (MaxPool, Reshape, Flatten) runs on the
integers themselves. A Concat of DequantizeLinear'd
inputs before a QuantizeLinear joins the bytes, each input of other parameters than the
output's moved to them by a QRequantize (in the epilogue of the QConv that produces it, where
one does), and an average pool between a DequantizeLinear and
a QuantizeLinear becomes QGlobalAveragePool or QAveragePool, computed as onnxruntime's
QLinear kernels do. ConvInteger and MatMulInteger (dynamically quantized models), which
the frontend writes as the float64 product of unit-scale DequantizeLinears cast to int32,
become QConvInteger and QMatMulInteger on the same kernels.

It runs first in the pipeline, before folding would turn the weights' DequantizeLinear
into float constants (the frontend leaves those unfolded for it). A chain it cannot run in
int8 (no integer dot product on the target, per-channel activation parameters, weights that
do not fit int8 once centred) is left as it is: the float path computes the same values."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.graph.rewrite import use_counts
from hobbit.passes.dce import eliminate_dead_code
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.int8 import (DotProduct, depthwise_filters, dot_product, is_depthwise, packed_matrix, padded_k,
                              panel_filters, weight_panel_rows)
from hobbit.target import Target

_SAME_VALUES = ("MaxPool", "Reshape", "Flatten")


def lower_int8(graph: Graph, target: Target) -> Graph:
    dot = dot_product(target)
    uses = use_counts(graph)
    nodes = []
    for node in graph.nodes:
        replacement = None
        if node.op == "QuantizeLinear":
            replacement = _rewrite(node, uses, dot, target)
        elif _is_int32_cast(node) and dot is not None:
            replacement = _integer_product(node, uses, dot, target)
        nodes.append(replacement or node)
    graph.nodes = nodes
    graph.relink()
    graph = eliminate_dead_code(_integer_concats_and_pools(graph))
    return _fuse_requantizes(_fuse_residual_adds(graph))


def _rewrite(q: Node, uses: dict[int, int], dot: DotProduct | None, target: Target) -> Node | None:
    out = _scalar_params(q)
    if out is None:
        return None
    y_scale, y_zero = out
    to = np.dtype(q.attrs["to"])
    lo, hi = int(np.iinfo(to).min), int(np.iinfo(to).max)
    value = q.inputs[0]
    producer = _sole_producer(value, uses)
    if producer is not None and producer.op in ("Relu", "Clip"):
        low, high = (0.0, np.inf) if producer.op == "Relu" else (producer.attrs["min"], producer.attrs["max"])
        lo, hi = max(lo, _quantized(low, y_scale, y_zero, lo, hi)), min(hi, _quantized(high, y_scale, y_zero, lo, hi))
        value = producer.inputs[0]
        producer = _sole_producer(value, uses)
    if producer is None:
        return None
    if producer.op == "Conv" and dot is not None:
        return _qconv(q, producer, dot, target, y_scale, y_zero, lo, hi, to)
    if producer.op == "MatMul" and dot is not None:
        return _qmatmul(q, producer, None, dot, target, y_scale, y_zero, lo, hi, to)
    if producer.op == "Add":
        for slot in (0, 1):
            matmul = _sole_producer(producer.inputs[slot], uses)
            if matmul is not None and matmul.op == "MatMul" and dot is not None:
                return _qmatmul(q, matmul, producer.inputs[1 - slot], dot, target, y_scale, y_zero, lo, hi, to)
        return _qadd(q, producer, y_scale, y_zero, lo, hi, to)
    if producer.op in _SAME_VALUES and lo == int(np.iinfo(to).min):
        return _same_values(q, producer, y_scale, y_zero, to)
    return None


def _quantized(bound: float, scale: float, zero: int, lo: int, hi: int) -> int:
    """QuantizeLinear of a clamp bound: clamping commutes with the monotone quantization."""
    if not np.isfinite(bound):
        return lo if bound < 0 else hi
    return int(np.clip(np.rint(np.float32(bound) / np.float32(scale)) + zero, lo, hi))


def _sole_producer(value: Value, uses: dict[int, int]) -> Node | None:
    """The node computing `value`, when nothing else reads it."""
    if uses.get(id(value)) != 1:
        return None
    return value.producer


def _scalar_params(node: Node) -> tuple[float, int] | None:
    """(scale, zero point) of a (De)QuantizeLinear with one constant scale and zero point."""
    _, scale, zero = node.inputs
    if scale.const is None or zero.const is None or scale.const.size != 1 or zero.const.size != 1:
        return None
    return float(scale.const.reshape(())), int(zero.const.reshape(()))


def _dequantized(value: Value) -> tuple[Value, float, int] | None:
    """(quantized input, scale, zero point) when `value` is a per-tensor DequantizeLinear of
    an 8-bit tensor to float32."""
    dq = value.producer
    if dq is None or dq.op != "DequantizeLinear" or value.dtype != np.float32:
        return None
    params = _scalar_params(dq)
    x = dq.inputs[0]
    if params is None or x.dtype.itemsize != 1:
        return None
    return x, params[0], params[1]


def _dequantized_weights(value: Value) -> tuple[np.ndarray, np.ndarray] | None:
    """(centred integer weights, per-output-channel scale) of constant weights behind a
    DequantizeLinear, per tensor or per output channel."""
    dq = value.producer
    if dq is None or dq.op != "DequantizeLinear" or any(v.const is None for v in dq.inputs):
        return None
    w, scale, zero = (v.const for v in dq.inputs)
    oc = w.shape[0]
    if scale.size not in (1, oc) or zero.size not in (1, oc):
        return None
    if scale.ndim and scale.size == oc and scale.shape[0] != oc:  # per channel, but not along axis 0
        return None
    centred = w.astype(np.int32) - zero.astype(np.int32).reshape(-1, *(1,) * (w.ndim - 1))
    return centred, np.broadcast_to(scale.astype(np.float64).reshape(-1), (oc,))


def _dequantized_matrix(value: Value) -> tuple[np.ndarray, np.ndarray] | None:
    """(centred [K, N] integer weights, per-column scale) of a constant matrix behind a
    DequantizeLinear, or its transpose (Gemm with transB: the weights are [N, K], per row)."""
    node = value.producer
    if node is not None and node.op == "Transpose" and tuple(node.attrs["perm"]) == (1, 0):
        rows = _dequantized_weights(node.inputs[0])
        return None if rows is None or rows[0].ndim != 2 else (rows[0].T, rows[1])
    dq = value.producer
    if dq is None or dq.op != "DequantizeLinear" or any(v.const is None for v in dq.inputs) or len(value.shape) != 2:
        return None
    w, scale, zero = (v.const for v in dq.inputs)
    n = w.shape[1]
    if scale.size not in (1, n) or zero.size not in (1, n):
        return None
    centred = w.astype(np.int32) - zero.astype(np.int32).reshape(1, -1)
    return centred, np.broadcast_to(scale.astype(np.float64).reshape(-1), (n,))


def _bias(value: Value | None, oc: int, scale: np.ndarray) -> np.ndarray | None:
    """The int32 bias in units of x_scale * w_scale: a DequantizeLinear'd int32 constant of
    that scale is taken as it is, a float bias is quantized."""
    if value is None:
        return np.zeros(oc, np.int64)
    dq = value.producer
    if dq is not None and dq.op == "DequantizeLinear" and all(v.const is not None for v in dq.inputs):
        b, b_scale, b_zero = (v.const for v in dq.inputs)
        real = (b.astype(np.float64) - b_zero.astype(np.float64)) * b_scale.astype(np.float64)
    elif value.const is not None:
        real = value.const.astype(np.float64)
    else:
        return None
    return np.rint(real.reshape(-1) / scale).astype(np.int64)


def _qconv(q: Node, conv: Node, dot: DotProduct, target: Target, y_scale: float, y_zero: int, lo: int, hi: int,
           to: np.dtype) -> Node | None:
    x = _dequantized(conv.inputs[0])
    w = _dequantized_weights(conv.inputs[1])
    if x is None or w is None or conv.epilogue or conv.attrs.get("weight_layout", "OIHW") != "OIHW":
        return None
    x_q, x_scale, x_zero = x
    centred, w_scale = w
    if centred.ndim != 4 or centred.min() < -128 or centred.max() > 127:
        return None
    oc = centred.shape[0]
    bias = _bias(conv.inputs[2] if len(conv.inputs) > 2 else None, oc, x_scale * w_scale)
    if bias is None:
        return None
    flip = 128 if x_q.dtype == np.int8 else 0  # the kernels read int8 activations as x + 128
    stored, sums, panel = _stored_filters(centred, dot, conv, target)
    offset = bias - (x_zero + flip) * sums
    if np.abs(offset).max(initial=0) >= 2 ** 31:
        return None
    multiplier = (x_scale * w_scale / y_scale).astype(np.float32)
    attrs = {k: conv.attrs[k] for k in ("strides", "dilations", "pads", "group")}
    attrs.update(weight_shape=tuple(centred.shape), x_zero=x_zero, y_zero=y_zero, lo=lo, hi=hi, to=to.name)
    if panel:
        attrs["weight_panel"] = panel
    inputs = [x_q, Value(f"{conv.name}/int8_W", const=stored),
              Value(f"{conv.name}/int8_offset", const=offset.astype(np.int32)),
              Value(f"{conv.name}/int8_multiplier", const=multiplier)]
    return Node("QConv", conv.name, inputs, q.outputs, attrs)


def _stored_filters(centred: np.ndarray, dot: DotProduct, conv: Node, target: Target
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """[OC, C/group, KH, KW] centred filters -> (the weights QConv reads, their sums per output
    channel, the rows per panel): for a depthwise conv its kernel rows padded
    (hobbit.plan.int8.depthwise_filters); [OC, Kp] rows for a conv of run-time output size;
    else panels of the GEMM's MR rows (hobbit.plan.int8.panel_filters)."""
    rows = centred.reshape(centred.shape[0], -1)
    sums = rows.sum(axis=1, dtype=np.int64)
    group = conv.attrs["group"]
    if is_depthwise(centred.shape[1], group):
        return depthwise_filters(centred, dot), sums, 0
    stored = np.zeros((rows.shape[0], padded_k(rows.shape[1], dot.group)), dot.weights)
    stored[:, :rows.shape[1]] = rows
    y = conv.outputs[0].shape
    if len(y) != 4 or not all(isinstance(d, int) for d in y[2:]):
        return stored, sums, 0
    panel = weight_panel_rows(centred.shape, group, y[2] * y[3], target)
    if panel:
        stored = panel_filters(stored, group, panel, dot)
    return stored, sums, panel


def _qmatmul(q: Node, matmul: Node, bias_value: Value | None, dot: DotProduct, target: Target,
             y_scale: float, y_zero: int, lo: int, hi: int, to: np.dtype) -> Node | None:
    x = _dequantized(matmul.inputs[0])
    w = _dequantized_matrix(matmul.inputs[1])
    if x is None or w is None or matmul.epilogue:
        return None
    x_q, x_scale, x_zero = x
    centred, w_scale = w
    k, n = centred.shape
    if centred.min() < -128 or centred.max() > 127 or len(x_q.shape) < 2:
        return None
    if bias_value is not None and tuple(bias_value.shape) not in ((n,), (1, n)):
        return None
    bias = _bias(bias_value, n, x_scale * w_scale)
    if bias is None:
        return None
    flip = 128 if x_q.dtype == np.int8 else 0
    offset = bias - (x_zero + flip) * centred.sum(axis=0, dtype=np.int64)
    if np.abs(offset).max(initial=0) >= 2 ** 31:
        return None
    attrs = dict(k=k, n=n, x_zero=x_zero, y_zero=y_zero, lo=lo, hi=hi, to=to.name)
    inputs = [x_q, Value(f"{matmul.name}/int8_W", const=_panels(centred, x_q, dot, target)),
              Value(f"{matmul.name}/int8_offset", const=offset.astype(np.int32)),
              Value(f"{matmul.name}/int8_multiplier", const=(x_scale * w_scale / y_scale).astype(np.float32))]
    return Node("QMatMul", matmul.name, inputs, q.outputs, attrs)


def _panels(centred: np.ndarray, x: Value, dot: DotProduct, target: Target) -> np.ndarray:
    """[K, N] centred weights in the NR-column panels QMatMul reads (its schedule's NR)."""
    k, n = centred.shape
    return packed_matrix(centred, gemm_schedule(int(np.prod(x.shape[:-1])), n, k, target, 4).nr, dot)


def _qadd(q: Node, add: Node, y_scale: float, y_zero: int, lo: int, hi: int, to: np.dtype) -> Node | None:
    a, b = (_dequantized(v) for v in add.inputs)
    if a is None or b is None or a[0].dtype != b[0].dtype:  # one integer dtype for the scalar expression
        return None
    attrs = dict(a_scale=a[1], a_zero=a[2], b_scale=b[1], b_zero=b[2], y_scale=y_scale, y_zero=y_zero,
                 lo=lo, hi=hi, to=to.name)
    return Node("QAdd", add.name, [a[0], b[0]], q.outputs, attrs)


def _same_values(q: Node, op: Node, y_scale: float, y_zero: int, to: np.dtype) -> Node | None:
    """An order-preserving op between a DequantizeLinear and a QuantizeLinear with the same
    parameters computes on the integers what it computed on their float values."""
    x = _dequantized(op.inputs[0])
    if x is None or x[0].dtype != to or (x[1], x[2]) != (np.float32(y_scale), y_zero):
        return None
    return Node(op.op, op.name, [x[0], *op.inputs[1:]], q.outputs, dict(op.attrs))


def _is_int32_cast(node: Node) -> bool:
    return node.op == "Cast" and np.dtype(node.attrs["to"]) == np.int32


def _integer_product(cast: Node, uses: dict[int, int], dot: DotProduct, target: Target) -> Node | None:
    """ConvInteger / MatMulInteger as the frontend writes them, Cast(int32) of a float64
    ConvND (the Conv op is float32 only) / MatMul of unit-scale DequantizeLinears (x's zero point may be computed at run
    time, the weights are constant), -> QConvInteger / QMatMulInteger."""
    product = _sole_producer(cast.inputs[0], uses)
    if product is None or product.op not in ("ConvND", "MatMul") or product.epilogue \
            or product.outputs[0].dtype != np.float64 or len(product.inputs) != 2:
        return None
    x = _unit_dequantized(product.inputs[0])
    if x is None:
        return None
    x_q, zero = x
    if product.op == "ConvND":
        return _qconv_integer(cast, product, x_q, zero, dot, target)
    return _qmatmul_integer(cast, product, x_q, zero, dot, target)


def _unit_dequantized(value: Value) -> tuple[Value, Value] | None:
    """(8-bit input, its per-tensor zero point) of a DequantizeLinear of scale 1."""
    dq = value.producer
    if dq is None or dq.op != "DequantizeLinear":
        return None
    x, scale, zero = dq.inputs
    if scale.const is None or scale.const.size != 1 or float(scale.const.reshape(())) != 1.0 \
            or x.dtype.itemsize != 1 or zero.type.size != 1:
        return None
    return x, zero


def _unit_scale(scale: np.ndarray) -> bool:
    return bool(np.all(scale == 1.0))


def _qconv_integer(cast: Node, conv: Node, x_q: Value, zero: Value, dot: DotProduct, target: Target) -> Node | None:
    w = _dequantized_weights(conv.inputs[1])
    if w is None or not _unit_scale(w[1]) or len(x_q.shape) != 4 or conv.attrs["transposed"]:
        return None
    centred = w[0]
    if centred.ndim != 4 or centred.min() < -128 or centred.max() > 127:
        return None
    stored, sums, panel = _stored_filters(centred, dot, conv, target)
    attrs = {k: conv.attrs[k] for k in ("strides", "dilations", "pads", "group")}
    attrs["weight_shape"] = tuple(centred.shape)
    if panel:
        attrs["weight_panel"] = panel
    inputs = [x_q, Value(f"{conv.name}/int8_W", const=stored),
              Value(f"{conv.name}/int8_sums", const=sums.astype(np.int32)), zero]
    return Node("QConvInteger", conv.name, inputs, cast.outputs, attrs)


def _qmatmul_integer(cast: Node, matmul: Node, x_q: Value, zero: Value, dot: DotProduct,
                     target: Target) -> Node | None:
    w = _dequantized_matrix(matmul.inputs[1])
    if w is None or not _unit_scale(w[1]) or len(x_q.shape) < 2:
        return None
    centred = w[0]
    if centred.min() < -128 or centred.max() > 127:
        return None
    k, n = centred.shape
    inputs = [x_q, Value(f"{matmul.name}/int8_W", const=_panels(centred, x_q, dot, target)),
              Value(f"{matmul.name}/int8_sums", const=centred.sum(axis=0, dtype=np.int64).astype(np.int32)), zero]
    return Node("QMatMulInteger", matmul.name, inputs, cast.outputs, dict(k=k, n=n))


def _fuse_residual_adds(graph: Graph) -> Graph:
    """QAdd(QConv(...), r) -> QConv(..., residual=r): the conv's epilogue adds r."""
    uses = use_counts(graph)
    kept: list[Node] = []
    for node in graph.nodes:
        conv = _residual_conv(node, uses) if node.op == "QAdd" else None
        if conv is None:
            kept.append(node)
            continue
        slot = 0 if node.inputs[0].producer is conv else 1
        a = node.attrs
        own, other = ("a", "b") if slot == 0 else ("b", "a")
        sums = {"a_scale": a[f"{own}_scale"], "a_zero": a[f"{own}_zero"], "b_scale": a[f"{other}_scale"],
                "b_zero": a[f"{other}_zero"], "y_scale": a["y_scale"], "y_zero": a["y_zero"], "lo": a["lo"],
                "hi": a["hi"], "to": a["to"]}
        conv.inputs = conv.inputs + [node.inputs[1 - slot]]
        conv.attrs = {**conv.attrs, **{f"sum_{k}": v for k, v in sums.items()}}
        conv.outputs = node.outputs
        kept.remove(conv)
        kept.append(conv)  # where the QAdd was: the residual is ready there
    graph.nodes = kept
    graph.relink()
    return graph


def _fuse_requantizes(graph: Graph) -> Graph:
    """QRequantize(QConv(...)) -> QConv(..., then=the QRequantize's attributes): the conv's
    epilogue moves its bytes to the other parameters before it stores them, with the
    QRequantize's own arithmetic, so the bytes are the same. SqueezeNet's fire modules: each
    expand conv of other parameters than the Concat's wrote its bytes and a separate kernel
    (0.079 of 2.11 ms at one thread) read them back. Fused, those convs and requantizes went
    0.66 -> 0.645 ms at two threads and did not change at one: the epilogue's arithmetic,
    not the memory pass, is the cost."""
    uses = use_counts(graph)
    outputs = {id(v) for v in graph.outputs}
    kept: list[Node] = []
    for node in graph.nodes:
        conv = _sole_producer(node.inputs[0], uses) if node.op == "QRequantize" else None
        if conv is None or conv.op != "QConv" or conv.attrs.get("then") or id(node.inputs[0]) in outputs:
            kept.append(node)
            continue
        conv.attrs = {**conv.attrs, "then": dict(node.attrs)}
        conv.outputs = node.outputs
    graph.nodes = kept
    graph.relink()
    return graph


def _residual_conv(add: Node, uses: dict[int, int]) -> Node | None:
    """The QConv whose output only this QAdd reads, when the other operand has its shape."""
    for slot in (0, 1):
        conv = _sole_producer(add.inputs[slot], uses)
        other = add.inputs[1 - slot]
        if conv is not None and conv.op == "QConv" and len(conv.inputs) == 4 \
                and tuple(other.shape) == tuple(add.outputs[0].shape) and other.producer is not conv:
            return conv
    return None


def _integer_concats_and_pools(graph: Graph) -> Graph:
    """DequantizeLinear -> Concat / an average pool / nothing -> QuantizeLinear on the integers:
    each such QuantizeLinear is replaced by the nodes `_integer_concat` or `_integer_pool`
    return. A bare DequantizeLinear -> QuantizeLinear pair (VGG-16's head, where the frontend
    dropped the 1x1 AveragePool between them) becomes one QRequantize."""
    uses = use_counts(graph)
    nodes: list[Node] = []
    for node in graph.nodes:
        replacement = None
        if node.op == "QuantizeLinear" and _scalar_params(node) is not None:
            producer = _sole_producer(node.inputs[0], uses)
            if producer is not None and producer.op == "Concat":
                replacement = _integer_concat(node, producer)
            elif producer is not None and producer.op in ("ReduceMean", "AveragePool"):
                replacement = _integer_pool(node, producer)
            elif producer is not None and producer.op == "DequantizeLinear":
                replacement = _integer_requantize(node, producer)
        nodes.extend(replacement or [node])
    graph.nodes = nodes
    graph.relink()
    return graph


def _integer_concat(q: Node, concat: Node) -> list[Node] | None:
    """Concat(DequantizeLinear(x_i)) -> QuantizeLinear becomes Concat(x_i'): x_i itself where its
    scale and zero point are the output's (a byte copy, or nothing once the Concat is in place),
    else a QRequantize of x_i, which computes what the DequantizeLinear -> QuantizeLinear pair did
    (onnxruntime's QLinearConcat looks up a table built by the same float32 operations)."""
    y_scale, y_zero = _scalar_params(q)
    to = np.dtype(q.attrs["to"])
    parts = [_dequantized(v) for v in concat.inputs]
    if any(p is None or p[0].dtype != to for p in parts):
        return None
    steps, inputs = [], []
    for i, (x, x_scale, x_zero) in enumerate(parts):
        if (np.float32(x_scale), x_zero) == (np.float32(y_scale), y_zero):
            inputs.append(x)
            continue
        out = Value(f"{concat.name}/requantized{i}", TensorType(to, tuple(x.shape)))
        steps.append(_qrequantize(f"{concat.name}/requantize{i}", x, x_scale, x_zero, q, out))
        inputs.append(out)
    return steps + [Node("Concat", concat.name, inputs, q.outputs, dict(concat.attrs))]


def _integer_requantize(q: Node, dq: Node) -> list[Node] | None:
    x = _dequantized(dq.outputs[0])
    if x is None or x[0].dtype != np.dtype(q.attrs["to"]):
        return None
    return [_qrequantize(q.name, x[0], x[1], x[2], q, q.outputs[0])]


def _qrequantize(name: str, x: Value, x_scale: float, x_zero: int, q: Node, out: Value) -> Node:
    """x (of x_scale, x_zero) in the parameters of QuantizeLinear q, written to `out`."""
    y_scale, y_zero = _scalar_params(q)
    to = np.dtype(q.attrs["to"])
    attrs = dict(x_scale=x_scale, x_zero=x_zero, y_scale=y_scale, y_zero=y_zero,
                 lo=int(np.iinfo(to).min), hi=int(np.iinfo(to).max), to=to.name,
                 multiplier=_exact_multiplier(x.dtype, x_scale, x_zero, y_scale))
    return Node("QRequantize", name, [x], [out], attrs)


def _exact_multiplier(dtype: np.dtype, x_scale: float, x_zero: int, y_scale: float) -> float:
    """float32(x_scale / y_scale) where rounding (x - x_zero) times it gives, for every value x
    of `dtype`, what rounding (x - x_zero) * x_scale / y_scale in float32 does (QRequantize's
    arithmetic, hobbit/emit/scalar_ops.py), else 0. Checked on all 256 inputs: it holds for
    all eight of SqueezeNet's requantized Concat inputs."""
    info = np.iinfo(dtype)
    centred = (np.arange(info.min, info.max + 1) - x_zero).astype(np.float32)
    x_scale, y_scale = np.float32(x_scale), np.float32(y_scale)
    multiplier = x_scale / y_scale
    same = np.array_equal(np.rint(centred * multiplier), np.rint(centred * x_scale / y_scale))
    return float(multiplier) if same else 0.0


def _integer_pool(q: Node, pool: Node) -> list[Node] | None:
    """DequantizeLinear -> a mean over whole planes (GlobalAveragePool, which the frontend makes
    a ReduceMean over the spatial axes, or an AveragePool whose window is the unpadded plane)
    -> QuantizeLinear becomes a QGlobalAveragePool with onnxruntime's arithmetic: its
    QLinearGlobalAveragePool (what its QDQ transformer fuses the chain into, and what its
    QLinearAveragePool falls back to for such windows) sums in int32 and requantizes with
    x_scale / (y_scale * HW) in float32. Any other undilated AveragePool becomes a QAveragePool,
    which follows QLinearAveragePool's float32 window sums (hobbit/ops/qlinear.py)."""
    x = _dequantized(pool.inputs[0])
    to = np.dtype(q.attrs["to"])
    if x is None or x[0].dtype != to or len(x[0].shape) != 4:
        return None
    x_q, x_scale, x_zero = x
    y_scale, y_zero = _scalar_params(q)
    limits = dict(y_zero=y_zero, lo=int(np.iinfo(to).min), hi=int(np.iinfo(to).max), to=to.name)
    if _whole_planes(pool):
        area = int(np.prod(x_q.shape[2:]))
        multiplier = np.float32(x_scale) / (np.float32(y_scale) * np.float32(area))
        attrs = dict(x_zero=x_zero, multiplier=float(multiplier), **limits)
        return [Node("QGlobalAveragePool", pool.name, [x_q], q.outputs, attrs)]
    if pool.op != "AveragePool" or tuple(pool.attrs["dilations"]) != (1, 1):
        return None
    attrs = {k: pool.attrs[k] for k in ("kernel_shape", "strides", "pads", "ceil_mode", "count_include_pad")}
    attrs.update(x_scale=x_scale, x_zero=x_zero, y_scale=y_scale, **limits)
    return [Node("QAveragePool", pool.name, [x_q], q.outputs, attrs)]


def _whole_planes(pool: Node) -> bool:
    """Whether `pool` averages each [N, C] plane of its 4-D input into one value, keeping the dims."""
    shape = tuple(pool.inputs[0].shape)
    if len(shape) != 4:
        return False
    a = pool.attrs
    if pool.op == "ReduceMean":
        return tuple(a["axes"]) == (2, 3) and bool(a["keepdims"])
    return tuple(a["kernel_shape"]) == shape[2:] and not any(a["pads"]) and tuple(a["dilations"]) == (1, 1)
