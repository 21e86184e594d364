"""BoundedNonMaxSuppression (hobbit/ops/nms.py): greedy NMS per (batch, class), as
onnxruntime computes it.

Each (batch, class) pair is a piece of work (shared among threads when there are
several and enough boxes):
1. The candidates' sort keys go to the thread's scratch: one u64 per box whose score
   passes the filter, the score's bits mapped so that unsigned order is float order
   in the high half (-0 read as +0, so the two tie as in float compares) and
   0xFFFFFFFF - index in the low half, so a larger key is a higher score or, on equal
   scores, a lower index: onnxruntime's order. The keys are distinct, and the box
   index comes back from the low half.
2. The keys become a max-heap (O(M)) and are popped one at a time until the pair has
   K_run boxes or none are left, as onnxruntime's priority queue does: a pair that
   stops early never sorts the rest (O(M + pops * log M)).
3. A popped box is kept unless a box already kept suppresses it. The kept boxes'
   corners and areas are float32 columns in scratch, so the IoU test runs on whole
   vectors of kept boxes and stops at the first vector that suppresses. The test is
   onnxruntime's SuppressByIOU with the popped box first, in float32 without
   contraction, each of its early 'not suppressed' exits one lane-wise compare that a
   NaN fails the same way. Corners and areas are the same float operations on the same
   values whether computed per pair of boxes (onnxruntime) or once per box (here).
4. A pair writes its rows at its own slot (row p*K of the output) and its count to a
   shared table; after all pairs are done one thread packs the slots in pair order
   (rows only move towards the front, so in place) and writes the extent.

Run-time inputs are checked: an iou_threshold outside [0, 1] (or NaN) is reported as
onnxruntime refuses it; max_output_boxes_per_class is clamped to [0, K] (onnxruntime
reads a negative one as 0). Every address is a static offset plus an index below its
bound (box indices come from the keys, counts stay below K), so the kernel never
leaves its buffers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I1, I32, I64, KernelBuilder
from hobbit.backend.cpu.index import clamp
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.mask import load_scalar_index
from hobbit.emit.status import check_range
from hobbit.plan.nms import COLUMNS, NmsPlan

F32 = np.dtype(np.float32)
INT64 = np.dtype(np.int64)
U64 = np.dtype(np.uint64)
FLOAT = ir.FloatType()
LOW = 0xFFFFFFFF
PARALLEL_MIN_BOXES = 4096  # boxes over all pairs below which a parallel region costs more than it saves


def _sort_key(kb: KernelBuilder, score: ir.Value, index: ir.Value) -> ir.Value:
    b = kb.b
    score = b.select(b.fcmp_ordered("==", score, ir.Constant(FLOAT, 0.0)), ir.Constant(FLOAT, 0.0), score)
    bits = b.bitcast(score, I32)
    ordered = b.select(b.icmp_signed("<", bits, ir.Constant(I32, 0)), b.not_(bits),
                       b.xor(bits, ir.Constant(I32, -0x80000000)))
    return b.or_(b.shl(b.zext(ordered, I64), kb.i64(32)), b.sub(kb.i64(LOW), index))


def _sift_down(kb: KernelBuilder, keys: ir.Value, start: ir.Value, count: ir.Value, pos: ir.Value) -> None:
    """Move keys[start] down the max-heap keys[0, count) to where it belongs."""
    b = kb.b
    moving = kb.load(keys, U64, start)
    b.store(start, pos)
    more = kb.alloca(I1)
    b.store(ir.Constant(I1, 1), more)
    with kb.loop_while(lambda: b.load(more), "sift"):
        at = b.load(pos)
        left = b.add(b.mul(at, kb.i64(2)), kb.i64(1))
        b.store(ir.Constant(I1, 0), more)
        with kb.if_then(b.icmp_signed("<", left, count)):
            right = b.add(left, kb.i64(1))
            pair = b.select(b.icmp_signed("<", right, count), right, left)
            left_key, right_key = kb.load(keys, U64, left), kb.load(keys, U64, pair)
            larger = b.icmp_unsigned(">", right_key, left_key)
            child, child_key = b.select(larger, pair, left), b.select(larger, right_key, left_key)
            with kb.if_then(b.icmp_unsigned(">", child_key, moving)):
                kb.store(child_key, keys, U64, at)
                b.store(child, pos)
                b.store(ir.Constant(I1, 1), more)
    kb.store(moving, keys, U64, b.load(pos))


def _corners(kb: KernelBuilder, boxes: ir.Value, at: ir.Value, center_point_box: int) -> list[ir.Value]:
    """x_min, x_max, y_min, y_max and area of the box at element `at`, as onnxruntime computes them."""
    b = kb.b
    v = [kb.load(boxes, F32, b.add(at, kb.i64(k))) for k in range(4)]
    if center_point_box:
        half_w, half_h = b.fdiv(v[2], ir.Constant(FLOAT, 2.0)), b.fdiv(v[3], ir.Constant(FLOAT, 2.0))
        x0, x1 = b.fsub(v[0], half_w), b.fadd(v[0], half_w)
        y0, y1 = b.fsub(v[1], half_h), b.fadd(v[1], half_h)
    else:
        x_first, y_first = b.fcmp_ordered(">=", v[1], v[3]), b.fcmp_ordered(">=", v[0], v[2])
        x0, x1 = b.select(x_first, v[3], v[1]), b.select(x_first, v[1], v[3])
        y0, y1 = b.select(y_first, v[2], v[0]), b.select(y_first, v[0], v[2])
    return [x0, x1, y0, y1, b.fmul(b.fsub(x1, x0), b.fsub(y1, y0))]


def _overlap(kb: KernelBuilder, box: list[ir.Value], kept: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """Per lane: whether the boxes' x and y ranges overlap (onnxruntime's first two exits,
    std::max / std::min as it writes them), and the intersection's corners."""
    b = kb.b
    cx0, cx1, cy0, cy1 = box[:4]
    kx0, kx1, ky0, ky1 = kept[:4]
    ix0, ix1 = b.select(b.fcmp_ordered("<", cx0, kx0), kx0, cx0), b.select(b.fcmp_ordered("<", kx1, cx1), kx1, cx1)
    iy0, iy1 = b.select(b.fcmp_ordered("<", cy0, ky0), ky0, cy0), b.select(b.fcmp_ordered("<", ky1, cy1), ky1, cy1)
    return b.and_(b.fcmp_unordered(">", ix1, ix0), b.fcmp_unordered(">", iy1, iy0)), [ix0, ix1, iy0, iy1]


def _suppressed(kb: KernelBuilder, box: list[ir.Value], kept: list[ir.Value], corners: list[ir.Value],
                iou_threshold: ir.Value) -> ir.Value:
    """Per lane, for overlapping boxes: the rest of SuppressByIOU (areas, then IoU > threshold)."""
    b = kb.b
    ix0, ix1, iy0, iy1 = corners
    c_area, k_area = box[4], kept[4]
    inter = b.fmul(b.fsub(ix1, ix0), b.fsub(iy1, iy0))
    union = b.fsub(b.fadd(c_area, k_area), inter)
    zero = ir.Constant(inter.type, None)
    tests = [b.fcmp_unordered(">", inter, zero), b.fcmp_unordered(">", c_area, zero),
             b.fcmp_unordered(">", k_area, zero), b.fcmp_unordered(">", union, zero),
             b.fcmp_ordered(">", b.fdiv(inter, union), iou_threshold)]
    result = tests[0]
    for t in tests[1:]:
        result = b.and_(result, t)
    return result


def _any(kb: KernelBuilder, mask: ir.Value, lanes: int) -> ir.Value:
    b = kb.b
    return b.icmp_unsigned("!=", b.bitcast(mask, ir.IntType(lanes)), ir.Constant(ir.IntType(lanes), 0))


def _any_suppresses(kb: KernelBuilder, box: list[ir.Value], columns: list[ir.Value], kept: ir.Value,
                    lanes: int, iou_threshold: ir.Value) -> ir.Value:
    """Whether any of the first `kept` boxes of the columns suppresses `box`, a vector of
    kept boxes at a time, stopping at the first vector with a hit. Most kept boxes do not
    overlap a given box at all, so a vector's areas and IoU are computed only when one does."""
    b = kb.b
    splat = [kb.splat(v, lanes) for v in box + [iou_threshold]]
    lane_ids = ir.Constant(ir.VectorType(I32, lanes), list(range(lanes)))
    hit, start = kb.alloca(I1), kb.alloca(I64)
    b.store(ir.Constant(I1, 0), hit)
    b.store(kb.i64(0), start)
    with kb.loop_while(lambda: b.and_(b.icmp_signed("<", b.load(start), kept), b.not_(b.load(hit))), "kept"):
        j = b.load(start)
        chunk = [kb.vload(col, F32, j, lanes) for col in columns[:4]]
        live = b.icmp_signed("<", lane_ids, kb.splat(b.trunc(b.sub(kept, j), I32), lanes))
        overlap, corners = _overlap(kb, splat, chunk)
        overlap = b.and_(overlap, live)
        with kb.if_then(_any(kb, overlap, lanes)):
            area = kb.vload(columns[4], F32, j, lanes)
            found = b.and_(_suppressed(kb, splat, chunk + [area], corners, splat[COLUMNS]), overlap)
            b.store(_any(kb, found, lanes), hit)
        b.store(b.add(j, kb.i64(lanes)), start)
    return b.load(hit)


def _iou_threshold(kb: KernelBuilder, ptr: ir.Value | None) -> ir.Value:
    """The run-time iou_threshold (0 when absent), reported when it is outside [0, 1] or NaN:
    the check sees it in millionths, rounded away from the range so an invalid one stays outside."""
    if ptr is None:
        return ir.Constant(FLOAT, 0.0)
    b = kb.b
    double = ir.DoubleType()
    value = kb.load(ptr, F32, 0)
    scaled = b.fmul(b.fpext(value, double), ir.Constant(double, 1e6))
    scaled = b.select(b.fcmp_ordered(">", scaled, ir.Constant(double, 1e18)), ir.Constant(double, 1e18), scaled)
    scaled = b.select(b.fcmp_ordered("<", scaled, ir.Constant(double, -1e18)), ir.Constant(double, -1e18), scaled)
    rounded = b.select(b.fcmp_ordered("<", scaled, ir.Constant(double, 0.0)),
                       kb.call_intrinsic("llvm.floor.f64", double, [scaled]),
                       kb.call_intrinsic("llvm.ceil.f64", double, [scaled]))
    millionths = b.select(b.fcmp_unordered("!=", value, value), kb.i64(-(1 << 63)), b.fptosi(rounded, I64))
    check_range(kb, millionths, 0, 10 ** 6, "IoU threshold in millionths")
    return value


@dataclass
class _Nms:
    """What every pair of one node reads: pointers, static sizes and the run-time parameters."""

    kb: KernelBuilder
    plan: NmsPlan
    boxes: ir.Value
    scores: ir.Value
    selected: ir.Value
    counts: ir.Value
    classes: int
    center_point_box: int
    limit: ir.Value
    iou_threshold: ir.Value
    score_threshold: ir.Value | None
    valid: int | ir.Value  # candidate boxes: N, or the run-time count of bounded boxes

    def pairs(self, first: int | ir.Value, end: int | ir.Value, region: ir.Value) -> None:
        """Pairs [first, end), with `region` (keys, then the kept boxes' columns) as scratch."""
        b, plan = self.kb.b, self.plan
        column_bytes = (plan.region_bytes - plan.keys_bytes) // COLUMNS
        columns = [b.gep(region, [self.kb.i64(plan.keys_bytes + c * column_bytes)], source_etype=ir.IntType(8))
                   for c in range(COLUMNS)]
        with self.kb.loop(first, end, name="pair") as p:
            self.pair(p, region, columns)

    def pair(self, p: ir.Value, keys: ir.Value, columns: list[ir.Value]) -> None:
        kb, b, n = self.kb, self.kb.b, self.plan.boxes
        batch, cls = b.udiv(p, kb.i64(self.classes)), b.urem(p, kb.i64(self.classes))
        count, kept, pos = kb.alloca(I64), kb.alloca(I64), kb.alloca(I64)
        b.store(kb.i64(0), count)
        with kb.loop(0, self.valid, name="box") as i:
            score = kb.load(self.scores, F32, b.add(b.mul(p, kb.i64(n)), i))
            passes = (b.fcmp_ordered(">", score, self.score_threshold) if self.score_threshold is not None
                      else b.fcmp_ordered("==", score, score))
            m = b.load(count)
            kb.store(_sort_key(kb, score, i), keys, U64, m)
            b.store(b.add(m, b.zext(passes, I64)), count)
        m = b.load(count)
        half = b.udiv(m, kb.i64(2))
        with kb.loop(0, half, name="heapify") as t:
            _sift_down(kb, keys, b.sub(b.sub(half, kb.i64(1)), t), m, pos)
        b.store(kb.i64(0), kept)
        with kb.loop_while(lambda: b.and_(b.icmp_signed(">", b.load(count), kb.i64(0)),
                                       b.icmp_signed("<", b.load(kept), self.limit)), "pop"):
            top = kb.load(keys, U64, 0)
            left = b.sub(b.load(count), kb.i64(1))
            b.store(left, count)
            with kb.if_then(b.icmp_signed(">", left, kb.i64(0))):
                kb.store(kb.load(keys, U64, left), keys, U64, 0)
                _sift_down(kb, keys, kb.i64(0), left, pos)
            index = b.sub(kb.i64(LOW), b.and_(top, kb.i64(LOW)))
            box = _corners(kb, self.boxes, b.mul(b.add(b.mul(batch, kb.i64(n)), index), kb.i64(4)),
                           self.center_point_box)
            held = b.load(kept)
            with kb.if_then(b.not_(_any_suppresses(kb, box, columns, held, self.plan.lanes, self.iou_threshold))):
                for column, v in zip(columns, box):
                    kb.store(v, column, F32, held)
                row = b.mul(b.add(b.mul(p, kb.i64(self.plan.bound)), held), kb.i64(3))
                for c, v in enumerate((batch, cls, index)):
                    kb.store(v, self.selected, INT64, b.add(row, kb.i64(c)))
                b.store(b.add(held, kb.i64(1)), kept)
        kb.store(b.load(kept), self.counts, INT64, p)


def lower_nms(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    b = kb.b
    plan: NmsPlan = k.plan
    selected, extent = k.outputs
    if plan.bound == 0 or plan.pairs == 0:  # no limit input (or a constant 0), or no boxes
        kb.store(kb.i64(0), extent, INT64)
        return
    inputs = list(k.inputs) + [None] * (6 - len(k.inputs))
    limit = clamp(kb, load_scalar_index(kb, inputs[2], node.inputs[2].dtype, 0), 0, plan.bound)
    score_threshold = kb.load(inputs[4], F32, 0) if inputs[4] is not None else None
    nms = _Nms(kb, plan, k.inputs[0], k.inputs[1], selected, k.scratch, node.inputs[1].shape[1],
               node.attrs["center_point_box"], limit, _iou_threshold(kb, inputs[3]), score_threshold,
               plan.boxes if inputs[5] is None else clamp(kb, kb.load(inputs[5], INT64, 0), 0, plan.boxes))

    def region(thread: ir.Value) -> ir.Value:
        start = b.add(kb.i64(plan.counts_bytes), b.mul(thread, kb.i64(plan.region_bytes)))
        return b.gep(k.scratch, [start], source_etype=ir.IntType(8))

    if k.threads.max_threads > 1 and plan.pairs > 1 and plan.pairs * plan.boxes >= PARALLEL_MIN_BOXES:
        k.threads.runs(plan.pairs, lambda first, end: nms.pairs(first, end, region(k.threads.tid)))
        k.threads.sync()
        with kb.if_then(b.icmp_unsigned("==", k.threads.tid, kb.i64(0))):
            _pack(kb, selected, k.scratch, extent, plan.pairs, plan.bound)
    else:
        nms.pairs(0, plan.pairs, region(kb.i64(0)))
        _pack(kb, selected, k.scratch, extent, plan.pairs, plan.bound)


def _pack(kb: KernelBuilder, selected: ir.Value, counts: ir.Value, extent: ir.Value, pairs: int, bound: int) -> None:
    """Move every pair's rows from its slot to just after the previous pair's, in pair order,
    and write the total."""
    b = kb.b
    total = kb.alloca(I64)
    b.store(kb.i64(0), total)
    with kb.loop(0, pairs, name="pack") as p:
        count, at = kb.load(counts, INT64, p), b.load(total)
        source = b.mul(p, kb.i64(bound * 3))
        with kb.if_then(b.icmp_signed("!=", source, b.mul(at, kb.i64(3)))):
            with kb.loop(0, b.mul(count, kb.i64(3)), name="move") as r:
                kb.store(kb.load(selected, INT64, b.add(source, r)), selected, INT64, b.add(b.mul(at, kb.i64(3)), r))
        b.store(b.add(at, count), total)
    kb.store(b.load(total), extent, INT64)


CPU.register("BoundedNonMaxSuppression", lower=lower_nms)
