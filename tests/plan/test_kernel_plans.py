"""Kernel plans (hobbit/plan): each Conv's variant and sizes are decided once, in a frozen
plan; memory planning reserves exactly the plan's scratch and keeps the plan the emitter
reads. The numbers are checked against the rules the plans state, written out here."""

from __future__ import annotations

import dataclasses

import pytest
from onnx import helper

from hobbit.passes import run_pipeline
from hobbit.passes.memory import ALIGN, plan_memory
from hobbit.plan.bands import band_heights
from hobbit.plan.conv import ConvPlan, conv_plan, conv_shape
from hobbit.plan.planners import PLANNERS, kernel_plan
from hobbit.plan.winograd import WinogradPlan
from hobbit.target import host_target
from tests.helpers import rand
from tests.passes import import_model


def _graph(xshape, oc, k, strides=(1, 1), pads=(1, 1, 1, 1), group=1, passes=None):
    inits = {"W": rand(oc, xshape[1] // group, k, k, seed=1), "B": rand(oc, seed=2)}
    node = helper.make_node("Conv", ["x", "W", "B"], ["y"], strides=strides, pads=pads, group=group)
    return run_pipeline(import_model([node], {"x": rand(*xshape)}, ["y"], inits), passes)


def _conv(graph):
    (node,) = [n for n in graph.nodes if n.op in PLANNERS]
    return node


@pytest.mark.parametrize("xshape,oc,k,strides,pads,group,variant", [
    ((1, 32, 28, 28), 32, 3, (2, 2), (1, 1, 1, 1), 32, "depthwise"),
    ((1, 64, 28, 28), 32, 1, (1, 1), (0, 0, 0, 0), 1, "gemm"),
    ((1, 3, 64, 64), 16, 7, (2, 2), (3, 3, 3, 3), 1, "direct"),
    ((1, 8, 30, 30), 16, 3, (2, 2), (1, 1, 1, 1), 1, "im2col"),
    ((1, 64, 30, 30), 16, 1, (2, 2), (0, 0, 0, 0), 1, "im2col"),  # 1x1 but strided: not a plain GEMM
])
def test_conv_variant_follows_the_shape(xshape, oc, k, strides, pads, group, variant):
    node = _conv(_graph(xshape, oc, k, strides, pads, group, passes=[]))
    assert conv_plan(node, host_target(), 2).variant == variant


def test_ko_weights_run_as_a_gemm_by_channel():
    """7x7 outputs fill vectors badly, so the layout pass stores the weights KO and the plan
    keeps one shared buffer of partial sums beside the (pointwise: empty) im2col."""
    node = _conv(_graph((1, 64, 7, 7), 64, 1, pads=(0, 0, 0, 0), passes=["layout"]))
    assert node.attrs["weight_layout"] == "KO"
    plan = conv_plan(node, host_target(), 2)
    assert (plan.variant, plan.by_channel, plan.col, plan.partial) == ("gemm", True, 0, 49 * 64)
    assert plan.scratch_bytes == 49 * 64 * 4  # shared, not per thread


def test_im2col_blocks_fit_half_of_l2_and_pack_every_band():
    target = host_target()
    node = _conv(_graph((1, 64, 112, 112), 64, 3, strides=(2, 2), passes=[]))
    for threads in (1, 2, 3):
        plan = conv_plan(node, target, threads)
        s = plan.shape
        k = s.c * 9
        assert plan.variant == "im2col" and 1 <= plan.rows <= s.oh
        assert plan.col == k * plan.rows * s.ow and plan.col * 4 <= target.l2_bytes // 2
        assert max(band_heights(s.oh, plan.rows, threads)) <= plan.rows
        assert plan.scratch_bytes == threads * (plan.col + plan.pack) * 4


def test_direct_conv_planes_hold_a_band_of_input_rows():
    target = host_target()
    node = _conv(_graph((1, 3, 120, 400), 8, 3, passes=[]))
    plan = conv_plan(node, target, 2)
    s = plan.shape
    rows_read = (plan.rows - 1) * s.stride[0] + s.kh  # input rows a band of output rows reads
    assert plan.variant == "direct" and plan.rows <= -(-s.oh // 2)
    assert plan.plane >= s.c * rows_read * (s.w + 2)
    assert plan.gemm.kc == s.c * s.kh * s.kw  # one K chunk: a channel's taps stay together
    assert plan.scratch_bytes == 2 * plan.plane * 4


def test_plans_are_frozen():
    plan = conv_plan(_conv(_graph((1, 8, 30, 30), 16, 3, passes=[])), host_target(), 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.rows = 1


@pytest.mark.parametrize("xshape,oc", [((1, 32, 50, 50), 40), ((1, 64, 14, 14), 64), ((1, 512, 7, 7), 512)])
def test_winograd_scratch_holds_every_region(xshape, oc):
    """Whole image: per-thread planes, then V and M of all tiles, then per-thread packing;
    banded: every region per thread."""
    node = _conv(_graph(xshape, oc, 3, passes=["winograd"]))
    assert node.op == "ConvWinograd"
    plan = kernel_plan(node, host_target(), 2)
    assert isinstance(plan, WinogradPlan)
    s, m = conv_shape(node), plan.m
    tiles = -(-s.oh // m) * -(-s.ow // m)
    if plan.band:
        assert plan.v == (m + 2) ** 2 * s.c * plan.band * -(-s.ow // m)
        assert plan.scratch_elems == 2 * (plan.plane + plan.v + plan.mm + plan.pack)
    else:
        assert (plan.v, plan.mm) == ((m + 2) ** 2 * s.c * tiles, (m + 2) ** 2 * s.oc * tiles)
        assert plan.scratch_elems == 2 * plan.plane + plan.v + plan.mm + 2 * plan.pack


def test_memory_planning_reserves_the_plan_it_keeps():
    target = host_target()
    graph = _graph((1, 8, 30, 30), 16, 3)
    memory = plan_memory(graph, target, 2)
    node = _conv(graph)
    kept = memory.kernels[id(node)]
    assert isinstance(kept, ConvPlan) and kept == conv_plan(node, target, 2)
    assert id(node) in memory.scratch
    offsets = sorted([p.index for p in memory.places.values() if p.kind == "arena"] + [memory.scratch[id(node)].index])
    scratch_at = memory.scratch[id(node)].index
    after = [o for o in offsets if o > scratch_at] + [memory.reset_offset]
    assert min(after) - scratch_at >= kept.scratch_bytes and scratch_at % ALIGN == 0


def test_ops_without_a_planner_have_no_plan():
    graph = run_pipeline(import_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"]))
    assert kernel_plan(graph.nodes[0], host_target(), 1) is None
    assert plan_memory(graph, host_target(), 1).kernels == {}
