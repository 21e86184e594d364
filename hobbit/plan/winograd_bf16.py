"""The plan of a ConvWinograd that the bf16 pass (hobbit.passes.bf16) gave bf16 weights.

The transforms stay float32 (their adds are cheap, and rounding the input patch before
B^T d B would put bf16's error on every tap): only the a*a GEMMs run on vdpbf16ps, at
twice the float32 rate. The layout of the phases is the float32 plan's
(hobbit.plan.winograd); what changes is the GEMMs' K, counted in pairs of channels, and
B's packing buffer, which every tile-wise GEMM now needs, since packing is where V is
converted to pairs. Transposed GEMMs (tiles as rows) convert V in place instead: its
[C, T] float32 rows become [C/2, T] pairs in the first half of the same space."""

from __future__ import annotations

import dataclasses

from hobbit.graph.ir import Node
from hobbit.plan.bands import band_heights
from hobbit.plan.gemm import gemm_schedule
from hobbit.plan.gemm_bf16 import pairs
from hobbit.plan.winograd import WinogradPlan, tile_gemm, tiles, winograd_plan
from hobbit.target import Target


def winograd_bf16_plan(node: Node, target: Target, threads: int) -> WinogradPlan:
    plan = winograd_plan(node, target, threads)
    s, m, k = plan.shape, plan.m, pairs(plan.shape.c)
    th, tw = tiles(s, m)
    if plan.by_tile:
        return dataclasses.replace(plan, gemm=gemm_schedule(th * tw, s.oc, k, target))
    if plan.band:
        schedules = [tile_gemm(s, m, r * tw, target, k) for r in band_heights(th, plan.band, threads)]
        return dataclasses.replace(plan, pack=max(g.kc * g.nr for g in schedules))
    gemm = tile_gemm(s, m, th * tw, target, k)
    return dataclasses.replace(plan, gemm=gemm, pack=gemm.kc * gemm.nr)
