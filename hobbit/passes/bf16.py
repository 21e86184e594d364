"""precision="bf16": which nodes compute in bf16, and their weights in the layout its
kernels read (hobbit.plan.format.BF16), converted here once, at compile time.

The GEMM-shaped kernels run on vdpbf16ps, twice the float32 FMA rate: Convs with a
bf16 variant (hobbit.plan.conv.runs_in_bf16: all but depthwise), the GEMMs of
F(2x2) Winograd convs (hobbit.plan.winograd), MatMuls with constant
panel-packed weights (fully-connected layers), and the 1x1 expansion and projection
GEMMs of fused ExpandDepthwise nodes (MobileNetV2's 112x112 and 56x56 blocks: 1.8 of
4.7 ms at one thread while they ran in float32). Everything else stays float32: depthwise
convs and pools are bound by memory, element-wise ops and epilogues (bias, fused
activations) are cheap next to the GEMMs, and F(4x4) Winograd convs, whose transforms
amplify the rounding of U and V to bf16 (in numpy, on 64 channels: 3.1% relative
error against 0.24% for a direct bf16 conv; F(2x2): 0.39%). Activations stay float32
in memory; the kernels convert them.

It runs after the fusion passes, which read the float32 weights (expand-depthwise
fusion takes a 1x1 conv's OIHW weights, which this pass then pairs)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import TargetError
from hobbit.graph.ir import Graph, Node, Value
from hobbit.passes.winograd import output_tile
from hobbit.plan.conv import conv_shape, runs_in_bf16
from hobbit.plan.expand_depthwise import projects
from hobbit.plan.format import BF16
from hobbit.target import Target

FLOAT32 = np.dtype(np.float32)
FEATURE = "avx512bf16"  # vdpbf16ps and vcvtneps2bf16, on 512-bit vectors


def require_bf16(target: Target) -> None:
    """A clear error, before any code exists, where LLVM would fail to select vdpbf16ps."""
    if FEATURE not in target.enabled:
        raise TargetError(f"precision='bf16' needs the CPU feature {FEATURE} (vdpbf16ps), which target "
                          f"'{target.cpu}' ({target.triple}) does not have; use precision='fp32', or a "
                          f"target with +{FEATURE} (e.g. 'znver4', 'sapphirerapids')")


# Below this harmonic mean of C and OC (C*OC/(C+OC): GEMM work per transformed element) the
# float32 F(4x4) transforms' 1.8x fewer adds per output beat F(2x2)'s bf16 GEMMs; one thread:
# 56x56, 64 -> 64: 0.91 ms F(4x4) against 0.99 F(2x2) bf16; 27x27, 32 -> 128: 0.20 against
# 0.26; above it, 28x28, 128 -> 128: 0.76 against 0.74; 28x28, 512 -> 512: 22.5 against 10.4.
MIN_BF16_WINOGRAD_CHANNELS = 48


def bf16_tile(node: Node) -> int:
    """The Winograd tile of a conv in the bf16 pipeline: float32's choice, but F(2x2) (in bf16)
    over F(4x4) (in float32) where the GEMMs are large beside the transforms."""
    tile = output_tile(node)
    oc, c = node.inputs[1].shape[:2]
    return 2 if tile == 4 and c * oc / (c + oc) >= MIN_BF16_WINOGRAD_CHANNELS else tile


def use_bf16(graph: Graph, target: Target) -> Graph:
    require_bf16(target)
    for node in graph.nodes:
        if node.op == "Conv" and _conv_in_bf16(node):
            _conv_weights(node)
        elif node.op == "ConvWinograd" and node.attrs["tile"] == 2 and _float32(node):
            _winograd_weights(node)
        elif node.op == "MatMul" and _float32(node) and node.attrs.get("b_layout") == "panels":
            _matmul_weights(node)
        elif node.op == "ExpandDepthwise" and _float32(node):
            _expand_depthwise_weights(node)
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
        node.inputs[1] = Value(f"{w.name}/bf16", const=BF16.word_panels(w.const))
        node.attrs = {**node.attrs, "precision": BF16.name}
        return
    pairs = BF16.word_rows(w.const.reshape(w.shape[0], -1))
    node.inputs[1] = Value(f"{w.name}/bf16", const=pairs)
    node.attrs = {**node.attrs, "precision": BF16.name, "weight_shape": tuple(w.shape)}


def _expand_depthwise_weights(node: Node) -> None:
    """The expansion's (and the projection's) [M, C, 1, 1] -> pairs [M, C/2, 2] (rows of A);
    the depthwise filters stay float32."""
    for i in (1, 5) if projects(node) else (1,):
        w = node.inputs[i]
        node.inputs[i] = Value(f"{w.name}/bf16", const=BF16.word_rows(w.const.reshape(w.shape[0], -1)))
    node.attrs = {**node.attrs, "precision": BF16.name}


def _winograd_weights(node: Node) -> None:
    """U's packed panels [a*a, P, C, rows] (hobbit.plan.winograd.pack_weights) -> pairs of
    channels [a*a, P, C/2, rows, 2], one layout for both GEMM orientations, as in float32."""
    u = node.inputs[1]
    aa, panels, c, rows = u.shape
    paired = BF16.word_panels(u.const.reshape(aa * panels, c, rows))
    node.inputs[1] = Value(f"{u.name}/bf16", const=paired.reshape(aa, panels, *paired.shape[1:]))
    node.attrs = {**node.attrs, "precision": BF16.name}


def _matmul_weights(node: Node) -> None:
    b = node.inputs[1]
    node.inputs[1] = Value(f"{b.name}/bf16", const=BF16.word_panels(b.const))
    node.attrs = {**node.attrs, "precision": BF16.name}
