"""Per-op facts: does a node keep the samples of a batch independent along dim 0?

Each op's registration attaches one of these as OpDef.per_sample. A predicate gets the
node (with concrete shapes) and, per input, whether that input carries the batch (is
derived from a batched model input). It answers True only when every output row block
depends on the same sample's rows of the batched inputs alone; hobbit/ops/separable.py
combines the answers with a structural check of the graph at two batch sizes."""

from __future__ import annotations

from collections.abc import Callable

from hobbit.graph.ir import Node
from hobbit.ops.registry import with_defaults

PerSample = Callable[[Node, list[bool]], bool]


def broadcasting(node: Node, batched: list[bool]) -> bool:
    """Element-wise ops with numpy broadcasting: each batched operand spans the output's
    dim 0 itself; the other operands broadcast along it (lower rank, or dim 0 of 1)."""
    out = node.outputs[0].shape
    if not out:
        return False
    for value, carries in zip(node.inputs, batched):
        if value is None:
            continue
        same_rank = len(value.shape) == len(out)
        if carries and not (same_rank and value.shape[0] == out[0]):
            return False
        if not carries and same_rank and value.shape[0] != 1:
            return False
    return True


def first_input(node: Node, batched: list[bool]) -> bool:
    """Ops that map each sample of input 0 through parameters shared by all samples
    (Conv, pools, inference BatchNorm, Reshape): only input 0 may carry the batch."""
    return bool(batched) and batched[0] and not any(batched[1:])


def axis_not_batch(attr: str = "axis") -> PerSample:
    """Ops acting along one axis (Softmax, CumSum, Split, ...): independent unless it is dim 0."""
    def check(node: Node, batched: list[bool]) -> bool:
        return first_input(node, batched) and with_defaults(node)[attr] != 0
    return check


def reduce_not_batch(node: Node, batched: list[bool]) -> bool:
    """Reductions over static axes; no axes means all of them, dim 0 included."""
    axes = tuple(with_defaults(node)["axes"])
    return first_input(node, batched) and bool(axes) and 0 not in axes


def transpose_keeps_batch(node: Node, batched: list[bool]) -> bool:
    perm = tuple(with_defaults(node)["perm"]) or tuple(reversed(range(len(node.inputs[0].shape))))
    return first_input(node, batched) and perm[0] == 0


def concat_not_batch(node: Node, batched: list[bool]) -> bool:
    """Along another axis every piece must carry the batch: a constant piece would need
    the batch's size on dim 0."""
    return with_defaults(node)["axis"] != 0 and all(batched)


def slice_keeps_batch(node: Node, batched: list[bool]) -> bool:
    a = with_defaults(node)
    rows = node.inputs[0].shape[0]
    return first_input(node, batched) and (a["starts"][0], a["steps"][0], a["sizes"][0]) == (0, 1, rows)


def pad_keeps_batch(node: Node, batched: list[bool]) -> bool:
    pads, rank = tuple(with_defaults(node)["pads"]), len(node.inputs[0].shape)
    return first_input(node, batched) and pads[0] == 0 and pads[rank] == 0


def expand_keeps_batch(node: Node, batched: list[bool]) -> bool:
    """Broadcasting a batched input must not repeat it along dim 0 or move dim 0."""
    x, out = node.inputs[0].shape, node.outputs[0].shape
    return first_input(node, batched) and len(x) == len(out) and x[0] == out[0]


def tile_keeps_batch(node: Node, batched: list[bool]) -> bool:
    return first_input(node, batched) and tuple(with_defaults(node)["repeats"])[0] == 1


def gather_per_sample(node: Node, batched: list[bool]) -> bool:
    """Batched data gathered along another axis by constant indices, or a shared table
    (an embedding) looked up along axis 0 by batched indices."""
    axis = with_defaults(node)["axis"]
    data_batched, indices_batched = batched
    if data_batched:
        return not indices_batched and axis != 0
    return axis == 0 and len(node.inputs[1].shape) >= 1


def matmul_per_sample(node: Node, batched: list[bool]) -> bool:
    """Rows of a batched A through a shared B, or batch-broadcast products where each
    batched operand of rank >= 3 spans the output's dim 0."""
    a, b = node.inputs[0].shape, node.inputs[1].shape
    out = node.outputs[0].shape
    if batched[0] and not batched[1] and len(a) == 2:
        return len(b) <= 2
    for shape, carries in ((a, batched[0]), (b, batched[1])):
        if carries and not (len(shape) >= 3 and len(shape) == len(out) and shape[0] == out[0]):
            return False
        if not carries and len(shape) == len(out) and shape[0] != 1:
            return False
    return True

