"""Compute-heavy ops: Conv, MatMul, BatchNormalization."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample
from hobbit.graph.shapes import Window, broadcast, conv_out_size
from hobbit.plan.gemm import unpack_panels
from hobbit.plan.winograd import VARIANTS, unpack_weights


def weight_shape(node: Node) -> tuple[int, ...]:
    """The [OC, C/group, KH, KW] shape of a conv's filters, whatever layout they are stored in."""
    return tuple(node.attrs.get("weight_shape") or node.inputs[1].shape)


def conv_infer(node: Node) -> list[TensorType]:
    x, w = node.inputs[0], node.inputs[1]
    a = node.attrs
    if len(x.shape) != 4 or len(weight_shape(node)) != 4:
        raise ShapeError(f"Conv expects 4-D input and weight, got {x.type} and {w.type}")
    n, c, h, wd = x.shape
    oc, cg, kh, kw = weight_shape(node)
    if c != cg * a["group"] or oc % a["group"]:
        raise ShapeError(f"Conv channels {c} do not match weight {w.shape} with group {a['group']}")
    pt, pl, pb, pr = a["pads"]
    oh = conv_out_size(h, kh, a["strides"][0], a["dilations"][0], pt + pb)
    ow = conv_out_size(wd, kw, a["strides"][1], a["dilations"][1], pl + pr)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"Conv output would be empty ({oh}x{ow}) for input {x.type}")
    return [TensorType(x.dtype, (n, oc, oh, ow))]


def conv_windows(node: Node) -> dict[int, Window]:
    """H and W slide the filter; none where a fused pool (attrs "pool") shrinks the output again."""
    if node.attrs.get("pool", 1) != 1:
        return {}
    a, (_, _, kh, kw) = node.attrs, weight_shape(node)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilations"], a["pads"]
    return {2: Window(kh, sh, dh, pt, pb), 3: Window(kw, sw, dw, pl, pr)}


def conv_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    if a.get("weight_layout") == "KO":
        w = unpack_panels(w, a["weight_shape"][0]).T.reshape(a["weight_shape"])
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), g = a["strides"], a["dilations"], a["pads"], a["group"]
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = conv_out_size(h, kh, sh, dh, pt + pb)
    ow = conv_out_size(wd, kw, sw, dw, pl + pr)
    out = np.zeros((n, oc, oh, ow), dtype=np.float64)
    ocg = oc // g
    for gi in range(g):
        xg = xp[:, gi * cg:(gi + 1) * cg]
        wg = w[gi * ocg:(gi + 1) * ocg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, gi * ocg:(gi + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return [out.astype(x.dtype)]


def _conv_view(node: Node) -> tuple[int, ...]:
    """Conv kernels hand their epilogue [N, C, H*W] (H and W are walked as one)."""
    n, c, h, w = node.outputs[0].shape
    return (n, c, h * w)


def conv_flops(node: Node) -> int:
    pool = node.attrs.get("pool", 1)  # outputs of a fused pool each stand for pool*pool conv outputs
    return 2 * node.outputs[0].type.size * pool * pool * int(np.prod(weight_shape(node)[1:]))


def matmul_flops(node: Node) -> int:
    return 2 * node.outputs[0].type.size * node.inputs[0].shape[-1]


register_op(OpDef(
    "Conv", infer=conv_infer, reference=conv_reference, flops=conv_flops,
    epilogue_view=_conv_view, per_sample=per_sample.first_input, windows=conv_windows,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1,
           "weight_layout": "OIHW", "weight_shape": ()},
    doc="2-D convolution, NCHW, explicit pads (top, left, bottom, right); inputs X, W[, B]. "
        "weight_layout 'KO' stores W as [C*KH*KW, OC] (set by the layout pass), weight_shape the original"))


def matmul_b_shape(node: Node) -> tuple[int, ...]:
    """The logical [..., K, N] shape of B, also when it is stored as packed panels."""
    b = node.inputs[1]
    if node.attrs.get("b_layout") == "panels":
        return (b.shape[1], node.attrs["n"])
    return tuple(b.shape)


def matmul_infer(node: Node) -> list[TensorType]:
    a = node.inputs[0]
    b_shape = matmul_b_shape(node)
    if len(a.shape) < 2 or len(b_shape) < 2 or a.shape[-1] != b_shape[-2]:
        raise ShapeError(f"MatMul shapes {a.type} and {node.inputs[1].type} do not multiply")
    batch = broadcast(tuple(a.shape[:-2]), tuple(b_shape[:-2]))
    return [TensorType(a.dtype, batch + (a.shape[-2], b_shape[-1]))]


def matmul_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    b = unpack_panels(ins[1], a["n"]) if a.get("b_layout") == "panels" else ins[1]
    return [np.matmul(ins[0], b).astype(ins[0].dtype)]


register_op(OpDef(
    "MatMul", infer=matmul_infer, reference=matmul_reference,
    epilogue_view=lambda n: tuple(n.outputs[0].shape), flops=matmul_flops,
    attrs={"b_layout": "KN", "n": 0}, per_sample=per_sample.matmul_per_sample,
    doc="numpy matmul of rank >= 2 operands with broadcast batch dims; b_layout 'panels' (set by the "
        "layout pass for constant 2-D B) stores B as [ceil(N/NR), K, NR] zero-padded panels"))


def batchnorm_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, scale, bias, mean, var = ins
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale / np.sqrt(var + a["epsilon"])
    return [((x - mean.reshape(shape)) * inv.reshape(shape) + bias.reshape(shape)).astype(x.dtype)]


register_op(OpDef(
    "BatchNormalization", infer=lambda n: [n.inputs[0].type], reference=batchnorm_reference,
    kernel=None, attrs={"epsilon": 1e-5}, per_sample=per_sample.first_input,
    doc="inference BatchNorm; folded into its producer or rewritten to Mul+Add by the batchnorm pass"))


def winograd_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    """F(m x m, 3x3) in numpy from the transformed, packed weights (backend/cpu/winograd.py)."""
    var = VARIANTS[a["tile"]]
    m, al = var.m, var.alpha
    x, u = ins[0].astype(np.float64), unpack_weights(ins[1], a["weight_shape"][0]).astype(np.float64)
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    pt, pl, pb, pr = a["pads"]
    n, c, h, w = x.shape
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, c, m * th + 2, m * tw + 2))
    rows, cols = min(h, xp.shape[2] - pt), min(w, xp.shape[3] - pl)
    xp[:, :, pt:pt + rows, pl:pl + cols] = x[:, :, :rows, :cols]
    patches = np.stack([np.stack([xp[:, :, m * i:m * i + al, m * j:m * j + al] for j in range(tw)], 2)
                        for i in range(th)], 2)  # n, c, th, tw, a, a
    v = np.einsum("ri,nctuij,sj->rsnctu", var.BT, patches, var.BT).reshape(al * al, n, c, th, tw)
    prod = np.einsum("xoc,xnctu->xnotu", u, v).reshape(al, al, n, -1, th, tw)
    y = np.einsum("ri,ijnotu,sj->notrus", var.AT, prod, var.AT).reshape(n, -1, m * th, m * tw)[:, :, :oh, :ow]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    if a.get("pool", 1) > 1:  # a fused 2x2 stride-2 max pool (passes/pool.py)
        y = y.reshape(n, y.shape[1], oh // 2, 2, ow // 2, 2).max(axis=(3, 5))
    return [y.astype(ins[0].dtype)]


def _combine_flops(coefs: np.ndarray) -> int:
    """Arithmetic of one sum(coef * value) as backend/cpu/winograd.py's _combine emits it: zero
    coefficients skipped, no multiply for ±1, a negation when the first term is negative."""
    nonzero = [c for c in coefs if c != 0]
    if not nonzero:
        return 0
    return int(len(nonzero) - 1 + sum(abs(c) != 1 for c in nonzero) + (nonzero[0] < 0))  # a Python int: JSON


def winograd_executed_flops(node: Node) -> int:
    """What a ConvWinograd kernel computes, unlike conv_flops's direct-conv count: the (m+2)^2
    tile GEMMs (2 per multiply-add), the input transform B^T d B per tile and input channel,
    the output transform A^T M A and the bias per tile and output channel (each counted as
    backend/cpu/winograd.py emits it), and a fused pool's three maxima per pooled output."""
    var = VARIANTS[node.attrs["tile"]]
    a, m = var.alpha, var.m
    n, c, h, w = node.inputs[0].shape
    oc = node.attrs["weight_shape"][0]
    pt, pl, pb, pr = node.attrs["pads"]
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    tiles = n * -(-oh // m) * -(-ow // m)
    input_transform = 2 * a * sum(_combine_flops(row) for row in var.BT)
    output_transform = (a + m) * sum(_combine_flops(row) for row in var.AT) + m * m
    pooled = 3 * node.outputs[0].type.size if node.attrs.get("pool", 1) > 1 else 0
    return 2 * a * a * oc * c * tiles + tiles * (c * input_transform + oc * output_transform) + pooled


def winograd_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    n, _, h, w = x.shape
    pt, pl, pb, pr = node.attrs["pads"]
    pool = node.attrs.get("pool", 1)
    return [TensorType(x.dtype, (n, node.attrs["weight_shape"][0], (h + pt + pb - 2) // pool,
                                 (w + pl + pr - 2) // pool))]


register_op(OpDef(
    "ConvWinograd", infer=winograd_infer, reference=winograd_reference,
    flops=conv_flops, executed_flops=winograd_executed_flops,
    epilogue_view=_conv_view,
    attrs={"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "weight_shape": (),
           "tile": 2, "pool": 1},
    doc="3x3 stride-1 Conv by Winograd F(m x m, 3x3), m = attrs['tile'] (2 or 4); inputs X, "
        "U (transformed weights, [(m+2)^2, OC/rows, C, rows] panels)[, B]; pool = 2: a fused 2x2 "
        "stride-2 max pool follows (before the epilogue's monotone steps). "
        "Flops are counted as for the direct conv so GFLOP/s compare; executed_flops counts the "
        "tile GEMMs and transforms it really computes."))
