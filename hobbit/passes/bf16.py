"""precision="bf16": which nodes compute in bf16, and their weights in the layout its
kernels read (hobbit.plan.gemm_bf16), converted here once, at compile time.

The GEMM-shaped kernels run on vdpbf16ps, twice the float32 FMA rate: Convs with a
bf16 variant (hobbit.plan.conv_bf16.runs_in_bf16: all but depthwise) and
MatMuls with constant panel-packed weights (fully-connected layers). Everything else
stays float32: depthwise convs and pools are bound by memory, element-wise ops and
epilogues (bias, fused activations) are cheap next to the GEMMs, and Winograd convs
stay float32 (the bf16 pipeline keeps only F(4x4), which beat bf16 im2col: see
hobbit.passes.BF16_PIPELINE). Activations stay float32 in memory; the kernels
convert them.

It runs after the fusion passes, which read the float32 weights (expand-depthwise
fusion packs a 1x1 conv's weights its own way)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import TargetError
from hobbit.graph.ir import Graph, Node, Value
from hobbit.plan.conv import conv_shape
from hobbit.plan.conv_bf16 import runs_in_bf16
from hobbit.plan.gemm_bf16 import pair_panels, pair_rows
from hobbit.target import Target

FLOAT32 = np.dtype(np.float32)
FEATURE = "avx512bf16"  # vdpbf16ps and vcvtneps2bf16, on 512-bit vectors


def require_bf16(target: Target) -> None:
    """A clear error, before any code exists, where LLVM would fail to select vdpbf16ps."""
    if FEATURE not in target.enabled:
        raise TargetError(f"precision='bf16' needs the CPU feature {FEATURE} (vdpbf16ps), which target "
                          f"'{target.cpu}' ({target.triple}) does not have; use precision='fp32', or a "
                          f"target with +{FEATURE} (e.g. 'znver4', 'sapphirerapids')")


def use_bf16(graph: Graph, target: Target) -> Graph:
    require_bf16(target)
    for node in graph.nodes:
        if node.op == "Conv" and _conv_in_bf16(node):
            _conv_weights(node)
        elif node.op == "MatMul" and _float32(node) and node.attrs.get("b_layout") == "panels":
            _matmul_weights(node)
    graph.relink()
    return graph


def _float32(node: Node) -> bool:
    return all(v is None or np.dtype(v.dtype) == FLOAT32 for v in node.inputs[:2])


def _conv_in_bf16(node: Node) -> bool:
    w = node.inputs[1]
    return (w.const is not None and _float32(node) and node.attrs.get("weight_layout", "OIHW") in ("OIHW", "KO")
            and runs_in_bf16(conv_shape(node)))


def _conv_weights(node: Node) -> None:
    """OIHW -> [OC, K/2, 2] pairs (rows of A); KO panels -> [P, K/2, NR, 2] (B)."""
    w = node.inputs[1]
    if node.attrs.get("weight_layout") == "KO":
        node.inputs[1] = Value(f"{w.name}/bf16", const=pair_panels(w.const))
        node.attrs = {**node.attrs, "precision": "bf16"}
        return
    pairs = pair_rows(w.const.reshape(w.shape[0], -1))
    node.inputs[1] = Value(f"{w.name}/bf16", const=pairs)
    node.attrs = {**node.attrs, "precision": "bf16", "weight_shape": tuple(w.shape)}


def _matmul_weights(node: Node) -> None:
    b = node.inputs[1]
    node.inputs[1] = Value(f"{b.name}/bf16", const=pair_panels(b.const))
    node.attrs = {**node.attrs, "precision": "bf16"}
