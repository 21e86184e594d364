"""The plan of a fused ExpandDepthwise node (hobbit/backend/cpu/expand_depthwise.py): the two
conv shapes it runs, the band height, and every thread's scratch regions.

Each thread computes the expansion for just the input rows its band of depthwise
output rows needs into an L2-sized buffer; the band height keeps the rows that
neighbouring bands compute twice a small share. Both 1x1 GEMMs run in the node's operand
Format (float32, or bf16 after the bf16 pass: their B, the expansion's input rows and the
band's depthwise rows, is then always packed, which is where it is converted)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.graph.ir import Node
from hobbit.graph.shapes import conv_out_size
from hobbit.plan.bands import band_heights
from hobbit.plan.conv import SLACK, ConvShape, b_pack, input_rows, reads_input
from hobbit.plan.format import Format, node_format
from hobbit.target import Target


def shapes(node: Node) -> tuple[ConvShape, ConvShape]:
    """The expansion (1x1) and the depthwise conv of a fused node."""
    n, c_in, h, w = node.inputs[0].shape
    c_mid = node.inputs[1].shape[0]
    _, _, kh, kw = node.inputs[3].shape
    a = node.attrs
    oh = conv_out_size(h, kh, a["strides"][0], a["dilations"][0], a["pads"][0] + a["pads"][2])
    ow = conv_out_size(w, kw, a["strides"][1], a["dilations"][1], a["pads"][1] + a["pads"][3])
    expand = ConvShape(n, c_in, h, w, c_mid, 1, 1, h, w, 1, (1, 1), (1, 1), (0, 0, 0, 0))
    depthwise = ConvShape(n, c_mid, h, w, c_mid, kh, kw, oh, ow, c_mid, tuple(a["strides"]),
                          tuple(a["dilations"]), tuple(a["pads"]))
    return expand, depthwise


def projects(node: Node) -> bool:
    """Whether the node also runs the 1x1 projection conv that reads the depthwise output."""
    return len(node.inputs) > 5


def band_rows(d: ConvShape, target: Target) -> int:
    """Most output rows per band: the expanded rows of a band fill at most half of L2."""
    row_bytes = d.c * d.w * 4
    rows = 1
    while rows < d.oh and input_rows(d, rows + 1) * row_bytes <= target.l2_bytes // 2:
        rows += 1
    return rows


@dataclass(frozen=True)
class ExpandDepthwisePlan:
    """Band height and per-thread scratch regions (elements), laid out in field order:
    expanded rows, padded plane (0: the taps read the expanded rows in place), expansion
    GEMM packing, then with a projection the band's depthwise rows and their packing."""
    expand: ConvShape
    depthwise: ConvShape
    projects: bool
    band: int  # depthwise output rows per band
    rows: int  # expanded rows held per band (<= H)
    mid: int
    plane: int
    pack: int
    dw: int
    pack_out: int
    threads: int
    itemsize: int
    format: Format  # the 1x1 GEMMs' operands

    @property
    def regions(self) -> tuple[tuple[str, int], ...]:
        return (("mid", self.mid), ("plane", self.plane), ("pack", self.pack), ("dw", self.dw),
                ("pack_out", self.pack_out))

    @property
    def scratch_bytes(self) -> int:
        return self.threads * sum(size for _, size in self.regions) * self.itemsize


def expand_depthwise_plan(node: Node, target: Target, threads: int) -> ExpandDepthwisePlan:
    e, d = shapes(node)
    fmt = node_format(node)
    band = min(band_rows(d, target), -(-d.oh // threads))  # each thread's share, at most
    rows = min(input_rows(d, band), d.h)
    plane = 0 if reads_input(d) else input_rows(d, band) * d.padded_hw[1] + SLACK
    pack = b_pack(fmt, e.oc, rows * e.w, fmt.steps(e.c), target)
    dw = pack_out = 0
    if projects(node):
        c_out = node.inputs[5].shape[0]
        dw = d.c * band * d.ow
        pack_out = max(b_pack(fmt, c_out, r * d.ow, fmt.steps(d.c), target) for r in band_heights(d.oh, band, threads))
    return ExpandDepthwisePlan(e, d, projects(node), band, rows, e.oc * rows * e.w, plane, pack, dw, pack_out,
                               threads, np.dtype(node.inputs[0].dtype).itemsize, fmt)
