"""Algorithm choice: 3x3 stride-1 convolutions with enough channels become
Winograd convolutions: F(4x4, 3x3) (4x fewer multiply-adds) when the image
has at least 25 4x4 tiles, else F(2x2, 3x3) (2.25x fewer). The weights are
transformed here, once, at compile time, and packed in panels of output
channels for the target's GEMM microkernel.

Below ~16 input or output channels the input/output transforms cost more than
the GEMM saves, and a stem conv (3 channels) stays direct."""

from __future__ import annotations

from typing import Callable

from hobbit.target import Target
from hobbit.graph.ir import Graph, Node, Value
from hobbit.passes.choices import computed_once, sized_choice
from hobbit.plan.conv import conv_shape
from hobbit.plan.winograd import pack_weights, transform_weights, weight_panel

MIN_CHANNELS = 16
# F(4x4)'s transformed weights are 4x the direct ones and are read from memory once per
# image, each element feeding one multiply-add per tile: with 16 tiles (14x14 images) two
# threads waited on memory (ResNet-18's 256-channel 14x14 convs: 0.94 ms with F(4x4),
# 0.66 ms with F(2x2)); one thread ran at the same speed either way.
MIN_TILES_4 = 25
MIN_USEFUL_4 = 0.75  # 13x13 outputs in 4x4 tiles compute 256 values for 169 (measured slower)


def use_winograd(graph: Graph, target: Target, tile: Callable[[Node], int] | None = None) -> Graph:
    """`tile` picks each conv's tile size (default: tile_size of its output; the bf16
    pipeline's choice is hobbit.passes.bf16.bf16_tile)."""
    for i, node in enumerate(graph.nodes):
        if _eligible(node):
            m = sized_choice(("winograd tile", node.name), lambda node=node: tile(node) if tile else output_tile(node))
            graph.nodes[i] = _rewrite(node, target, m)
    graph.relink()
    return graph


def output_tile(node: Node) -> int:
    return tile_size(*node.outputs[0].shape[2:])


def _eligible(node: Node) -> bool:
    if node.op != "Conv" or node.epilogue or node.inputs[1].const is None:
        return False
    a = node.attrs
    oc, c, kh, kw = node.inputs[1].shape
    return ((kh, kw) == (3, 3) and tuple(a["strides"]) == (1, 1) and tuple(a["dilations"]) == (1, 1)
            and a["group"] == 1 and c >= MIN_CHANNELS and oc >= MIN_CHANNELS
            and node.inputs[0].dtype == node.inputs[1].dtype and str(node.inputs[0].dtype) == "float32")


def tile_size(out_h: int, out_w: int) -> int:
    """F(4x4) when there are enough 4x4 tiles to reuse each transformed weight and few
    of the outputs they compute fall off the image's edge, else F(2x2)."""
    tiles4 = -(-out_h // 4) * -(-out_w // 4)
    useful = out_h * out_w / (16 * tiles4)
    return 4 if tiles4 >= MIN_TILES_4 and useful >= MIN_USEFUL_4 else 2


def _rewrite(node: Node, target: Target, m: int) -> Node:
    w = node.inputs[1]
    panel = sized_choice(("winograd panel", node.name), lambda: weight_panel(conv_shape(node), m, target))
    packed = computed_once(("winograd weights", m, panel), w.const,
                           lambda const: pack_weights(transform_weights(const, m), panel))
    u = Value(f"{w.name}/winograd{m}", const=packed)
    attrs = {**node.attrs, "weight_shape": tuple(w.shape), "tile": m}
    return Node("ConvWinograd", node.name, [node.inputs[0], u] + node.inputs[2:], node.outputs, attrs)
