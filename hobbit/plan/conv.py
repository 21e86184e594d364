"""A 2-D convolution's shape, as every conv decision reads it.

The passes that choose a conv's form (winograd, expand-depthwise) and the emitters
of each variant (hobbit.lower.conv, depthwise, direct_conv, winograd) all start
from this one record, so it lives below both."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.graph.ir import Node


@dataclass(frozen=True)
class ConvShape:
    n: int
    c: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    oh: int
    ow: int
    group: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def ocg(self) -> int:
        return self.oc // self.group

    @property
    def depthwise(self) -> bool:
        return self.group == self.c and self.group > 1 and self.cg == 1

    @property
    def pointwise(self) -> bool:
        return (self.kh, self.kw, self.stride, self.pad) == (1, 1, (1, 1), (0, 0, 0, 0))

    @property
    def padded_hw(self) -> tuple[int, int]:
        return self.h + self.pad[0] + self.pad[2], self.w + self.pad[1] + self.pad[3]


def conv_shape(node: Node) -> ConvShape:
    x = node.inputs[0]
    n, c, h, wd = x.shape
    # A Winograd conv carries transformed weights; its attrs keep the original shape.
    oc, _, kh, kw = node.attrs.get("weight_shape") or node.inputs[1].shape
    _, _, oh, ow = node.outputs[0].shape
    a = node.attrs
    pool = a.get("pool", 1)  # a Winograd conv with a fused pool stores pooled outputs
    oh, ow = oh * pool, ow * pool
    return ConvShape(n, c, h, wd, oc, kh, kw, oh, ow, a["group"], tuple(a["strides"]),
                     tuple(a["dilations"]), tuple(a["pads"]))


def input_rows(s: ConvShape, out_rows: int) -> int:
    """Input rows that `out_rows` consecutive output rows read (padding rows included)."""
    return (out_rows - 1) * s.stride[0] + (s.kh - 1) * s.dilation[0] + 1
